"""Shared helpers for the client tests: brokers, a raw Kafka protocol client, record batches.

Every wait here is bounded: sockets have timeouts and ``wait_for`` gives up after its deadline.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka_frames import (  # the rest is re-exported to the test modules
    ConnectionClosed,  # noqa: F401
    FrameClient,
    decode_response,  # noqa: F401
    encode_request,  # noqa: F401
)

import samsa
from samsa.records.batch import iter_headers
from samsa.records.record import Record, RecordInput, decode_records, encode_batch

# Keys of the APIs the raw tests use.
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
API_VERSIONS, INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 18, 22, 23

BASE_TIME_MS = 1_700_000_000_000


def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.05,
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


# --- brokers ------------------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    """A fresh broker (defaults: one partition per auto-created topic)."""
    with samsa.Broker(tmp_path / "data") as b:
        yield b


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., samsa.Broker]]:
    """``broker_factory(**overrides)``: a started broker with config overrides, stopped at the
    end of the test."""
    started: list[samsa.Broker] = []
    counter = itertools.count()

    def make(**overrides: Any) -> samsa.Broker:
        b = samsa.Broker(tmp_path / f"data{next(counter)}", **overrides)
        b.start()
        started.append(b)
        return b

    yield make
    for b in reversed(started):
        b.stop()


# --- record batches -----------------------------------------------------------------------------


def make_batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamps: Sequence[int] | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
    timestamp: int = BASE_TIME_MS,
    **kwargs: Any,
) -> bytes:
    """One v2 record batch as a producer sends it (base offset 0, leader epoch -1)."""
    records = [
        RecordInput(
            value,
            key=keys[i] if keys is not None else None,
            timestamp=timestamps[i] if timestamps is not None else None,
            headers=headers[i] if headers is not None else (),
        )
        for i, value in enumerate(values)
    ]
    return encode_batch(records, timestamp=timestamp, **kwargs)


def whole_batches(data: bytes) -> list[bytes]:
    """The whole batches at the start of ``data`` (a partial tail batch is dropped)."""
    out = []
    for pos, header in iter_headers(data):
        if pos + header.size > len(data):
            break
        out.append(bytes(data[pos : pos + header.size]))
    return out


def decode_all(data: bytes | None) -> list[Record]:
    """The records of every whole batch in ``data`` (CRCs are not checked here)."""
    if not data:
        return []
    return [r for batch in whole_batches(bytes(data)) for r in decode_records(batch)]


# --- raw protocol ------------------------------------------------------------------------------


class RawClient(FrameClient):
    """FrameClient with the requests the client tests send, at the versions clients pick."""

    # the APIs the tests use, with the versions librdkafka / kafka-python pick

    def api_versions(self, version: int = 3) -> Any:
        body = {"client_software_name": "raw", "client_software_version": "1.0"}
        return self.request(API_VERSIONS, version, body if version >= 3 else {})

    def metadata(self, topics: Sequence[str] | None, version: int = 8, auto_create: bool = True
                 ) -> Any:
        body = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto_create,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        return self.request(METADATA, version, body)

    def create_topic(self, topic: str) -> None:
        """Auto-create ``topic`` through Metadata and check it exists."""
        response = self.metadata([topic])
        assert response.topics[0].error_code == 0, response.topics[0]

    @staticmethod
    def produce_body(topic: str, records: bytes | None, partition: int = 0, acks: int = -1
                     ) -> dict[str, Any]:
        return {
            "transactional_id": None,
            "acks": acks,
            "timeout": 5000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        }

    def produce(self, topic: str, records: bytes | None, partition: int = 0, acks: int = -1,
                version: int = 8) -> Any:
        """The partition response of a one-partition produce."""
        response = self.request(PRODUCE, version, self.produce_body(topic, records, partition,
                                                                    acks))
        return response.responses[0].partition_responses[0]

    @staticmethod
    def fetch_body(topic: str, offset: int, partition: int = 0, max_wait_ms: int = 0,
                   min_bytes: int = 1, max_bytes: int = 1 << 20,
                   partition_max_bytes: int = 1 << 20, current_leader_epoch: int = -1
                   ) -> dict[str, Any]:
        return {
            "replica_id": -1,
            "max_wait": max_wait_ms,
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{
                "topic": topic,
                "partitions": [{
                    "partition": partition,
                    "current_leader_epoch": current_leader_epoch,
                    "fetch_offset": offset,
                    "log_start_offset": -1,
                    "partition_max_bytes": partition_max_bytes,
                }],
            }],
            "forgotten_topics_data": [],
            "rack_id": "",
        }

    def fetch(self, topic: str, offset: int, version: int = 11, timeout: float | None = None,
              **kwargs: Any) -> Any:
        """The partition data of a one-partition fetch."""
        response = self.request(FETCH, version, self.fetch_body(topic, offset, **kwargs),
                                timeout=timeout)
        assert response.error_code == 0, response
        return response.responses[0].partitions[0]

    def list_offsets(self, topic: str, timestamp: int = -1, partition: int = 0,
                     current_leader_epoch: int = -1, version: int = 5) -> Any:
        body = {
            "replica_id": -1,
            "isolation_level": 0,
            "topics": [{
                "name": topic,
                "partitions": [{
                    "partition_index": partition,
                    "current_leader_epoch": current_leader_epoch,
                    "timestamp": timestamp,
                }],
            }],
        }
        response = self.request(LIST_OFFSETS, version, body)
        return response.topics[0].partitions[0]

    def log_end_offset(self, topic: str, partition: int = 0) -> int:
        result = self.list_offsets(topic, -1, partition)
        assert result.error_code == 0, result
        return result.offset

    def init_producer_id(self, version: int = 1) -> tuple[int, int]:
        response = self.request(
            INIT_PRODUCER_ID, version, {"transactional_id": None, "transaction_timeout": 60000}
        )
        assert response.error_code == 0, response
        return response.producer_id, response.producer_epoch


@pytest.fixture
def raw(broker: samsa.Broker) -> Iterator[Callable[[], RawClient]]:
    """``raw()`` opens a RawClient to ``broker``; all are closed at the end of the test."""
    opened: list[RawClient] = []

    def connect() -> RawClient:
        client = RawClient(("127.0.0.1", broker.port))
        opened.append(client)
        return client

    yield connect
    for client in opened:
        client.close()
