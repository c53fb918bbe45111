"""MirrorMaker 2's client side (Kafka's connect/mirror-client): the replication policies, the
records of MM2's internal topics and RemoteClusterUtils' offset translation.

It lives with the tools, below ``samsa.mirror`` (the MM2 runtime that writes these topics), so
that ``samsa groups`` can read checkpoints too.

The internal records are Kafka's ``Struct`` serialization, byte for byte, so Kafka's own
``OffsetSync`` / ``Checkpoint`` / ``Heartbeat`` (and RemoteClusterUtils) read what samsa writes:
INT16/INT32/INT64 big-endian, STRING an INT16 length and UTF-8 bytes, fields in schema order.

- ``mm2-offset-syncs.<target>.internal`` (one partition): key (topic STRING, partition INT32),
  value (upstreamOffset INT64, offset INT64).
- ``<source>.checkpoints.internal`` (one partition, in the target): key (group STRING, topic
  STRING, partition INT32), value (version INT16 = 0, upstreamOffset INT64, offset INT64,
  metadata STRING). ``topic`` is the topic as named in the target (``A.orders``).
- ``heartbeats``: key (sourceClusterAlias STRING, targetClusterAlias STRING), value (version
  INT16 = 0, timestamp INT64).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

HEARTBEATS_TOPIC = "heartbeats"
SEPARATOR_DEFAULT = "."

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class SchemaError(ValueError):
    """A record that does not parse as the schema (Kafka's SchemaException)."""


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> _Writer:
        self.parts.append(_I16.pack(v))
        return self

    def i32(self, v: int) -> _Writer:
        self.parts.append(_I32.pack(v))
        return self

    def i64(self, v: int) -> _Writer:
        self.parts.append(_I64.pack(v))
        return self

    def string(self, v: str) -> _Writer:
        data = v.encode()
        if len(data) > 0x7FFF:
            raise SchemaError(f"string of {len(data)} bytes is longer than 32767")
        self.parts.append(_I16.pack(len(data)) + data)
        return self

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes | None) -> None:
        if data is None:
            raise SchemaError("no data")
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise SchemaError("record ends early")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def version0(self, record: str) -> None:
        """The version field of a value: 0 is the only one Kafka has written."""
        version = self.i16()
        if version != 0:
            raise SchemaError(f"unknown {record} version {version}")

    def string(self) -> str:
        n = self.i16()
        if n < 0:
            raise SchemaError("null STRING")
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise SchemaError(f"STRING is not UTF-8: {exc}") from exc


@dataclass(frozen=True)
class OffsetSync:
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def record_key(self) -> bytes:
        return _Writer().string(self.topic).i32(self.partition).bytes()

    def record_value(self) -> bytes:
        return _Writer().i64(self.upstream_offset).i64(self.downstream_offset).bytes()

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> OffsetSync:
        k, v = _Reader(key), _Reader(value)
        return cls(k.string(), k.i32(), v.i64(), v.i64())


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str  # the topic's name in the target cluster
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def record_key(self) -> bytes:
        return _Writer().string(self.group).string(self.topic).i32(self.partition).bytes()

    def record_value(self) -> bytes:
        return (_Writer().i16(0).i64(self.upstream_offset).i64(self.downstream_offset)
                .string(self.metadata).bytes())

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> Checkpoint:
        v = _Reader(value)
        v.version0("Checkpoint")
        upstream, downstream, metadata = v.i64(), v.i64(), v.string()
        k = _Reader(key)
        return cls(k.string(), k.string(), k.i32(), upstream, downstream, metadata)


@dataclass(frozen=True)
class Heartbeat:
    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def record_key(self) -> bytes:
        return _Writer().string(self.source_cluster_alias).string(self.target_cluster_alias).bytes()

    def record_value(self) -> bytes:
        return _Writer().i16(0).i64(self.timestamp).bytes()

    @classmethod
    def deserialize(cls, key: bytes | None, value: bytes | None) -> Heartbeat:
        v = _Reader(value)
        v.version0("Heartbeat")
        timestamp = v.i64()
        k = _Reader(key)
        return cls(k.string(), k.string(), timestamp)


class DefaultReplicationPolicy:
    """Remote topics are ``<source-alias><separator><topic>``; a topic's source is the part
    before the first separator (none: not a remote topic)."""

    def __init__(self, separator: str = SEPARATOR_DEFAULT,
                 internal_topic_separator_enabled: bool = True) -> None:
        if not separator:
            raise ValueError("replication.policy.separator must not be empty")
        self.separator = separator
        self._internal_separator = separator if internal_topic_separator_enabled else "."

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return f"{source_cluster_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        head, sep, tail = topic.partition(self.separator)
        # Java's String.split drops trailing empty strings: "a." has one part, not a remote topic
        return head if sep and tail.strip(self.separator) else None

    def upstream_topic(self, topic: str) -> str | None:
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator):]

    def original_topic(self, topic: str) -> str:
        seen = set()
        while topic not in seen:
            seen.add(topic)
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return topic
            topic = upstream
        return topic

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def _internal_suffix(self) -> str:
        return f"{self._internal_separator}internal"

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"mm2-offset-syncs{self._internal_separator}{cluster_alias}{self._internal_suffix()}"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}{self._internal_separator}checkpoints{self._internal_suffix()}"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.heartbeats_topic() == self.original_topic(topic)

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal_suffix())

    def is_internal_topic(self, topic: str) -> bool:
        kafka_internal = topic.startswith("__") or topic.startswith(".")
        connect_internal = topic.endswith("-internal") or topic.endswith(".internal")
        return self.is_mm2_internal_topic(topic) or kafka_internal or connect_internal


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Remote topics keep their names (heartbeats excepted, named as the default policy does);
    a topic's source is ``source.cluster.alias`` when configured, as Kafka's."""

    def __init__(self, separator: str = SEPARATOR_DEFAULT,
                 internal_topic_separator_enabled: bool = True,
                 source_cluster_alias: str | None = None) -> None:
        super().__init__(separator, internal_topic_separator_enabled)
        self.source_cluster_alias = source_cluster_alias

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        if self._looks_like_heartbeat(topic):
            return super().format_remote_topic(source_cluster_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().topic_source(topic)
        return self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeat(topic):
            return super().upstream_topic(topic)
        return topic


# replication.policy.class: Kafka's class names (and the simple names) -> samsa's
POLICY_CLASSES: dict[str, type[DefaultReplicationPolicy]] = {
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": DefaultReplicationPolicy,
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": IdentityReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
}


def high_watermark(consumer: Consumer, tp: TopicPartition, timeout_s: float) -> int:
    """The partition's end offset, retried while the cluster does not know it yet (a topic
    created a moment ago: its leader is still being elected or its metadata spread)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return int(consumer.get_watermark_offsets(tp, timeout=min(5.0, timeout_s))[1])
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def read_checkpoints(consumer_config: dict[str, Any], checkpoints_topic: str,
                     timeout_s: float = 30.0) -> list[Checkpoint]:
    """Every checkpoint in partition 0 of a checkpoints topic, in order (as RemoteClusterUtils
    reads it); records that do not parse are skipped. LookupError: no such topic."""
    consumer = Consumer({**consumer_config, "group.id": "samsa-mirror-client",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        md = consumer.list_topics(timeout=timeout_s).topics.get(checkpoints_topic)
        if md is None or md.error is not None:
            raise LookupError(f"no topic {checkpoints_topic} in this cluster (no mirror writes "
                              "checkpoints here)")
        tp = TopicPartition(checkpoints_topic, 0)
        high = high_watermark(consumer, tp, timeout_s)
        found: list[Checkpoint] = []
        if high <= 0:
            return found
        consumer.assign([TopicPartition(checkpoints_topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout_s
        position = 0
        while position < high and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error():
                    continue
                position = msg.offset() + 1
                try:
                    found.append(Checkpoint.deserialize(msg.key(), msg.value()))
                except SchemaError:
                    pass
            if position < high:
                committed = consumer.position([tp])[0].offset
                position = max(position, committed)
        return found
    finally:
        consumer.close()


def translate_offsets(consumer_config: dict[str, Any], remote_cluster_alias: str, group: str,
                      policy: DefaultReplicationPolicy | None = None,
                      timeout_s: float = 30.0) -> dict[tuple[str, int], tuple[int, str]]:
    """RemoteClusterUtils.translateOffsets: the group's offsets in this (target) cluster, from
    the latest checkpoints that ``remote_cluster_alias``'s mirror wrote here:
    (topic, partition) -> (offset, metadata)."""
    policy = policy or DefaultReplicationPolicy()
    offsets: dict[tuple[str, int], tuple[int, str]] = {}
    for c in read_checkpoints(consumer_config, policy.checkpoints_topic(remote_cluster_alias),
                              timeout_s):
        if c.group == group:
            offsets[(c.topic, c.partition)] = (c.downstream_offset, c.metadata)
    return offsets
