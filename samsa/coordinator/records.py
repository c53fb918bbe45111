"""Kafka's record keys and values in ``__consumer_offsets``, in Kafka's own formats.

Every key and value starts with an int16 version. Keys: 0 or 1 is an offset commit key
(group, topic, partition), 2 a group metadata key (group). Values follow Kafka's schemas
OffsetCommitValue (versions 0-4) and GroupMetadataValue (0-4); version 4 is the first flexible
one (compact lengths, tagged fields). A null value is a tombstone: the offset or group is gone.

We write what Kafka 3.x writes: OffsetCommitValue v3 (v1 when an expire timestamp is set) and
GroupMetadataValue v3. We read every version. Broken or unknown data raises CorruptRecordError.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass

from samsa.errors import CorruptRecordError

__all__ = [
    "GroupKey",
    "GroupValue",
    "MemberValue",
    "OffsetKey",
    "OffsetValue",
    "decode_group_value",
    "decode_key",
    "decode_offset_value",
    "encode_group_key",
    "encode_group_value",
    "encode_offset_key",
    "encode_offset_value",
    "partition_for",
]

OFFSET_KEY_VERSION = 1  # Kafka writes 1; 0 is read the same way
GROUP_KEY_VERSION = 2
MAX_VALUE_VERSION = 4
FLEXIBLE_VERSION = 4


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberValue]


# -- writing (non-flexible versions only) ------------------------------------------------------


class _Writer:
    def __init__(self, version: int) -> None:
        self.buf = bytearray(struct.pack(">h", version))

    def int32(self, n: int) -> None:
        self.buf += struct.pack(">i", n)

    def int64(self, n: int) -> None:
        self.buf += struct.pack(">q", n)

    def string(self, s: str | None) -> None:
        if s is None:
            self.buf += struct.pack(">h", -1)
            return
        data = s.encode()
        if len(data) > 0x7FFF:
            raise ValueError(f"string of {len(data)} bytes is longer than 32767")
        self.buf += struct.pack(">h", len(data)) + data

    def blob(self, b: bytes) -> None:
        self.buf += struct.pack(">i", len(b)) + b


def encode_offset_key(k: OffsetKey) -> bytes:
    w = _Writer(OFFSET_KEY_VERSION)
    w.string(k.group)
    w.string(k.topic)
    w.int32(k.partition)
    return bytes(w.buf)


def encode_group_key(k: GroupKey) -> bytes:
    w = _Writer(GROUP_KEY_VERSION)
    w.string(k.group)
    return bytes(w.buf)


def encode_offset_value(v: OffsetValue) -> bytes:
    """Version 3; version 1 (which has no leader epoch) when an expire timestamp is set, as
    Kafka does."""
    w = _Writer(1 if v.expire_timestamp != -1 else 3)
    w.int64(v.offset)
    if v.expire_timestamp == -1:
        w.int32(v.leader_epoch)
    w.string(v.metadata)
    w.int64(v.commit_timestamp)
    if v.expire_timestamp != -1:
        w.int64(v.expire_timestamp)
    return bytes(w.buf)


def encode_group_value(v: GroupValue) -> bytes:
    """Version 3."""
    w = _Writer(3)
    w.string(v.protocol_type)
    w.int32(v.generation)
    w.string(v.protocol)
    w.string(v.leader)
    w.int64(v.current_state_timestamp)
    w.int32(len(v.members))
    for m in v.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.int32(m.rebalance_timeout_ms)
        w.int32(m.session_timeout_ms)
        w.blob(m.subscription)
        w.blob(m.assignment)
    return bytes(w.buf)


# -- reading -----------------------------------------------------------------------------------


class Reader:
    """Reads one key or value; every failure is a CorruptRecordError naming ``what``."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.what = what
        self.pos = 0
        self.flexible = False

    def fail(self, problem: str) -> CorruptRecordError:
        return CorruptRecordError(f"corrupt {self.what}: {problem}")

    def take(self, n: int, field: str) -> bytes:
        if n > len(self.data) - self.pos:
            raise self.fail(f"truncated in {field} at byte {self.pos} ({len(self.data)} in all)")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def int8(self, field: str) -> int:
        return int.from_bytes(self.take(1, field), "big", signed=True)

    def int16(self, field: str) -> int:
        return int.from_bytes(self.take(2, field), "big", signed=True)

    def int32(self, field: str) -> int:
        return int.from_bytes(self.take(4, field), "big", signed=True)

    def int64(self, field: str) -> int:
        return int.from_bytes(self.take(8, field), "big", signed=True)

    def uvarint(self, field: str) -> int:
        result = 0
        for shift in range(0, 35, 7):
            b = self.take(1, field)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
        raise self.fail(f"varint longer than 5 bytes in {field}")

    def length(self, field: str, width: int) -> int:
        """A length, -1 for null: compact (N+1) when flexible, int16/int32 otherwise."""
        if self.flexible:
            n = self.uvarint(field) - 1
        else:
            n = self.int16(field) if width == 2 else self.int32(field)
        if n < -1:
            raise self.fail(f"negative length {n} in {field}")
        return n

    def nullable_string(self, field: str) -> str | None:
        n = self.length(field, 2)
        if n == -1:
            return None
        try:
            return self.take(n, field).decode()
        except UnicodeDecodeError as e:
            raise self.fail(f"invalid UTF-8 in {field}") from e

    def string(self, field: str) -> str:
        s = self.nullable_string(field)
        if s is None:
            raise self.fail(f"null in non-nullable {field}")
        return s

    def blob(self, field: str) -> bytes:
        n = self.length(field, 4)
        if n == -1:
            raise self.fail(f"null in non-nullable {field}")
        return self.take(n, field)

    def array_len(self, field: str) -> int:
        n = self.length(field, 4)
        if n == -1:
            raise self.fail(f"null in non-nullable {field}")
        return n

    def tags(self, field: str) -> None:
        """Skip a flexible struct's tagged fields (none are known)."""
        if self.flexible:
            for _ in range(self.uvarint(f"{field} tag count")):
                self.uvarint(f"{field} tag")
                self.take(self.uvarint(f"{field} tag size"), f"{field} tagged field")

    def end(self) -> None:
        self.tags(self.what)
        if self.pos != len(self.data):
            raise self.fail(f"{len(self.data) - self.pos} bytes left over after the record")

    def value_version(self) -> int:
        version = self.int16("version")
        if not 0 <= version <= MAX_VALUE_VERSION:
            raise self.fail(f"unknown version {version} (known: 0-{MAX_VALUE_VERSION})")
        self.flexible = version >= FLEXIBLE_VERSION
        return version


def decode_key(data: bytes) -> OffsetKey | GroupKey:
    r = Reader(bytes(data), "__consumer_offsets key")
    version = r.int16("version")
    if version in (0, 1):
        key: OffsetKey | GroupKey = OffsetKey(
            r.string("group"), r.string("topic"), r.int32("partition")
        )
    elif version == GROUP_KEY_VERSION:
        key = GroupKey(r.string("group"))
    else:
        raise r.fail(f"unknown version {version} (0 and 1: offset commit, 2: group metadata)")
    r.end()
    return key


def decode_offset_value(data: bytes | None) -> OffsetValue | None:
    """The committed offset, or None for a tombstone (the offset was deleted)."""
    if data is None:
        return None
    r = Reader(bytes(data), "OffsetCommitValue")
    version = r.value_version()
    offset = r.int64("offset")
    leader_epoch = r.int32("leaderEpoch") if version >= 3 else -1
    metadata = r.string("metadata")
    commit_timestamp = r.int64("commitTimestamp")
    expire_timestamp = r.int64("expireTimestamp") if version == 1 else -1
    r.end()
    return OffsetValue(offset, leader_epoch, metadata, commit_timestamp, expire_timestamp)


def _read_member(r: Reader, version: int) -> MemberValue:
    member_id = r.string("memberId")
    group_instance_id = r.nullable_string("groupInstanceId") if version >= 3 else None
    client_id = r.string("clientId")
    client_host = r.string("clientHost")
    rebalance_timeout = r.int32("rebalanceTimeout") if version >= 1 else None
    session_timeout = r.int32("sessionTimeout")
    subscription = r.blob("subscription")
    assignment = r.blob("assignment")
    r.tags("member")
    return MemberValue(
        member_id,
        group_instance_id,
        client_id,
        client_host,
        # v0 had no rebalance timeout: Kafka takes the session timeout
        session_timeout if rebalance_timeout is None else rebalance_timeout,
        session_timeout,
        subscription,
        assignment,
    )


def decode_group_value(data: bytes | None) -> GroupValue | None:
    """The group's metadata, or None for a tombstone (the group was deleted)."""
    if data is None:
        return None
    r = Reader(bytes(data), "GroupMetadataValue")
    version = r.value_version()
    protocol_type = r.string("protocolType")
    generation = r.int32("generation")
    protocol = r.nullable_string("protocol")
    leader = r.nullable_string("leader")
    current_state_timestamp = r.int64("currentStateTimestamp") if version >= 2 else -1
    members = [_read_member(r, version) for _ in range(r.array_len("members"))]
    r.end()
    return GroupValue(protocol_type, generation, protocol, leader, current_state_timestamp, members)


# -- partition choice --------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)  # every request of a group asks again
def _java_hash(s: str) -> int:
    """Java's String.hashCode as an unsigned 32-bit value: over UTF-16 code units."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def partition_for(group: str, partitions: int) -> int:
    """The __consumer_offsets (or __transaction_state) partition of a group (or transactional
    id): Utils.abs(id.hashCode()) % partitions, where Utils.abs is Math.abs except that
    Integer.MIN_VALUE gives 0 (not n & 0x7fffffff, which differs for negative hashes)."""
    if partitions <= 0:
        raise ValueError(f"partitions must be positive, got {partitions}")
    h = _java_hash(group)
    signed = h - (1 << 32) if h & 0x80000000 else h
    return (0 if signed == -(1 << 31) else abs(signed)) % partitions
