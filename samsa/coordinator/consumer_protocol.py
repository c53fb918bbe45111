"""The consumer's embedded protocol of the classic group APIs, as the coordinator reads and
writes it for classic members of consumer groups (KIP-848's migration): the
ConsumerProtocolSubscription a member joins with (its topics, the partitions it owns, its
rack) and the ConsumerProtocolAssignment its SyncGroup gets back (Kafka's schemas, versions
0-3, never flexible)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from samsa.coordinator.records import Reader
from samsa.errors import CorruptRecordError

MAX_VERSION = 3


@dataclass(frozen=True)
class ConsumerSubscription:
    version: int
    topics: tuple[str, ...]
    owned: tuple[tuple[str, tuple[int, ...]], ...]  # (topic, partitions), v1+
    rack_id: str | None = None  # v3+


def parse_subscription(metadata: bytes) -> ConsumerSubscription:
    """A ConsumerProtocolSubscription; CorruptRecordError when it is not one. Versions newer
    than 3 are read as 3 (Kafka's rule: their fields come after the known ones)."""
    r = Reader(bytes(metadata), "ConsumerProtocolSubscription")
    version = r.int16("version")
    if version < 0:
        raise r.fail(f"negative version {version}")
    topics = tuple(r.string("Topics") for _ in range(r.array_len("Topics")))
    n = r.int32("UserData")
    if n >= 0:
        r.take(n, "UserData")
    owned: list[tuple[str, tuple[int, ...]]] = []
    rack = None
    if version >= 1:
        for _ in range(r.array_len("OwnedPartitions")):
            topic = r.string("Topic")
            owned.append((topic, tuple(r.int32("Partitions")
                                       for _ in range(r.array_len("Partitions")))))
    if version >= 2:
        r.int32("GenerationId")
    if version >= 3:
        rack = r.nullable_string("RackId")
    return ConsumerSubscription(version, topics, tuple(owned), rack)


def subscription_version(metadata: bytes) -> int:
    """The version a member's subscription is written in (its assignment is answered in the
    same one, at most 3)."""
    if len(metadata) < 2:
        raise CorruptRecordError("ConsumerProtocolSubscription shorter than its version")
    return max(0, min(MAX_VERSION, struct.unpack_from(">h", metadata)[0]))


def encode_assignment(partitions: dict[str, list[int]], version: int) -> bytes:
    """A ConsumerProtocolAssignment: version, [topic, [partition]], user data null."""
    buf = bytearray(struct.pack(">hi", version, len(partitions)))
    for topic, ps in sorted(partitions.items()):
        data = topic.encode()
        buf += struct.pack(">h", len(data)) + data + struct.pack(">i", len(ps))
        buf += b"".join(struct.pack(">i", p) for p in sorted(ps))
    return bytes(buf + struct.pack(">i", -1))


def parse_assignment(data: bytes) -> dict[str, list[int]]:
    """A ConsumerProtocolAssignment's partitions by topic; CorruptRecordError when it is not
    one (an empty assignment, as a classic member has before its first SyncGroup, is none)."""
    if not data:
        return {}
    r = Reader(bytes(data), "ConsumerProtocolAssignment")
    r.int16("version")
    parts: dict[str, list[int]] = {}
    for _ in range(r.array_len("AssignedPartitions")):
        topic = r.string("Topic")
        parts.setdefault(topic, []).extend(
            r.int32("Partitions") for _ in range(r.array_len("Partitions")))
    return parts
