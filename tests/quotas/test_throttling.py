"""Throttling on the wire, in raw frames: a request over its quota is answered at once with
``throttle_time_ms``, then its connection is muted for that long (KIP-219: the next request on
it is not answered before), whatever the request's version and even for acks=0; other
clients are not held; a throttled fetch is answered empty; a consumer fetch asks no more than
its quota allows in a window; request_percentage throttles for at most a window."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka_frames import FrameClient

import samsa
from samsa.records.record import RecordInput, encode_batch

from .support import CLIENT_ID, set_quotas

TOPIC = "quota-topic"
QUOTA = 10_000  # bytes a second
# 12 times the quota in one request: 1.2 times the quota over the 10 s a new rate is given,
# (1.2 - 1) * 10 s = 2 s of throttling
BIG = 12 * QUOTA
PRODUCE, FETCH, METADATA, API_VERSIONS = 0, 1, 3, 18


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path_factory.mktemp("throttling")) as b:
        with FrameClient(b.bootstrap_servers) as admin:
            response = admin.request(19, 7, {"topics": [{
                "name": TOPIC, "num_partitions": 1, "replication_factor": 1,
                "assignments": [], "configs": []}], "timeout": 10000, "validate_only": False})
            assert response.topics[0].error_code == 0
        yield b


def ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


def produce_body(size: int, acks: int = 1) -> dict[str, Any]:
    batch = encode_batch([RecordInput(None, b"x" * size)], timestamp=int(time.time() * 1000))
    return {"transactional_id": None, "acks": acks, "timeout": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0,
                                                             "records": batch}]}]}


def timed(client: FrameClient, key: int, version: int, body: Any, client_id: str
          ) -> tuple[Any, float]:
    start = time.monotonic()
    client.send(key, version, body, client_id=client_id)
    _, response = client.recv(key, version, timeout=30)
    return response, time.monotonic() - start


@pytest.mark.parametrize("version", [3, 5, 9, 11])  # before KIP-219 (v6) and after
def test_a_throttled_connection_is_muted(broker: samsa.Broker, version: int) -> None:
    client_id = f"muted-v{version}"
    with FrameClient(broker.bootstrap_servers) as admin:
        set_quotas(admin, [(CLIENT_ID, client_id)], producer_byte_rate=QUOTA)
    with FrameClient(broker.bootstrap_servers, timeout=30) as client, \
            FrameClient(broker.bootstrap_servers) as other:
        response, took = timed(client, PRODUCE, version, produce_body(BIG), client_id)
        assert response.responses[0].partition_responses[0].error_code == 0
        throttle = ms(response.throttle_time)
        assert 1500 <= throttle <= 2500, throttle
        assert took < throttle / 1000 / 2  # answered at once, not held
        # the next request on the same connection waits out the throttle time
        start = time.monotonic()
        client.send(API_VERSIONS, 3, {"client_software_name": "t",
                                      "client_software_version": "1"}, client_id=client_id)
        # meanwhile another client is served at once
        _, took_other = timed(other, API_VERSIONS, 3, {"client_software_name": "t",
                                                       "client_software_version": "1"},
                              "someone-else")
        assert took_other < 0.5
        client.recv(API_VERSIONS, 3, timeout=30)
        waited = time.monotonic() - start
        assert waited >= throttle / 1000 - 0.1, (waited, throttle)


def test_acks_zero_is_muted_too(broker: samsa.Broker) -> None:
    with FrameClient(broker.bootstrap_servers) as admin:
        set_quotas(admin, [(CLIENT_ID, "fire-and-forget")], producer_byte_rate=QUOTA)
    with FrameClient(broker.bootstrap_servers, timeout=30) as client:
        start = time.monotonic()
        client.send(PRODUCE, 9, produce_body(BIG, acks=0), client_id="fire-and-forget")
        client.send(API_VERSIONS, 3, {"client_software_name": "t",
                                      "client_software_version": "1"},
                    client_id="fire-and-forget")
        _, response = client.recv(API_VERSIONS, 3, timeout=30)  # the produce has none
        assert response.error_code == 0
        assert time.monotonic() - start >= 1.5  # about 2 s of throttling, no response


def fetch_body(offset: int, max_bytes: int) -> dict[str, Any]:
    return {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": 0, "fetch_offset": offset, "log_start_offset": -1,
                "partition_max_bytes": max_bytes, "current_leader_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}


def test_a_throttled_fetch_is_answered_empty(tmp_path: Path) -> None:
    with samsa.Broker(tmp_path / "data") as broker, \
            FrameClient(broker.bootstrap_servers, timeout=30) as client:
        client.request(19, 7, {"topics": [{
            "name": TOPIC, "num_partitions": 1, "replication_factor": 1, "assignments": [],
            "configs": []}], "timeout": 10000, "validate_only": False})
        for _ in range(3):  # three batches of 40 KB
            response = client.request(PRODUCE, 9, produce_body(40_000))
            assert response.responses[0].partition_responses[0].error_code == 0
        set_quotas(client, [(CLIENT_ID, "reader")], consumer_byte_rate=QUOTA)
        with FrameClient(broker.bootstrap_servers, timeout=30) as reader:
            # asks 1 MB, gets what the quota allows in its window (10 windows of 10 KB):
            # the first two batches
            first, _ = timed(reader, FETCH, 11, fetch_body(0, 1 << 20), "reader")
            assert ms(first.throttle_time) == 0
            records = first.responses[0].partitions[0].records
            assert 80_000 < len(records) <= 100_000
            # the third would take it over: throttled, answered empty, not counted
            second, took = timed(reader, FETCH, 11, fetch_body(2, 1 << 20), "reader")
            throttle = ms(second.throttle_time)
            assert throttle > 0 and took < throttle / 1000
            assert second.error_code == 0 and second.responses == ()
        # the broker counted only the bytes it sent (the 80 KB over the 10 s window)
        rate = broker.server.quotas.fetch.sensor("ANONYMOUS", "reader", time.monotonic() * 1000)
        assert rate.rate.total(time.monotonic() * 1000) < 100_000


def test_request_time_is_throttled_for_at_most_a_window(broker: samsa.Broker) -> None:
    with FrameClient(broker.bootstrap_servers) as admin:
        set_quotas(admin, [(CLIENT_ID, "busy")], request_percentage=0.0001)
    body = {"topics": None, "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False}
    with FrameClient(broker.bootstrap_servers, timeout=30) as client:
        throttles = []
        for _ in range(3):
            response, _ = timed(client, METADATA, 9, body, "busy")
            throttles.append(ms(response.throttle_time))
        assert throttles[-1] > 0
        assert max(throttles) <= 1000  # one quota.window.size.seconds at most
        response, _ = timed(client, METADATA, 9, body, "not-busy")
        assert ms(response.throttle_time) == 0
