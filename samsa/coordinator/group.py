"""One consumer group as Kafka's classic group coordinator keeps it: members, generation,
protocol, leader, and the state machine Empty -> PreparingRebalance -> CompletingRebalance ->
Stable (and Dead once deleted)."""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from samsa.coordinator.records import OffsetValue
from samsa.coordinator.state_machine import check_transition


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# state -> the states it may be entered from: Kafka's GroupState.validPreviousStates
GROUP_TRANSITIONS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    last_heartbeat: float = 0.0
    join_waiter: asyncio.Future[dict[str, Any]] | None = None
    sync_waiter: asyncio.Future[dict[str, Any]] | None = None

    def metadata(self, protocol: str | None) -> bytes:
        return next((m for name, m in self.protocols if name == protocol), b"")

    @property
    def awaiting_join(self) -> bool:
        return self.join_waiter is not None and not self.join_waiter.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_waiter is not None and not self.sync_waiter.done()


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    # member ids handed out with MEMBER_ID_REQUIRED -> (loop time, session timeout ms)
    pending_members: dict[str, tuple[float, int]] = field(default_factory=dict)
    pending_sync: set[str] = field(default_factory=set)  # joined this generation, not synced
    offsets: dict[tuple[str, int], OffsetValue] = field(default_factory=dict)
    # where each committed offset's record is in __consumer_offsets: a transaction's offsets
    # apply at its commit only over older values (Kafka's CommitRecordMetadataAndOffset)
    offset_positions: dict[tuple[str, int], int] = field(default_factory=dict)
    # transactional offset commits not yet committed or aborted:
    # producer id -> {partition: (offset, position of its record)}
    pending_txn_offsets: dict[int, dict[tuple[str, int], tuple[OffsetValue, int]]] = field(
        default_factory=dict)

    def set_offset(self, tp: tuple[str, int], value: OffsetValue, position: int) -> None:
        self.offsets[tp] = value
        self.offset_positions[tp] = position

    def drop_offset(self, tp: tuple[str, int]) -> OffsetValue | None:
        self.offset_positions.pop(tp, None)
        return self.offsets.pop(tp, None)
    state_timestamp: int = -1  # ms when the state last changed (offset expiry counts from it)
    rebalance_deadline: asyncio.TimerHandle | None = None
    initial_join_until: float = 0.0  # loop time until which an empty group's first join waits

    def transition(self, state: GroupState, now_ms: int) -> None:
        """Move along GROUP_TRANSITIONS (IllegalStateTransition otherwise)."""
        check_transition(f"group {self.group_id!r}", GROUP_TRANSITIONS, self.state, state)
        self.state = state
        self.state_timestamp = now_ms

    def restore(self, state: GroupState, at_ms: int) -> None:
        """The state a loaded group was stored in (no move: it is where it was)."""
        self.state = state
        self.state_timestamp = at_ms

    def supported_protocols(self) -> set[str]:
        """Protocols every member supports."""
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str | None:
        """Kafka's vote: each member votes for its most preferred protocol that all support."""
        candidates = self.supported_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next((name for name, _ in member.protocols if name in candidates), None)
            if choice is not None:
                votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda name: votes[name]) if votes else None

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), None when unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            parsed = parse_subscription(member.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics |= parsed
        return topics


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def parse_subscription(metadata: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (any version: the topic list comes first)."""
    try:
        pos = 2  # version
        (count,) = _I32.unpack_from(metadata, pos)
        pos += 4
        topics = set()
        for _ in range(count):
            (length,) = _I16.unpack_from(metadata, pos)
            pos += 2
            topics.add(metadata[pos : pos + length].decode())
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
