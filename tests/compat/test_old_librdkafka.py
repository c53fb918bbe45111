"""Debian's kcat 1.7.1 (librdkafka 2.0.2) producing with every compression codec, and Produce
v0-v2 as Kafka 4 treats them (KAFKA-18659).

librdkafka before 2.11.1 compresses a gzip, snappy or lz4 batch only if the broker advertises a
Produce range reaching down to v0: its message set writer asks whether Produce 0..0 is supported
(librdkafka issue 4956) and otherwise logs "Broker does not support compression type ...: not
compressing batch" and sends the batch uncompressed. Kafka 4 removed Produce v0-v2 (KIP-896)
but still advertises Produce from v0 for this reason
(ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION); a request of one of those versions closes
the connection (SocketServer: unsupported version).

The codec of each batch is read from the segment file with struct, independently of samsa.
"""

from __future__ import annotations

import re
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from kafka_frames import FrameClient
from waiting import wait_for

import samsa
from samsa.records.record import RecordInput, encode_batch

pytestmark = pytest.mark.timeout(180)

KCAT = "/usr/bin/kcat"  # the Debian package: librdkafka 2.0.2
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
SASL_HANDSHAKE, API_VERSIONS, INIT_PRODUCER_ID, SASL_AUTHENTICATE = 17, 18, 22, 36
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
RECORDS = 300
_BATCH = struct.Struct(">qiibIh")  # base offset, length, leader epoch, magic, crc, attributes


def kcat(broker: samsa.Broker, *args: str, stdin: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([KCAT, "-b", broker.bootstrap_servers, *args], input=stdin,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"kcat {' '.join(args)} failed: {result.stderr}"
    return result


@pytest.fixture(scope="module", autouse=True)
def old_librdkafka() -> None:
    """These tests are about librdkafka before 2.11.1; a newer one compresses regardless."""
    assert Path(KCAT).exists(), "kcat is not installed: run `make test` (apt package kcat)"
    out = subprocess.run([KCAT, "-V"], capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", out)
    assert found is not None, out
    version = tuple(int(n) for n in found.groups())
    assert version < (2, 11, 1), f"{KCAT} has librdkafka {version}: no longer the old one"


def stored_batches(broker: samsa.Broker, topic: str) -> list[tuple[int, int, int]]:
    """(magic, codec, record count) of every batch in the partition's segment files."""
    out = []
    for segment in sorted((broker.data_dir / f"{topic}-0").glob("*.log")):
        data, pos = segment.read_bytes(), 0
        while pos + 61 <= len(data):
            _, length, _, magic, _, attributes = _BATCH.unpack_from(data, pos)
            (count,) = struct.unpack_from(">i", data, pos + 57)
            out.append((magic, attributes & 0x07, count))
            pos += 12 + length
    return out


def consume_confluent(broker: samsa.Broker, topic: str, count: int) -> list[tuple[str, str]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": topic,
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        got: list[tuple[str, str]] = []
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append((message.key().decode(), message.value().decode()))
        return got
    finally:
        consumer.close()


# --- every codec, end to end ---------------------------------------------------------------------


@pytest.mark.parametrize("codec", list(CODECS))
def test_kcat_batches_are_stored_with_their_codec_and_read_back(samsa_broker, codec):
    topic = f"codec-{codec}"
    rows = [(f"k{i % 7}", f"{codec} record {i:04d} " + "compressible payload " * 10)
            for i in range(RECORDS)]
    kcat(samsa_broker, "-P", "-t", topic, "-K", "|", "-X", f"compression.codec={codec}",
         "-X", "linger.ms=50", stdin="".join(f"{k}|{v}\n" for k, v in rows))

    def all_stored() -> list[tuple[int, int, int]] | None:
        batches = stored_batches(samsa_broker, topic)
        return batches if sum(count for *_, count in batches) == RECORDS else None

    batches = wait_for(all_stored, what=f"{RECORDS} records of {topic} on disk",
                       details=lambda: repr(stored_batches(samsa_broker, topic)))
    assert {(magic, stored) for magic, stored, _ in batches} == {(2, CODECS[codec])}

    out = kcat(samsa_broker, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k|%s\\n")
    assert [tuple(line.split("|", 1)) for line in out.stdout.splitlines()] == rows
    assert consume_confluent(samsa_broker, topic, RECORDS) == rows


def test_kcat_feature_detection_matches_kafka_4(samsa_broker):
    """What librdkafka 2.0.2 concludes from the ApiVersions answer, as against Kafka 4.0:
    record format v2, lz4 and zstd on; message format v1 off (Fetch starts at v4)."""
    detected = kcat(samsa_broker, "-L", "-X", "debug=feature").stderr
    for feature in ("MsgVer2", "LZ4", "ZSTD", "IdempotentProducer", "BrokerBalancedConsumer",
                    "OffsetTime", "SaslHandshake"):
        assert f"Enabling feature {feature}" in detected, feature
    assert "Disabling feature MsgVer1" in detected
    assert "Feature MsgVer1: Produce (2..2) supported by broker" in detected
    assert "Feature MsgVer1: Fetch (2..2) NOT supported by broker" in detected


# --- ApiVersions and Produce v0-v2 on the wire -----------------------------------------------


# Kafka 4.0's minimum versions of the APIs librdkafka's feature map reads
KAFKA_4_MINIMUMS = {
    PRODUCE: 0, FETCH: 4, LIST_OFFSETS: 1, OFFSET_COMMIT: 2, OFFSET_FETCH: 1, FIND_COORDINATOR: 0,
    JOIN_GROUP: 0, HEARTBEAT: 0, LEAVE_GROUP: 0, SYNC_GROUP: 0, SASL_HANDSHAKE: 0,
    API_VERSIONS: 0, INIT_PRODUCER_ID: 0, SASL_AUTHENTICATE: 0,
}


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_advertise_produce_from_v0(samsa_broker, version):
    body = {"client_software_name": "old", "client_software_version": "1.0"} if version >= 3 \
        else {}
    with FrameClient(samsa_broker.bootstrap_servers) as client:
        response = client.request(API_VERSIONS, version, body)
    assert response.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[PRODUCE] == (0, 11)
    assert {key: ranges[key][0] for key in KAFKA_4_MINIMUMS} == KAFKA_4_MINIMUMS


def _string(value: str) -> bytes:
    return struct.pack(">h", len(value)) + value.encode()


def _legacy_message(magic: int, key: bytes, value: bytes) -> bytes:
    """One entry of a message set of message format v0 or v1 (what produced before v3)."""
    timestamp = struct.pack(">q", 1_700_000_000_000) if magic == 1 else b""
    body = (struct.pack(">bb", magic, 0) + timestamp + struct.pack(">i", len(key)) + key
            + struct.pack(">i", len(value)) + value)
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


def _old_produce(version: int, acks: int, topic: str, records: bytes) -> bytes:
    """A Produce v0-v2 frame: header v1, then acks, timeout and the topics (no transactional
    id, which v3 added)."""
    payload = (struct.pack(">hhi", PRODUCE, version, 7) + _string("old-client")
               + struct.pack(">hii", acks, 5000, 1) + _string(topic)
               + struct.pack(">iii", 1, 0, len(records)) + records)
    return struct.pack(">i", len(payload)) + payload


def _log_end_offset(client: FrameClient, topic: str) -> int:
    response = client.request(LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}],
    })
    partition = response.topics[0].partitions[0]
    assert partition.error_code == 0, partition
    return int(partition.offset)


MESSAGE_SETS = {
    "magic 0": _legacy_message(0, b"k", b"old"),
    "magic 1": _legacy_message(1, b"k", b"old"),
    "record batch v2": encode_batch([RecordInput(b"new", b"k")]),
}


@pytest.mark.parametrize("acks", [1, -1, 0])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_closes_the_connection_and_stores_nothing(samsa_broker, version, acks):
    """Advertised, not served: Kafka 4 closes the connection without an answer, whatever acks
    and whatever the message set holds; the log is untouched and the broker serves on."""
    topic = "old-produce"
    with FrameClient(samsa_broker.bootstrap_servers) as good:
        created = good.request(METADATA, 8, {
            "topics": [{"name": topic}], "allow_auto_topic_creation": True,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        })
        assert created.topics[0].error_code == 0, created
        written = good.request(PRODUCE, 9, {
            "transactional_id": None, "acks": -1, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": 0, "records": encode_batch([RecordInput(b"first", b"k")])}]}],
        }).responses[0].partition_responses[0]
        assert (written.error_code, written.base_offset) == (0, 0)

        for name, records in MESSAGE_SETS.items():
            with FrameClient(samsa_broker.bootstrap_servers) as old:
                old.send_bytes(_old_produce(version, acks, topic, records))
                assert old.is_closed_by_peer(timeout=10.0), name

        assert _log_end_offset(good, topic) == 1
        assert good.request(API_VERSIONS, 3, {"client_software_name": "old",
                                              "client_software_version": "1.0"}).error_code == 0
    assert stored_batches(samsa_broker, topic) == [(2, 0, 1)]
