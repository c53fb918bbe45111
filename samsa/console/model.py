"""What the console shows: plain values read from a Kafka cluster, rendered by the pages.

``cluster_view.ClusterView`` fills them (a Kafka client: admin, consumer, producer);
``app`` turns them into pages. Nothing here talks to a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class ConsoleError(Exception):
    """A failure the page shows as one clear message (broker down, topic gone, Kafka's
    validation error for a config): ``str(exc)`` is that message."""


class NotFound(ConsoleError):
    """The topic or group the address names does not exist (HTTP 404)."""


class BadRequest(ConsoleError):
    """A form field or query parameter the page cannot use (HTTP 400)."""


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    host: str
    port: int
    rack: str | None
    controller: bool


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int  # -1: no leader (offline)
    replicas: list[int]
    isr: list[int]
    log_start: int | None = None  # None: not read (e.g. the leader is down)
    high_watermark: int | None = None
    size_bytes: int | None = None  # None: the cluster does not answer DescribeLogDirs

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def messages(self) -> int | None:
        if self.log_start is None or self.high_watermark is None:
            return None
        return self.high_watermark - self.log_start


@dataclass(frozen=True)
class TopicSummary:
    name: str
    internal: bool
    partitions: int
    replication: int
    offline: int  # partitions without a leader
    under_replicated: int
    size_bytes: int | None
    messages: int | None
    rate: float | None = None  # messages per second, from the history (None: not sampled yet)
    end_offsets: int | None = None  # the sum of its high watermarks (what its rate grows from)


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    source: str  # Kafka's ConfigSource name: DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG, ...
    is_default: bool
    read_only: bool
    sensitive: bool


@dataclass(frozen=True)
class TopicDetail:
    name: str
    internal: bool
    topic_id: str | None
    partitions: list[PartitionInfo]
    configs: list[ConfigEntry]


@dataclass(frozen=True)
class Overview:
    cluster_id: str | None
    controller_id: int | None
    brokers: list[BrokerInfo]
    topics: int
    partitions: int
    offline: int
    under_replicated: int


@dataclass(frozen=True)
class Message:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: str  # CreateTime, LogAppendTime or NoTimestampType
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str  # Kafka's names: Stable, Empty, PreparingRebalance, Dead, ...
    type: str  # Classic or Consumer (KIP-848)
    protocol_type: str
    members: int
    lag: int | None  # sum over the partitions with a committed offset


@dataclass(frozen=True)
class MemberInfo:
    member_id: str
    client_id: str
    host: str
    assignment: list[tuple[str, int]]


@dataclass(frozen=True)
class GroupOffset:
    topic: str
    partition: int
    committed: int | None
    log_end: int | None
    member_id: str | None  # the member it is assigned to now

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.committed)


@dataclass(frozen=True)
class GroupDetail:
    group_id: str
    state: str
    type: str
    protocol_type: str
    protocol: str  # the assignor (range, roundrobin, cooperative-sticky, uniform, ...)
    coordinator: int | None
    members: list[MemberInfo]
    offsets: list[GroupOffset]


@dataclass(frozen=True)
class OffsetReset:
    """One row of a reset plan (as ``samsa groups --reset-offsets`` prints it)."""
    topic: str
    partition: int
    current: int | None
    new: int


@dataclass(frozen=True)
class TransactionInfo:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    coordinator: int
    topics: list[tuple[str, int]] = field(default_factory=list)  # partitions in the transaction


@dataclass(frozen=True)
class AclInfo:
    principal: str
    host: str
    operation: str
    permission: str
    resource_type: str
    resource_name: str
    pattern_type: str
