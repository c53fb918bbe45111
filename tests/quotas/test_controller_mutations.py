"""controller_mutation_rate (KIP-599) on the wire: a token bucket of partitions; CreateTopics
v6+, DeleteTopics v5+ and CreatePartitions v3+ refuse the topics that come once it is empty
(THROTTLING_QUOTA_EXCEEDED, the rest of the request applied), older versions are accepted and
throttled; a request that starts with tokens left is taken whole (Kafka's strict quota)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka_frames import FrameClient

import samsa

from .support import CLIENT_ID, set_quotas

THROTTLED = 89  # THROTTLING_QUOTA_EXCEEDED
MESSAGE = "The throttling quota has been exceeded."
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
RATE = 1.0  # one partition a second: a bucket of 11 (quota.window.num windows of 1 s)


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path_factory.mktemp("mutations")) as b:
        yield b


def ms(value: Any) -> int:
    return int(value.total_seconds() * 1000)


def request(broker: samsa.Broker, key: int, version: int, body: dict[str, Any],
            client_id: str) -> Any:
    """On a connection of its own: a throttled one is muted afterwards."""
    with FrameClient(broker.bootstrap_servers, timeout=30) as client:
        client.send(key, version, body, client_id=client_id)
        return client.recv(key, version, timeout=30)[1]


def create_body(**partitions: int) -> dict[str, Any]:
    return {"topics": [{"name": name, "num_partitions": count, "replication_factor": 1,
                        "assignments": [], "configs": []}
                       for name, count in partitions.items()],
            "timeout": 10000, "validate_only": False}


def limit(broker: samsa.Broker, client_id: str) -> None:
    with FrameClient(broker.bootstrap_servers) as admin:
        set_quotas(admin, [(CLIENT_ID, client_id)], controller_mutation_rate=RATE)


def test_strict_create_topics_refuses_once_the_bucket_is_empty(broker: samsa.Broker) -> None:
    limit(broker, "strict")
    # 10 of 11 tokens, then 5 more (tokens were left: taken whole, the bucket at -4), then
    # refused; a validate-only topic takes nothing
    response = request(broker, CREATE_TOPICS, 7, create_body(a=10, b=5, c=1), "strict")
    results = {t.name: (t.error_code, t.error_message) for t in response.topics}
    assert results == {"a": (0, None), "b": (0, None), "c": (THROTTLED, MESSAGE)}
    assert 3500 <= ms(response.throttle_time) <= 4000  # 4 tokens short at 1 a second
    assert broker.server.topics.get("c") is None
    validated = request(broker, CREATE_TOPICS, 7, {**create_body(d=1), "validate_only": True},
                        "strict")
    assert validated.topics[0].error_code == 0
    # another client id has its own bucket (none: no quota)
    other = request(broker, CREATE_TOPICS, 7, create_body(e=20), "unlimited")
    assert other.topics[0].error_code == 0 and ms(other.throttle_time) == 0


def test_older_versions_are_accepted_and_throttled(broker: samsa.Broker) -> None:
    limit(broker, "permissive")
    response = request(broker, CREATE_TOPICS, 5, create_body(f=20), "permissive")
    assert response.topics[0].error_code == 0
    assert 8500 <= ms(response.throttle_time) <= 9000  # 9 tokens short
    assert broker.server.topics.get("f") is not None


def test_delete_topics_and_create_partitions(broker: samsa.Broker) -> None:
    setup = request(broker, CREATE_TOPICS, 7, create_body(g=6, h=6, i=1, j=1), "setup")
    assert [t.error_code for t in setup.topics] == [0, 0, 0, 0]
    limit(broker, "deleter")
    # strict (v5+): g takes 6 of 11, h 6 more (-1), i refused
    deleted = request(broker, DELETE_TOPICS, 5, {"topic_names": ["g", "h", "i"],
                                                 "timeout": 10000}, "deleter")
    assert [(r.name, r.error_code) for r in deleted.responses] == [
        ("g", 0), ("h", 0), ("i", THROTTLED)]
    assert ms(deleted.throttle_time) > 0
    assert broker.server.topics.get("i") is not None
    limit(broker, "grower")
    # strict (v3): i to 13 partitions takes 12 of 11 (-1), j refused
    grown = request(broker, CREATE_PARTITIONS, 3, {"topics": [
        {"name": "i", "count": 13, "assignments": None},
        {"name": "j", "count": 2, "assignments": None}], "timeout": 10000,
        "validate_only": False}, "grower")
    assert [(r.name, r.error_code, r.error_message) for r in grown.results] == [
        ("i", 0, None), ("j", THROTTLED, MESSAGE)]
    assert broker.server.topics.get("j").partitions == 1
    limit(broker, "old-grower")
    # permissive (v2): accepted, throttled
    old = request(broker, CREATE_PARTITIONS, 2, {"topics": [
        {"name": "j", "count": 20, "assignments": None}], "timeout": 10000,
        "validate_only": False}, "old-grower")
    assert old.results[0].error_code == 0
    assert ms(old.throttle_time) > 0
    assert broker.server.topics.get("j").partitions == 20
