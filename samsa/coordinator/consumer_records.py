"""The records of consumer groups (KIP-848) in ``__consumer_offsets``, in Kafka's formats.

A key is an int16 record type followed by its fields (non-flexible strings); a value is an
int16 version (0 for every type here) followed by a flexible struct (compact strings and
arrays, tagged fields). The types, as Kafka's group coordinator numbers them
(group-coordinator/src/main/resources/common/message/*.json, ``apiKey``):

====  ===========================================  ============================================
type  key                                          value
====  ===========================================  ============================================
3     ConsumerGroupMetadataKey (group)             group epoch; tagged 0: the metadata hash
4     ConsumerGroupPartitionMetadataKey (group)    subscribed topics' metadata (read, not
                                                   written: Kafka 4.1+ writes the hash instead)
5     ConsumerGroupMemberMetadataKey (group, m)    a member's subscription and client
6     ConsumerGroupTargetAssignmentMetadataKey     the target assignment's epoch; tagged 0: its
                                                   time
7     ConsumerGroupTargetAssignmentMemberKey       a member's target partitions
8     ConsumerGroupCurrentMemberAssignmentKey      a member's epochs, state and partitions
16    ConsumerGroupRegularExpressionKey (g, regex) the topics a regex resolved to
====  ===========================================  ============================================

We write what Kafka 4.4 writes (checked byte for byte against its generated classes in
tests/coordinator/test_consumer_records.py) and read every field Kafka 4.4 may write,
skipping tagged fields we do not know. A null value is a tombstone.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from samsa.coordinator.records import Reader
from samsa.errors import CorruptRecordError

__all__ = [
    "CONSUMER_RECORD_TYPES",
    "ClassicMemberMetadata",
    "ConsumerKey",
    "CurrentAssignmentValue",
    "GroupEpochValue",
    "MemberSubscriptionValue",
    "RegexValue",
    "TargetAssignmentEpochValue",
    "TopicPartitions",
    "decode_consumer_key",
    "decode_consumer_value",
    "encode_consumer_key",
    "encode_consumer_value",
]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16

# record type -> whether its key names a member (or a regex) after the group
CONSUMER_RECORD_TYPES: dict[int, str | None] = {
    GROUP_METADATA: None,
    PARTITION_METADATA: None,
    MEMBER_METADATA: "member",
    TARGET_ASSIGNMENT_METADATA: None,
    TARGET_ASSIGNMENT_MEMBER: "member",
    CURRENT_MEMBER_ASSIGNMENT: "member",
    REGULAR_EXPRESSION: "regex",
}

# topic id -> partitions
TopicPartitions = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerKey:
    """A consumer group record's key: its type, the group, and the member id or the regex
    for the types that have one (else "")."""

    type: int
    group: str
    name: str = ""


@dataclass(frozen=True, slots=True)
class GroupEpochValue:
    epoch: int
    metadata_hash: int = 0


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member of the classic protocol in a consumer group (KIP-848's upgrade path)
    joined with; kept as read."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class MemberSubscriptionValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


@dataclass(frozen=True, slots=True)
class TargetAssignmentEpochValue:
    assignment_epoch: int
    assignment_timestamp: int = 0


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberValue:
    partitions: TopicPartitions


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: TopicPartitions
    pending_revocation: TopicPartitions
    # Kafka 4.4's per-partition assignment epochs (tagged); read and kept, not written
    assignment_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    topics: tuple[tuple[uuid.UUID, str, int], ...]


@dataclass(frozen=True, slots=True)
class RegexValue:
    topics: tuple[str, ...]
    version: int
    timestamp: int


ConsumerValue = (GroupEpochValue | PartitionMetadataValue | MemberSubscriptionValue
                 | TargetAssignmentEpochValue | TargetAssignmentMemberValue
                 | CurrentAssignmentValue | RegexValue)


# -- keys -------------------------------------------------------------------------------------


def _short_string(buf: bytearray, s: str) -> None:
    data = s.encode()
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is longer than 32767")
    buf += struct.pack(">h", len(data)) + data


def encode_consumer_key(key: ConsumerKey) -> bytes:
    if key.type not in CONSUMER_RECORD_TYPES:
        raise ValueError(f"not a consumer group record type: {key.type}")
    buf = bytearray(struct.pack(">h", key.type))
    _short_string(buf, key.group)
    if CONSUMER_RECORD_TYPES[key.type] is not None:
        _short_string(buf, key.name)
    return bytes(buf)


def decode_consumer_key(data: bytes) -> ConsumerKey:
    r = Reader(bytes(data), "__consumer_offsets key")
    kind = r.int16("type")
    if kind not in CONSUMER_RECORD_TYPES:
        raise r.fail(f"not a consumer group record type: {kind}")
    group = r.string("group")
    name = r.string(CONSUMER_RECORD_TYPES[kind] or "") if CONSUMER_RECORD_TYPES[kind] else ""
    r.end()
    return ConsumerKey(kind, group, name)


# -- values: writing ---------------------------------------------------------------------------


class _Flexible:
    """Kafka's flexible encoding: unsigned varint lengths (N+1, 0 for null), tagged fields."""

    def __init__(self) -> None:
        self.buf = bytearray(b"\x00\x00")  # version 0

    def uvarint(self, n: int) -> None:
        while n >= 0x80:
            self.buf.append((n & 0x7F) | 0x80)
            n >>= 7
        self.buf.append(n)

    def int8(self, n: int) -> None:
        self.buf += struct.pack(">b", n)

    def int32(self, n: int) -> None:
        self.buf += struct.pack(">i", n)

    def int64(self, n: int) -> None:
        self.buf += struct.pack(">q", n)

    def string(self, s: str | None) -> None:
        if s is None:
            self.uvarint(0)
            return
        data = s.encode()
        self.uvarint(len(data) + 1)
        self.buf += data

    def uuid(self, u: uuid.UUID) -> None:
        self.buf += u.bytes

    def strings(self, items: tuple[str, ...] | list[str]) -> None:
        self.uvarint(len(items) + 1)
        for s in items:
            self.string(s)

    def int32s(self, items: list[int]) -> None:
        self.uvarint(len(items) + 1)
        for n in items:
            self.int32(n)

    def topic_partitions(self, parts: TopicPartitions) -> None:
        self.uvarint(len(parts) + 1)
        for topic_id, partitions in parts.items():
            self.uuid(topic_id)
            self.int32s(sorted(partitions))
            self.uvarint(0)  # no tagged fields

    def tagged(self, fields: list[tuple[int, bytes]]) -> None:
        self.uvarint(len(fields))
        for tag, data in fields:
            self.uvarint(tag)
            self.uvarint(len(data))
            self.buf += data


def encode_consumer_value(value: ConsumerValue) -> bytes:
    w = _Flexible()
    tags: list[tuple[int, bytes]] = []
    if isinstance(value, GroupEpochValue):
        w.int32(value.epoch)
        if value.metadata_hash != 0:
            tags.append((0, struct.pack(">q", value.metadata_hash)))
    elif isinstance(value, MemberSubscriptionValue):
        w.string(value.instance_id)
        w.string(value.rack_id)
        w.string(value.client_id)
        w.string(value.client_host)
        w.strings(value.subscribed_topic_names)
        w.string(value.subscribed_topic_regex)
        w.int32(value.rebalance_timeout_ms)
        w.string(value.server_assignor)
        if value.classic is not None:
            tags.append((0, _classic_bytes(value.classic)))
    elif isinstance(value, TargetAssignmentEpochValue):
        w.int32(value.assignment_epoch)
        if value.assignment_timestamp != 0:
            tags.append((0, struct.pack(">q", value.assignment_timestamp)))
    elif isinstance(value, TargetAssignmentMemberValue):
        w.topic_partitions(value.partitions)
    elif isinstance(value, CurrentAssignmentValue):
        w.int32(value.member_epoch)
        w.int32(value.previous_member_epoch)
        w.int8(value.state)
        w.topic_partitions(value.assigned)
        w.topic_partitions(value.pending_revocation)
    elif isinstance(value, RegexValue):
        w.strings(value.topics)
        w.int64(value.version)
        w.int64(value.timestamp)
    else:
        raise ValueError(f"samsa does not write {type(value).__name__} records")
    w.tagged(tags)
    return bytes(w.buf)


def _classic_bytes(classic: ClassicMemberMetadata) -> bytes:
    inner = _Flexible()
    inner.buf = bytearray(b"\x01")  # a nullable struct's presence byte
    inner.int32(classic.session_timeout_ms)
    inner.uvarint(len(classic.protocols) + 1)
    for name, metadata in classic.protocols:
        inner.string(name)
        inner.uvarint(len(metadata) + 1)
        inner.buf += metadata
        inner.uvarint(0)
    inner.uvarint(0)
    return bytes(inner.buf)


# -- values: reading ---------------------------------------------------------------------------


def _tags(r: Reader, what: str) -> dict[int, bytes]:
    """A flexible struct's tagged fields, by tag."""
    found = {}
    for _ in range(r.uvarint(f"{what} tag count")):
        tag = r.uvarint(f"{what} tag")
        found[tag] = r.take(r.uvarint(f"{what} tag size"), f"{what} tagged field")
    return found


def _strings(r: Reader, what: str) -> tuple[str, ...]:
    return tuple(r.string(what) for _ in range(r.array_len(what)))


def _int32s(r: Reader, what: str) -> list[int]:
    return [r.int32(what) for _ in range(r.array_len(what))]


def _uuid(r: Reader, what: str) -> uuid.UUID:
    return uuid.UUID(bytes=r.take(16, what))


def _topic_partitions(r: Reader, what: str,
                      epochs: dict[tuple[uuid.UUID, int], int] | None = None
                      ) -> TopicPartitions:
    parts: TopicPartitions = {}
    for _ in range(r.array_len(what)):
        topic_id = _uuid(r, f"{what} topic id")
        partitions = _int32s(r, f"{what} partitions")
        tags = _tags(r, what)
        if epochs is not None and 0 in tags:  # Kafka 4.4's AssignmentEpochs
            sub = Reader(tags[0], f"{what} assignment epochs")
            sub.flexible = True
            for partition, epoch in zip(partitions, _int32s(sub, "assignment epochs"),
                                        strict=False):
                epochs[(topic_id, partition)] = epoch
        parts[topic_id] = frozenset(partitions)
    return parts


def _int64_tag(tags: dict[int, bytes], tag: int) -> int:
    data = tags.get(tag)
    return struct.unpack(">q", data)[0] if data is not None and len(data) == 8 else 0


def _classic(data: bytes) -> ClassicMemberMetadata | None:
    r = Reader(data, "ClassicMemberMetadata")
    r.flexible = True
    if r.int8("presence") < 0:
        return None
    session = r.int32("SessionTimeoutMs")
    protocols = []
    for _ in range(r.array_len("SupportedProtocols")):
        name = r.string("Name")
        protocols.append((name, bytes(r.blob("Metadata"))))
        _tags(r, "protocol")
    return ClassicMemberMetadata(session, tuple(protocols))


def decode_consumer_value(kind: int, data: bytes | None) -> ConsumerValue | None:
    """The value of a record of type ``kind``; None for a tombstone."""
    if data is None:
        return None
    r = Reader(bytes(data), f"consumer group record (type {kind}) value")
    version = r.int16("version")
    if version != 0:
        raise r.fail(f"unknown version {version} (known: 0)")
    r.flexible = True
    value: ConsumerValue
    if kind == GROUP_METADATA:
        epoch = r.int32("Epoch")
        value = GroupEpochValue(epoch, _int64_tag(_tags(r, "group"), 0))
    elif kind == PARTITION_METADATA:
        topics = []
        for _ in range(r.array_len("Topics")):
            topic_id = _uuid(r, "TopicId")
            name = r.string("TopicName")
            count = r.int32("NumPartitions")
            for _ in range(r.array_len("PartitionMetadata")):
                r.int32("Partition")
                _strings(r, "Racks")
                _tags(r, "partition")
            _tags(r, "topic")
            topics.append((topic_id, name, count))
        _tags(r, "partition metadata")
        value = PartitionMetadataValue(tuple(topics))
    elif kind == MEMBER_METADATA:
        instance_id = r.nullable_string("InstanceId")
        rack_id = r.nullable_string("RackId")
        client_id = r.string("ClientId")
        client_host = r.string("ClientHost")
        names = _strings(r, "SubscribedTopicNames")
        regex = r.nullable_string("SubscribedTopicRegex")
        rebalance = r.int32("RebalanceTimeoutMs")
        assignor = r.nullable_string("ServerAssignor")
        tags = _tags(r, "member")
        value = MemberSubscriptionValue(
            instance_id, rack_id, client_id, client_host, names, regex, rebalance, assignor,
            _classic(tags[0]) if 0 in tags else None)
    elif kind == TARGET_ASSIGNMENT_METADATA:
        epoch = r.int32("AssignmentEpoch")
        value = TargetAssignmentEpochValue(epoch, _int64_tag(_tags(r, "target"), 0))
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        value = TargetAssignmentMemberValue(_topic_partitions(r, "TopicPartitions"))
        _tags(r, "target member")
    elif kind == CURRENT_MEMBER_ASSIGNMENT:
        member_epoch = r.int32("MemberEpoch")
        previous = r.int32("PreviousMemberEpoch")
        state = r.int8("State")
        epochs: dict[tuple[uuid.UUID, int], int] = {}
        assigned = _topic_partitions(r, "AssignedPartitions", epochs)
        pending = _topic_partitions(r, "PartitionsPendingRevocation", {})
        _tags(r, "current assignment")
        value = CurrentAssignmentValue(member_epoch, previous, state, assigned, pending, epochs)
    elif kind == REGULAR_EXPRESSION:
        topics_ = _strings(r, "Topics")
        value = RegexValue(topics_, r.int64("Version"), r.int64("Timestamp"))
        _tags(r, "regex")
    else:
        raise r.fail(f"not a consumer group record type: {kind}")
    if r.pos != len(r.data):
        raise r.fail(f"{len(r.data) - r.pos} bytes left over after the record")
    return value


def key_type(data: bytes) -> int:
    """A __consumer_offsets key's record type (its leading int16); CorruptRecordError if it
    has none."""
    if len(data) < 2:
        raise CorruptRecordError("corrupt __consumer_offsets key: shorter than its type")
    return int(struct.unpack_from(">h", data)[0])
