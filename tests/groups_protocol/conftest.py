"""Helpers for the classic consumer group tests: a blocking raw Kafka client (kio entities at
explicit versions), the consumer protocol's subscription and assignment bytes, brokers, and a
helper that forms a group.

Every wait is bounded: sockets time out after ``WAIT_S`` and ``wait_for`` gives up at its
deadline. Each member of a group needs its own connection: JoinGroup and SyncGroup block, and a
connection answers one request at a time.
"""

from __future__ import annotations

import dataclasses
import itertools
import select
import socket
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka_frames import decode_response, encode_request
from kio.schema.errors import ErrorCode

import samsa

__all__ = ["ErrorCode"]

METADATA, FETCH, OFFSET_COMMIT, OFFSET_FETCH = 3, 1, 8, 9
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, CREATE_TOPICS, DELETE_GROUPS, OFFSET_DELETE = 15, 16, 19, 42, 47

WAIT_S = 10.0  # longest any single response may take
SESSION_MS = 10_000
REBALANCE_MS = 10_000
OFFSETS_TOPIC = "__consumer_offsets"

_SIZE = struct.Struct(">i")


def wait_for(predicate: Callable[[], Any], timeout: float = WAIT_S, interval: float = 0.05,
             what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# --- consumer protocol bytes (ConsumerProtocolSubscription / Assignment v0) -------------------


def _string(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0: int16 version, [string] topics, nullable bytes user
    data (-1 here)."""
    out = struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics)
    return out + struct.pack(">i", -1)


def assignment(parts: dict[str, Sequence[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: int16 version, [topic, [int32 partition]], user data -1."""
    out = struct.pack(">hi", 0, len(parts))
    for topic, partitions in parts.items():
        out += _string(topic) + struct.pack(">i", len(partitions))
        out += b"".join(struct.pack(">i", p) for p in partitions)
    return out + struct.pack(">i", -1)


# --- kio entities ---------------------------------------------------------------------------


# --- the client -----------------------------------------------------------------------------


Offsets = dict[tuple[str, int], "int | tuple[int, str | None, int]"]


class Client:
    """One blocking connection. ``send``/``recv`` split a request from its response, so a
    test can leave a JoinGroup or SyncGroup waiting while other connections act."""

    def __init__(self, port: int, client_id: str = "raw", timeout: float = WAIT_S) -> None:
        self.client_id = client_id
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        self._corr = itertools.count(1)
        self._waiting: list[tuple[int, int, int]] = []  # (correlation id, api key, version)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def _read_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        corr = next(self._corr)
        self.sock.sendall(encode_request(api_key, version, body, corr, self.client_id))
        self._waiting.append((corr, api_key, version))

    def recv(self, timeout: float | None = None) -> Any:
        """The response to the oldest request sent and not yet received."""
        corr, api_key, version = self._waiting.pop(0)
        old = self.sock.gettimeout()
        if timeout is not None:
            self.sock.settimeout(timeout)
        try:
            (size,) = _SIZE.unpack(self._read_exactly(4))
            got, response = decode_response(api_key, version, self._read_exactly(size))
        finally:
            self.sock.settimeout(old)
        assert got == corr, f"correlation id {got}, expected {corr}"
        return response

    def request(self, api_key: int, version: int, body: dict[str, Any],
                timeout: float | None = None) -> Any:
        self.send(api_key, version, body)
        return self.recv(timeout)

    def silent(self, seconds: float) -> bool:
        """True when nothing arrives on the connection for ``seconds``."""
        readable, _, _ = select.select([self.sock], [], [], seconds)
        return not readable

    # --- topics ---------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1) -> None:
        body = {"topics": [{"name": name, "num_partitions": partitions,
                            "replication_factor": 1, "assignments": [], "configs": []}],
                "timeout": 10_000, "validate_only": False}
        result = self.request(CREATE_TOPICS, 5, body).topics[0]
        assert result.error_code == ErrorCode.none, result

    def metadata(self, topics: Sequence[str] | None) -> Any:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}
        return self.request(METADATA, 8, body)

    def fetch_records(self, topic: str, partition: int, offset: int = 0) -> bytes | None:
        body = {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 16 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "log_start_offset": -1, "partition_max_bytes": 16 << 20}]}],
            "forgotten_topics_data": [], "rack_id": "",
        }
        response = self.request(FETCH, 11, body)
        data = response.responses[0].partitions[0]
        assert data.error_code == ErrorCode.none, data
        return data.records

    # --- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -----------------------------------

    def send_join(self, group: str, member_id: str = "", *, version: int = 9,
                  protocols: Sequence[tuple[str, bytes]] | None = None,
                  protocol_type: str = "consumer", session_ms: int = SESSION_MS,
                  rebalance_ms: int = REBALANCE_MS, instance_id: str | None = None) -> None:
        if protocols is None:
            protocols = [("range", subscription("t"))]
        self.send(JOIN_GROUP, version, {
            "group_id": group, "session_timeout": session_ms, "rebalance_timeout": rebalance_ms,
            "member_id": member_id, "group_instance_id": instance_id,
            "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols], "reason": None,
        })

    def join(self, group: str, member_id: str = "", *, timeout: float | None = None,
             **kwargs: Any) -> Any:
        self.send_join(group, member_id, **kwargs)
        return self.recv(timeout)

    def join_new(self, group: str, **kwargs: Any) -> Any:
        """Join as a new member: v4+ answers MEMBER_ID_REQUIRED first, then join with it."""
        response = self.join(group, **kwargs)
        if response.error_code == ErrorCode.member_id_required:
            response = self.join(group, response.member_id, **kwargs)
        return response

    def send_sync(self, group: str, generation: int, member_id: str,
                  assignments: dict[str, bytes] | None = None, *, version: int = 5,
                  instance_id: str | None = None, protocol_type: str | None = "consumer",
                  protocol_name: str | None = "range") -> None:
        self.send(SYNC_GROUP, version, {
            "group_id": group, "generation_id": generation, "member_id": member_id,
            "group_instance_id": instance_id, "protocol_type": protocol_type,
            "protocol_name": protocol_name,
            "assignments": [{"member_id": m, "assignment": a}
                            for m, a in (assignments or {}).items()],
        })

    def sync(self, group: str, generation: int, member_id: str,
             assignments: dict[str, bytes] | None = None, *, timeout: float | None = None,
             **kwargs: Any) -> Any:
        self.send_sync(group, generation, member_id, assignments, **kwargs)
        return self.recv(timeout)

    def heartbeat(self, group: str, generation: int, member_id: str, *, version: int = 4,
                  instance_id: str | None = None) -> ErrorCode:
        response = self.request(HEARTBEAT, version, {
            "group_id": group, "generation_id": generation, "member_id": member_id,
            "group_instance_id": instance_id,
        })
        return response.error_code

    def leave(self, group: str, member_id: str, *, version: int = 0) -> ErrorCode:
        """LeaveGroup v0-2: one member."""
        assert version < 3
        return self.request(LEAVE_GROUP, version, {"group_id": group, "member_id": member_id}
                            ).error_code

    def leave_members(self, group: str, members: Sequence[tuple[str, str | None]], *,
                      version: int = 5) -> Any:
        """LeaveGroup v3+: (member id, group instance id) identities."""
        assert version >= 3
        return self.request(LEAVE_GROUP, version, {"group_id": group, "members": [
            {"member_id": m, "group_instance_id": i, "reason": None} for m, i in members
        ]})

    # --- offsets ----------------------------------------------------------------------------

    def commit(self, group: str, offsets: Offsets, *, generation: int = -1,
               member_id: str = "", instance_id: str | None = None, version: int = 9
               ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit; ``offsets`` maps (topic, partition) to an offset or to
        (offset, metadata, leader epoch)."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), value in offsets.items():
            offset, metadata, epoch = value if isinstance(value, tuple) else (value, "", -1)
            topics.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": offset,
                "committed_leader_epoch": epoch, "committed_metadata": metadata,
            })
        response = self.request(OFFSET_COMMIT, version, {
            "group_id": group, "generation_id_or_member_epoch": generation,
            "member_id": member_id, "group_instance_id": instance_id, "retention_time": -1,
            "topics": [{"name": t, "partitions": p} for t, p in topics.items()],
        })
        return {(t.name, p.partition_index): p.error_code
                for t in response.topics for p in t.partitions}

    @staticmethod
    def _fetch_topics(topics: dict[str, Sequence[int]] | None) -> Any:
        if topics is None:
            return None
        return [{"name": t, "partition_indexes": list(p)} for t, p in topics.items()]

    def fetch_offsets(self, group: str, topics: dict[str, Sequence[int]] | None, *,
                      version: int = 7) -> dict[tuple[str, int], Any]:
        """OffsetFetch of one group (v1-v9; v8+ as a one-group request): (topic, partition)
        -> the partition entry. Fails on a top-level or group error."""
        if version >= 8:
            response = self.fetch_offsets_groups({group: topics}, version=version)
            (entry,) = response.groups
            assert entry.group_id == group and entry.error_code == ErrorCode.none, entry
            found = entry.topics
        else:
            response = self.request(OFFSET_FETCH, version, {
                "group_id": group, "topics": self._fetch_topics(topics), "require_stable": False,
            })
            if version >= 2:
                assert response.error_code == ErrorCode.none, response
            found = response.topics
        return {(t.name, p.partition_index): p for t in found for p in t.partitions}

    def fetch_offsets_groups(self, groups: dict[str, dict[str, Sequence[int]] | None], *,
                             version: int = 9) -> Any:
        return self.request(OFFSET_FETCH, version, {
            "groups": [{"group_id": g, "member_id": None, "member_epoch": -1,
                        "topics": self._fetch_topics(t)} for g, t in groups.items()],
            "require_stable": False,
        })

    def committed(self, group: str, topic: str, partition: int) -> int:
        return self.fetch_offsets(group, {topic: [partition]})[(topic, partition)].committed_offset

    # --- group administration -------------------------------------------------------------

    def describe(self, *groups: str, version: int = 5) -> list[Any]:
        response = self.request(DESCRIBE_GROUPS, version, {
            "groups": list(groups), "include_authorized_operations": False,
        })
        return list(response.groups)

    def list_groups(self, states: Sequence[str] = (), types: Sequence[str] = (), *,
                    version: int = 5) -> Any:
        response = self.request(LIST_GROUPS, version, {
            "states_filter": list(states), "types_filter": list(types),
        })
        assert response.error_code == ErrorCode.none, response
        return response.groups

    def delete_groups(self, *groups: str, version: int = 2) -> dict[str, ErrorCode]:
        response = self.request(DELETE_GROUPS, version, {"groups_names": list(groups)})
        return {r.group_id: r.error_code for r in response.results}

    def offset_delete(self, group: str, topics: dict[str, Sequence[int]]) -> Any:
        return self.request(OFFSET_DELETE, 0, {"group_id": group, "topics": [
            {"name": t, "partitions": [{"partition_index": p} for p in ps]}
            for t, ps in topics.items()
        ]})


# --- groups ---------------------------------------------------------------------------------


@dataclasses.dataclass
class Member:
    client: Client
    group: str
    member_id: str
    generation: int
    leader: str
    protocol: str | None
    join_members: list[Any]
    instance_id: str | None = None
    assignment: bytes = b""
    protocol_type: str | None = None  # from JoinGroup v7+; None: not checked by SyncGroup

    @property
    def is_leader(self) -> bool:
        return self.member_id == self.leader

    def heartbeat(self, version: int = 4) -> ErrorCode:
        return self.client.heartbeat(self.group, self.generation, self.member_id,
                                     version=version, instance_id=self.instance_id)


def join_all(clients: Sequence[Client], group: str, *, version: int = 9,
             protocols: Sequence[Sequence[tuple[str, bytes]]] | None = None,
             instance_ids: Sequence[str | None] | None = None, **kwargs: Any) -> list[Member]:
    """Every client joins in the same join phase: all take member ids first (v4+), then all
    rejoin; the coordinator waits for the pending members, so one generation covers all."""
    instance_ids = instance_ids or [None] * len(clients)
    member_ids = []
    for i, client in enumerate(clients):
        kw = dict(kwargs, version=version, instance_id=instance_ids[i])
        if protocols is not None:
            kw["protocols"] = protocols[i]
        if version >= 4 and instance_ids[i] is None:
            first = client.join(group, **kw)
            assert first.error_code == ErrorCode.member_id_required, first
            member_ids.append(first.member_id)
        else:
            member_ids.append("")
    # Static members first: a dynamic member's pending id holds the join phase open for them.
    for i in sorted(range(len(clients)), key=lambda i: instance_ids[i] is None):
        kw = dict(kwargs, version=version, instance_id=instance_ids[i])
        if protocols is not None:
            kw["protocols"] = protocols[i]
        clients[i].send_join(group, member_ids[i], **kw)
    members = []
    for i, client in enumerate(clients):
        r = client.recv()
        assert r.error_code == ErrorCode.none, r
        members.append(Member(client, group, r.member_id, r.generation_id, r.leader,
                              r.protocol_name, list(r.members), instance_ids[i],
                              protocol_type=getattr(r, "protocol_type", None)))
    return members


def sync_all(members: Sequence[Member], assignments: dict[str, bytes] | None = None,
             *, version: int = 5) -> None:
    """Followers sync first, the leader last (with ``assignments``, default one per member);
    each member's assignment is stored on it."""
    if assignments is None:
        assignments = {m.member_id: f"assignment of {m.member_id}".encode() for m in members}
    ordered = sorted(members, key=lambda m: m.is_leader)
    for m in ordered:
        m.client.send_sync(m.group, m.generation, m.member_id,
                           assignments if m.is_leader else None, version=version,
                           instance_id=m.instance_id, protocol_type=m.protocol_type,
                           protocol_name=m.protocol)
    for m in ordered:
        r = m.client.recv()
        assert r.error_code == ErrorCode.none, r
        m.assignment = r.assignment


def form_group(clients: Sequence[Client], group: str, **kwargs: Any) -> list[Member]:
    """A Stable group of ``clients`` (one join phase, then SyncGroup)."""
    members = join_all(clients, group, **kwargs)
    assert len({m.generation for m in members}) == 1
    assert len({m.leader for m in members}) == 1
    sync_all(members)
    return members


def described(client: Client, group: str) -> Any:
    (entry,) = client.describe(group)
    assert entry.error_code == ErrorCode.none, entry
    return entry


# --- __consumer_offsets records, decoded independently of samsa (Kafka's schemas) ---------


class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def blob(self) -> bytes:
        n = self.take(">i")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b

    def done(self) -> bool:
        return self.pos == len(self.data)


def java_partition_for(group: str, partitions: int = 50) -> int:
    """Utils.abs(group.hashCode()) % partitions for an ASCII group id: Math.abs of the signed
    hash, 0 for Integer.MIN_VALUE."""
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions


# --- brokers and connections ----------------------------------------------------------------


# Short sessions are allowed so tests can let them expire.
DEFAULT_KEYS: dict[str, Any] = {"group_min_session_timeout_ms": 100}


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., samsa.Broker]]:
    """``broker_factory(**keys)``: a started broker (own data dir), stopped at the end."""
    started: list[samsa.Broker] = []
    counter = itertools.count()

    def make(**keys: Any) -> samsa.Broker:
        b = samsa.Broker(tmp_path / f"data{next(counter)}", **{**DEFAULT_KEYS, **keys})
        b.start()
        started.append(b)
        return b

    yield make
    for b in reversed(started):
        b.stop()


@pytest.fixture
def broker(broker_factory: Callable[..., samsa.Broker]) -> samsa.Broker:
    return broker_factory()


@pytest.fixture
def connect(request: pytest.FixtureRequest, broker_factory: Callable[..., samsa.Broker]
            ) -> Iterator[Callable[..., Client]]:
    """``connect(client_id="raw", to=None)`` opens a Client to ``to`` (default: the ``broker``
    fixture); all are closed before any broker stops."""
    opened: list[Client] = []

    def open_(client_id: str = "raw", to: samsa.Broker | None = None) -> Client:
        target = to if to is not None else request.getfixturevalue("broker")
        client = Client(target.port, client_id)
        opened.append(client)
        return client

    yield open_
    for client in opened:
        client.close()


def clients(connect: Callable[..., Client], n: int, prefix: str = "member") -> list[Client]:
    return [connect(f"{prefix}-{i}") for i in range(n)]


def heartbeats(members: Iterable[Member]) -> list[ErrorCode]:
    return [m.heartbeat() for m in members]
