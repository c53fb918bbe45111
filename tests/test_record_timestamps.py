"""KIP-937 as Kafka 4 has it: on a CreateTime topic a record whose timestamp is more than
``message.timestamp.after.max.ms`` (default one hour) ahead of the broker's clock, or more than
``message.timestamp.before.max.ms`` (default unlimited) behind it, is refused: the batch gets
INVALID_TIMESTAMP with each such record named (KIP-467) and nothing of it is written. A
LogAppendTime topic takes any timestamp (the broker's replaces it). Over TCP: raw Produce v9
frames, and confluent-kafka's delivery report."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka_frames import FrameClient

import samsa
from samsa.records.record import RecordInput, encode_batch

pytestmark = pytest.mark.timeout(60)

HOUR_MS = 3600 * 1000
DEADLINE = 30.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path_factory.mktemp("timestamps")) as b:
        yield b


def create(broker: samsa.Broker, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(DEADLINE)


def produce_raw(broker: samsa.Broker, topic: str, timestamps: list[int]) -> object:
    batch = encode_batch([RecordInput(key=b"k", value=b"v%d" % i, timestamp=ts)
                          for i, ts in enumerate(timestamps)])
    with FrameClient(broker.bootstrap_servers) as client:
        answer = client.request(0, 9, {
            "transactional_id": None, "acks": 1, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0,
                                                               "records": batch}]}]})
    return answer.responses[0].partition_responses[0]  # type: ignore[attr-defined]


def end_offset(broker: samsa.Broker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "ts"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=DEADLINE)[1]
    finally:
        consumer.close()


def test_a_record_too_far_ahead_is_refused_and_named(broker: samsa.Broker) -> None:
    create(broker, "ahead", {})
    now = int(time.time() * 1000)
    answer = produce_raw(broker, "ahead", [now, now + 2 * HOUR_MS, now - 400 * 24 * HOUR_MS])
    assert answer.error_code == KafkaError.INVALID_TIMESTAMP  # type: ignore[attr-defined]
    assert answer.error_message == \
        "One or more records have been rejected due to invalid timestamp"  # type: ignore[attr-defined]
    [(index, why)] = [(e.batch_index, e.batch_index_error_message)
                      for e in answer.record_errors]  # type: ignore[attr-defined]
    assert index == 1
    assert why.startswith(f"Timestamp {now + 2 * HOUR_MS} of message with offset 1 is out of "
                          "range. The timestamp should be within [")
    assert end_offset(broker, "ahead") == 0
    # an hour less a minute ahead is within the default
    assert produce_raw(broker, "ahead", [now + HOUR_MS - 60_000]).error_code == 0  # type: ignore[attr-defined]
    assert end_offset(broker, "ahead") == 1


def test_before_max_ms_and_log_append_time(broker: samsa.Broker) -> None:
    create(broker, "recent-only", {"message.timestamp.before.max.ms": str(HOUR_MS)})
    now = int(time.time() * 1000)
    answer = produce_raw(broker, "recent-only", [now - 2 * HOUR_MS, now, now - 3 * HOUR_MS])
    assert answer.error_code == KafkaError.INVALID_TIMESTAMP  # type: ignore[attr-defined]
    assert [e.batch_index for e in answer.record_errors] == [0, 2]  # type: ignore[attr-defined]
    create(broker, "stamped", {"message.timestamp.type": "LogAppendTime"})
    assert produce_raw(broker, "stamped", [now + 48 * HOUR_MS]).error_code == 0  # type: ignore[attr-defined]


def test_confluent_kafka_gets_invalid_timestamp(broker: samsa.Broker) -> None:
    create(broker, "client-ahead", {})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "retries": 0})
    reports: list[KafkaError | None] = []
    producer.produce("client-ahead", b"late", timestamp=int(time.time() * 1000) + 5 * HOUR_MS,
                     on_delivery=lambda err, _msg: reports.append(err))
    assert producer.flush(DEADLINE) == 0
    producer.produce("client-ahead", b"now", on_delivery=lambda err, _msg: reports.append(err))
    assert producer.flush(DEADLINE) == 0
    late, on_time = reports
    assert late is not None and late.code() == KafkaError.INVALID_TIMESTAMP, late
    assert on_time is None
    assert end_offset(broker, "client-ahead") == 1


def test_the_broker_default_applies(tmp_path: Path) -> None:
    with samsa.Broker(tmp_path, config={"log.message.timestamp.after.max.ms": 1000}) as b:
        create(b, "strict", {})
        now = int(time.time() * 1000)
        assert produce_raw(b, "strict", [now + 60_000]).error_code == \
            KafkaError.INVALID_TIMESTAMP  # type: ignore[attr-defined]
