"""A Spark task's Kafka client for one topic-partition: Fetch, as bytes, from its leader.

A blocking socket (PLAINTEXT) over the protocol's sans-IO core (``samsa.protocol.client``): the
leader is found with Metadata through the bootstrap servers; Fetch v12 (without a fetch
session) returns the partition's record batches as the log holds them (the answer is read by
hand, ``fetch_answer``), which ``samsa.spark.arrow_records`` decodes in bulk; ListOffsets v7
answers the earliest and latest offsets. One request may be in flight while the task decodes
the previous answer (:meth:`PartitionClient.send_fetch`, :meth:`PartitionClient.receive_fetch`).

Brokers that do not speak these versions (older Kafka releases) raise :class:`NotSupported` before
anything is read, and the task reads with librdkafka instead.
"""

from __future__ import annotations

import datetime
import re
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from samsa.errors import ErrorCode, kafka_name
from samsa.protocol.client import (
    SIZE,
    ClientCodec,
    ResponseError,
    Sent,
    api_versions_request,
    choose_version,
    version_ranges,
)
from samsa.spark.fetch_answer import AnswerError, read_fetch_answer

FETCH, LIST_OFFSETS, METADATA = 1, 2, 3
#: (api key, version, name): what the task speaks, and so what the broker must
REQUIRED = ((FETCH, 12, "Fetch"), (LIST_OFFSETS, 7, "ListOffsets"), (METADATA, 12, "Metadata"))
_HOST_PORT = re.compile(r"^(?:[A-Za-z_]+://)?(?P<host>\[[^\]]+\]|[^:/\s]+):(?P<port>\d+)$")


class NotSupported(Exception):
    """The broker does not speak the versions this client needs."""


class ClientError(Exception):
    """A broker that cannot be reached, a lost connection, or an answer that cannot be read."""


@dataclass(frozen=True)
class Fetched:
    """One partition's part of a Fetch answer."""

    error: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]]  # (producer id, first offset)
    records: memoryview  # valid until the connection receives its next answer


def parse_bootstrap(value: str) -> list[tuple[str, int]]:
    """``host:port[,host:port]`` (a ``PLAINTEXT://`` prefix allowed) -> addresses."""
    out = []
    for item in value.split(","):
        match = _HOST_PORT.match(item.strip())
        if match is None:
            raise ClientError(f"bootstrap.servers: cannot read {item.strip()!r} as host:port")
        out.append((match["host"].strip("[]"), int(match["port"])))
    return out


class Connection:
    """One blocking connection to a broker; at most one request in flight."""

    def __init__(self, host: str, port: int, client_id: str, timeout_s: float) -> None:
        self.address = f"{host}:{port}"
        self.timeout_s = timeout_s
        self.codec = ClientCodec(client_id)
        self._buffer = bytearray(64 * 1024)
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise ClientError(f"cannot connect to {self.address}: {exc}") from None
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            ranges = version_ranges(self.request(*api_versions_request()))
        except (ResponseError, ClientError) as exc:
            self.close()
            raise ClientError(f"{self.address}: {exc}") from None
        for key, version, name in REQUIRED:
            if choose_version(ranges, key, version, version) is None:
                self.close()
                raise NotSupported(f"the broker at {self.address} does not speak {name} "
                                   f"v{version}")

    def send(self, api_key: int, version: int, body: Any) -> Sent:
        frame, sent = self.codec.encode(api_key, version, body)
        try:
            self.sock.sendall(frame)
        except OSError as exc:
            raise ClientError(f"connection to {self.address} lost: {exc}") from None
        return sent

    def receive(self, sent: Sent, timeout_s: float) -> Any:
        """The answer to ``sent`` (decoded by kio: the small ones), within ``timeout_s``
        seconds."""
        try:
            return ClientCodec.decode(sent, bytes(self.receive_frame(timeout_s)))
        except ResponseError as exc:
            raise ClientError(f"{self.address}: {exc}") from None

    def receive_frame(self, timeout_s: float) -> memoryview:
        """The next answer's frame (after its size), within ``timeout_s`` seconds: a view of
        this connection's buffer, valid until the next receive."""
        deadline = time.monotonic() + timeout_s
        try:
            size = ClientCodec.frame_size(bytes(self._read(SIZE.size, deadline)))
        except ResponseError as exc:
            raise ClientError(f"{self.address}: {exc}") from None
        return self._read(size, deadline)

    def request(self, api_key: int, version: int, body: Any) -> Any:
        return self.receive(self.send(api_key, version, body), self.timeout_s)

    def _read(self, size: int, deadline: float) -> memoryview:
        # one buffer for every answer: a fresh one of megabytes costs its page faults each time
        if len(self._buffer) < size:
            self._buffer = bytearray(max(size, 2 * len(self._buffer)))
        view = memoryview(self._buffer)[:size]
        got = 0
        while got < size:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ClientError(f"no answer from {self.address} in time")
            self.sock.settimeout(left)
            try:
                n = self.sock.recv_into(view[got:])
            except TimeoutError:
                raise ClientError(f"no answer from {self.address} in time") from None
            except OSError as exc:
                raise ClientError(f"connection to {self.address} lost: {exc}") from None
            if n == 0:
                raise ClientError(f"{self.address} closed the connection")
            got += n
        return view

    def close(self) -> None:
        self.sock.close()


class PartitionClient:
    """Fetches one topic-partition from its leader, finding the leader again after a change."""

    def __init__(
        self,
        bootstrap: Sequence[tuple[str, int]],
        topic: str,
        partition: int,
        *,
        client_id: str,
        read_committed: bool,
        timeout_s: float,
        max_wait_ms: int,
        max_bytes: int,
        partition_max_bytes: int,
    ) -> None:
        self.bootstrap = list(bootstrap)
        self.topic = topic
        self.partition = partition
        self.client_id = client_id
        self.isolation = 1 if read_committed else 0
        self.timeout_s = timeout_s
        self.max_wait_ms = max_wait_ms
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self._leader: Connection | None = None
        self._in_flight: Sent | None = None

    def close(self) -> None:
        if self._leader is not None:
            self._leader.close()
            self._leader = None
        self._in_flight = None

    def forget_leader(self) -> None:
        """Drop the leader's connection (after an error): the next request looks it up again."""
        self.close()

    def leader(self) -> Connection:
        if self._leader is None:
            self._leader = self._connect_leader()
        return self._leader

    def _connect_leader(self) -> Connection:
        problems: list[str] = []
        for host, port in self.bootstrap:
            try:
                conn = Connection(host, port, self.client_id, self.timeout_s)
            except ClientError as exc:
                problems.append(str(exc))
                continue
            try:
                address = self._leader_address(conn)
            except ClientError:
                conn.close()
                raise
            if address == (host, port):
                return conn
            conn.close()
            return Connection(*address, self.client_id, self.timeout_s)
        raise ClientError("; ".join(problems) or "no bootstrap server")

    def _leader_address(self, conn: Connection) -> tuple[str, int]:
        response = conn.request(METADATA, 12, MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName(self.topic)),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        for topic in response.topics:
            if topic.name != self.topic:
                continue
            if topic.error_code != ErrorCode.none:
                raise ClientError(f"metadata of {self.topic}: {kafka_name(topic.error_code)}")
            for part in topic.partitions:
                if part.partition_index != self.partition:
                    continue
                if part.error_code != ErrorCode.none and part.leader_id < 0:
                    raise ClientError(f"metadata of {self.topic}-{self.partition}: "
                                      f"{kafka_name(part.error_code)}")
                if part.leader_id not in brokers:
                    raise ClientError(f"{self.topic}-{self.partition} has no leader")
                return brokers[part.leader_id]
        raise ClientError(f"metadata names no partition {self.topic}-{self.partition}")

    def send_fetch(self, offset: int, partition_max_bytes: int | None = None) -> None:
        """Send a Fetch from ``offset``; :meth:`receive_fetch` reads its answer."""
        assert self._in_flight is None, "one fetch at a time"
        request = FetchRequest(
            replica_id=BrokerId(-1),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=self.max_wait_ms)),
            min_bytes=i32(1),
            max_bytes=i32(self.max_bytes),
            isolation_level=i8(self.isolation),
            session_id=i32(0),
            session_epoch=i32(-1),
            topics=(FetchTopic(topic=TopicName(self.topic), partitions=(FetchPartition(
                partition=i32(self.partition),
                fetch_offset=i64(offset),
                partition_max_bytes=i32(partition_max_bytes or self.partition_max_bytes),
            ),)),),
            forgotten_topics_data=(),
            rack_id="",
        )
        self._in_flight = self.leader().send(FETCH, 12, request)

    @property
    def fetching(self) -> bool:
        return self._in_flight is not None

    def receive_fetch(self) -> Fetched:
        """The answer to the fetch in flight. Its records are a view of the connection's
        buffer: valid until the next answer is received."""
        sent, self._in_flight = self._in_flight, None
        assert sent is not None, "no fetch in flight"
        conn = self.leader()
        frame = conn.receive_frame(self.timeout_s + self.max_wait_ms / 1000)
        try:
            answer = read_fetch_answer(frame, sent.correlation_id)
        except AnswerError as exc:
            raise ClientError(f"{conn.address}: {exc}") from None
        if answer.error != ErrorCode.none:
            return Fetched(ErrorCode(answer.error), -1, -1, -1, [], frame[0:0])
        for part in answer.partitions:
            if part.topic == self.topic and part.partition == self.partition:
                return Fetched(ErrorCode(part.error), part.high_watermark,
                               part.last_stable_offset, part.log_start_offset, part.aborted,
                               part.records)
        raise ClientError(f"the fetch answer has no {self.topic}-{self.partition}")

    def list_offset(self, timestamp: int) -> int:
        """ListOffsets of the partition: -2 the log start offset, -1 the latest (the last
        stable offset under read_committed)."""
        response = self.leader().request(LIST_OFFSETS, 7, ListOffsetsRequest(
            replica_id=BrokerId(-1), isolation_level=i8(self.isolation),
            topics=(ListOffsetsTopic(name=TopicName(self.topic), partitions=(ListOffsetsPartition(
                partition_index=i32(self.partition), timestamp=i64(timestamp)),)),)))
        for topic in response.topics:
            for part in topic.partitions:
                if part.error_code != ErrorCode.none:
                    raise ClientError(f"ListOffsets of {self.topic}-{self.partition}: "
                                      f"{kafka_name(part.error_code)}")
                return int(part.offset)
        raise ClientError(f"the ListOffsets answer has no {self.topic}-{self.partition}")
