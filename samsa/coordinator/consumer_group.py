"""One consumer group of KIP-848's protocol, as Kafka's group coordinator keeps it
(ConsumerGroup, ConsumerGroupMember): the group epoch, the target assignment and its epoch,
the members with their subscriptions and current assignments, and the regular expressions
the group subscribes to with the topics they resolved to.

Everything here is what the group's records in ``__consumer_offsets`` say
(consumer_records.py): ``replay`` applies one record, the same way when the records are
written (consumer_heartbeat.py writes them, then replays them) and when a coordinator loads
the partition. The group's state (Empty, Assigning, Reconciling, Stable) follows from them,
as Kafka's ``maybeUpdateGroupState``. What no record holds lives beside them: when each
member's session and revocation deadline end.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from enum import Enum, IntEnum

from samsa.coordinator.consumer_records import (
    CURRENT_MEMBER_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    REGULAR_EXPRESSION,
    TARGET_ASSIGNMENT_MEMBER,
    TARGET_ASSIGNMENT_METADATA,
    ClassicMemberMetadata,
    ConsumerKey,
    ConsumerValue,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberSubscriptionValue,
    RegexValue,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberValue,
    TopicPartitions,
)

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(IntEnum):
    """Kafka's MemberState, with its record values."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # must revoke partitions before it gets the next epoch
    UNRELEASED_PARTITIONS = 2  # waits for partitions that others have not revoked yet
    UNKNOWN = 127

    @classmethod
    def of(cls, value: int) -> MemberState:
        try:
            return cls(value)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class Subscription:
    """What a member tells about itself: its ConsumerGroupMemberMetadataValue."""

    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    topic_names: tuple[str, ...] = ()
    topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    classic: ClassicMemberMetadata | None = None

    def value(self) -> MemberSubscriptionValue:
        return MemberSubscriptionValue(
            self.instance_id, self.rack_id, self.client_id, self.client_host,
            self.topic_names, self.topic_regex, self.rebalance_timeout_ms,
            self.server_assignor, self.classic)

    @classmethod
    def of(cls, value: MemberSubscriptionValue) -> Subscription:
        return cls(value.instance_id, value.rack_id, value.client_id, value.client_host,
                   tuple(value.subscribed_topic_names), value.subscribed_topic_regex,
                   value.rebalance_timeout_ms, value.server_assignor, value.classic)


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    """Where a member is in its reconciliation: its ConsumerGroupCurrentMemberAssignmentValue."""

    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)

    def value(self) -> CurrentAssignmentValue:
        return CurrentAssignmentValue(self.member_epoch, self.previous_member_epoch,
                                      int(self.state), self.assigned, self.pending_revocation)

    @classmethod
    def of(cls, value: CurrentAssignmentValue) -> CurrentAssignment:
        return cls(value.member_epoch, value.previous_member_epoch, MemberState.of(value.state),
                   dict(value.assigned), dict(value.pending_revocation))

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    subscription: Subscription = field(default_factory=Subscription)
    current: CurrentAssignment = field(default_factory=CurrentAssignment)
    # soft state (loop time): the session's end, and the revocation deadline with the epoch
    # it applies to (Kafka's session and rebalance timeouts)
    session_deadline: float = 0.0
    revocation_deadline: tuple[float, int] | None = None
    # a classic member's: by when it must rejoin (told REBALANCE_IN_PROGRESS) and sync
    join_deadline: float | None = None
    sync_deadline: float | None = None

    @property
    def instance_id(self) -> str | None:
        return self.subscription.instance_id

    @property
    def member_epoch(self) -> int:
        return self.current.member_epoch

    @property
    def uses_classic_protocol(self) -> bool:
        return self.subscription.classic is not None

    def session_timeout_ms(self, consumer_protocol_ms: int) -> int:
        """A classic member's own session timeout; the group's for the consumer protocol."""
        classic = self.subscription.classic
        return classic.session_timeout_ms if classic is not None else consumer_protocol_ms


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    topics: frozenset[str]
    version: int
    timestamp: int


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, TopicPartitions] = field(default_factory=dict)  # member id -> target
    # (topic id, partition) -> the epoch of the member that holds it (assigned or revoking)
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    # soft state: when the regexes were last resolved (loop time) and over which topics
    regex_refreshed_at: float = float("-inf")
    regex_topic_names: frozenset[str] = frozenset()

    # --- what the group is --------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.current.is_reconciled_to(self.assignment_epoch)
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str | None) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id) if instance_id is not None else None
        return self.members.get(member_id) if member_id is not None else None

    def target_of(self, member_id: str, instance_id: str | None = None) -> TopicPartitions:
        """A member's target assignment; a static member's, by its instance id (its previous
        member id's, when it is being replaced)."""
        if instance_id is not None:
            previous = self.static_members.get(instance_id)
            return self.target.get(previous, {}) if previous is not None else {}
        return self.target.get(member_id, {})

    def waiting_on_unreleased_partition(self, member: ConsumerMember) -> bool:
        """Whether the member waits for a partition of its target another member still
        holds (Kafka's waitingOnUnreleasedPartition)."""
        if member.current.state != MemberState.UNRELEASED_PARTITIONS:
            return False
        for topic_id, partitions in self.target.get(member.member_id, {}).items():
            have = member.current.assigned.get(topic_id, frozenset())
            if any(p not in have and self.partition_epoch(topic_id, p) != -1
                   for p in partitions):
                return True
        return False

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member holding the partition, -1 when none does."""
        return self.partition_epochs.get((topic_id, partition), -1)

    def regex_subscribers(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for m in self.members.values():
            regex = m.subscription.topic_regex
            if regex:
                counts[regex] = counts.get(regex, 0) + 1
        return counts

    def subscribed_topic_names(self, regexes: dict[str, ResolvedRegex] | None = None,
                               members: list[ConsumerMember] | None = None) -> set[str]:
        """The topics the members subscribe to, by name and through their regexes."""
        resolved = self.regexes if regexes is None else regexes
        names: set[str] = set()
        for m in self.members.values() if members is None else members:
            names.update(m.subscription.topic_names)
            regex = m.subscription.topic_regex
            if regex and regex in resolved:
                names.update(resolved[regex].topics)
        return names

    def preferred_assignor(self) -> str | None:
        """The server assignor most members ask for, None when none asks."""
        counts: dict[str, int] = {}
        for m in self.members.values():
            name = m.subscription.server_assignor
            if name:
                counts[name] = counts.get(name, 0) + 1
        return max(counts, key=lambda n: counts[n]) if counts else None

    # --- replay ---------------------------------------------------------------------------------

    def replay(self, key: ConsumerKey, value: ConsumerValue | None) -> None:
        """Apply one record of this group (its tombstone when ``value`` is None). A group
        tombstone is the caller's: it drops the group."""
        kind = key.type
        if kind == GROUP_METADATA and isinstance(value, GroupEpochValue):
            self.group_epoch, self.metadata_hash = value.epoch, value.metadata_hash
        elif kind == MEMBER_METADATA:
            if value is None:
                self._remove_member(key.name)
            else:
                assert isinstance(value, MemberSubscriptionValue)
                member = self.members.get(key.name) or ConsumerMember(key.name)
                self._put_member(member, Subscription.of(value), member.current)
        elif kind == TARGET_ASSIGNMENT_METADATA:
            if value is None:
                self.assignment_epoch = -1
            else:
                assert isinstance(value, TargetAssignmentEpochValue)
                self.assignment_epoch = value.assignment_epoch
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                self.target.pop(key.name, None)
            else:
                assert isinstance(value, TargetAssignmentMemberValue)
                self.target[key.name] = dict(value.partitions)
        elif kind == CURRENT_MEMBER_ASSIGNMENT:
            found = self.members.get(key.name)
            if value is None:
                if found is not None:  # the member leaves: it holds nothing from now on
                    self._put_member(found, found.subscription, CurrentAssignment(
                        LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH))
            else:
                assert isinstance(value, CurrentAssignmentValue)
                member = found or ConsumerMember(key.name)
                self._put_member(member, member.subscription, CurrentAssignment.of(value))
        elif kind == REGULAR_EXPRESSION:
            if value is None:
                self.regexes.pop(key.name, None)
            else:
                assert isinstance(value, RegexValue)
                self.regexes[key.name] = ResolvedRegex(frozenset(value.topics), value.version,
                                                       value.timestamp)
        elif kind == PARTITION_METADATA:
            pass  # Kafka 4.1+ keeps the metadata hash in the group's record instead

    def _put_member(self, member: ConsumerMember, subscription: Subscription,
                    current: CurrentAssignment) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._drop_epochs(old.current)
            gone = old.instance_id
            if (gone is not None and gone != subscription.instance_id
                    and self.static_members.get(gone) == old.member_id):
                del self.static_members[gone]
        member.subscription, member.current = subscription, current
        self.members[member.member_id] = member
        for parts in (current.assigned, current.pending_revocation):
            for topic_id, partitions in parts.items():
                for p in partitions:
                    self.partition_epochs[(topic_id, p)] = current.member_epoch
        if subscription.instance_id is not None:
            self.static_members[subscription.instance_id] = member.member_id

    def _drop_epochs(self, current: CurrentAssignment) -> None:
        for parts in (current.assigned, current.pending_revocation):
            for topic_id, partitions in parts.items():
                for p in partitions:
                    if self.partition_epochs.get((topic_id, p)) == current.member_epoch:
                        del self.partition_epochs[(topic_id, p)]

    def _remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self._drop_epochs(member.current)
        instance_id = member.instance_id
        if instance_id is not None and self.static_members.get(instance_id) == member_id:
            del self.static_members[instance_id]


def with_epoch(current: CurrentAssignment, epoch: int) -> CurrentAssignment:
    """Kafka's updateMemberEpoch: the previous epoch becomes the old one."""
    return replace(current, previous_member_epoch=current.member_epoch, member_epoch=epoch)
