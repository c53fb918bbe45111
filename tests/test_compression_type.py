"""``compression.type`` (topic and broker) and the KIP-390 level keys, as Kafka has them.

A topic whose compression.type names a codec stores every produced batch in that codec: a
batch the producer compressed otherwise is recompressed on append (Kafka's LogValidator), with
its records, offsets, timestamps and producer fields kept; ``producer`` (the default) keeps the
producer's codec and the bytes as sent. The codec on disk is read from the segment files
(batch headers, and ``samsa dump-log``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

import samsa
from samsa.config import BROKER_KEYS, TOPIC_KEYS, ConfigError, LogConfig
from samsa.errors import MessageTooLargeError
from samsa.records import compression
from samsa.records.batch import (
    HEADER_SIZE,
    BatchHeader,
    Compression,
    iter_headers,
    read_header,
    validate_batches,
)
from samsa.records.record import RecordInput, decode_records, encode_batch, records_payload
from samsa.server.modes import FIRST_GENERATED_BROKER_ID
from samsa.storage import Log

pytestmark = pytest.mark.timeout(120)

TIMEOUT = 15.0
NOW_MS = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]  # librdkafka's compression.type values
TOPIC_TYPES = ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"]
STORED = {"uncompressed": Compression.NONE, **{c: Compression[c.upper()] for c in CODECS[1:]}}


# --- helpers ----------------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path / "data") as b:
        yield b


def admin_for(b: samsa.Broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": b.bootstrap_servers, "socket.timeout.ms": 10000})


def outcomes(futures: dict[Any, Future]) -> dict[Any, Any]:
    """Each future's result, or the KafkaError it failed with."""
    out: dict[Any, Any] = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=TIMEOUT)
        except KafkaException as exc:
            out[key] = exc.args[0]
    return out


def create_topic(admin: AdminClient, name: str, **configs: str) -> None:
    assert outcomes(admin.create_topics([NewTopic(name, 1, 1, config=configs)])) == {name: None}


def describe_topic(admin: AdminClient, name: str) -> dict[str, Any]:
    resource = ConfigResource(ResourceType.TOPIC, name)
    return admin.describe_configs([resource])[resource].result(timeout=TIMEOUT)


def messages_for(tag: str, count: int) -> list[dict[str, Any]]:
    """Records with keys, compressible values, headers and distinct timestamps."""
    return [
        {"key": b"%s-key-%d" % (tag.encode(), i),
         "value": b"%s value %d " % (tag.encode(), i) + b"abcdefgh" * (i % 40),
         "headers": [("n", str(i).encode()), ("tag", tag.encode()), ("null", None)],
         "timestamp": NOW_MS - 1000 * (count - i)}
        for i in range(count)
    ]


def produce(b: samsa.Broker, topic: str, messages: Sequence[dict[str, Any]],
            **conf: Any) -> None:
    errors: list[KafkaError | None] = []
    producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 20,
                         "message.timeout.ms": 10000, **conf})
    for m in messages:
        producer.produce(topic, on_delivery=lambda err, _msg: errors.append(err), **m)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    assert errors == [None] * len(messages)


def consume(b: samsa.Broker, topic: str, count: int, **conf: Any) -> list[Message]:
    consumer = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "compression",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100, **conf})
    got: list[Message] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append(msg)
    finally:
        consumer.close()
    assert len(got) == count, f"got {len(got)} of {count} messages"
    return got


def check_records(got: Sequence[Message], sent: Sequence[dict[str, Any]]) -> None:
    assert [(m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in got] == [
        (i, m["key"], m["value"], m["headers"], m["timestamp"]) for i, m in enumerate(sent)
    ]


def stored_batches(b: samsa.Broker, topic: str) -> list[tuple[BatchHeader, bytes]]:
    """Every batch of partition 0 as the segment files hold it, each validated (CRC)."""
    out = []
    for log_file in sorted((Path(b.data_dir) / f"{topic}-0").glob("*.log")):
        data = log_file.read_bytes()
        for pos, header in iter_headers(data):
            batch = data[pos : pos + header.size]
            validate_batches(batch, from_client=False)
            out.append((header, batch))
    return out


def dump_log_codecs(b: samsa.Broker, topic: str) -> list[str]:
    """The compresscodec of each batch as ``samsa dump-log`` prints it."""
    files = sorted((Path(b.data_dir) / f"{topic}-0").glob("*.log"))
    result = subprocess.run([sys.executable, "-m", "samsa.cli", "dump-log", *map(str, files)],
                            capture_output=True, text=True, timeout=60, check=True)
    return [line.split("compresscodec: ")[1].split()[0]
            for line in result.stdout.splitlines() if "compresscodec: " in line]


# --- real clients -----------------------------------------------------------------------------


@pytest.mark.parametrize("topic_type", TOPIC_TYPES)
def test_every_producer_codec_into_every_topic_codec(broker, topic_type):
    """Five producers, one per librdkafka codec, write to a topic of each compression.type;
    a consumer reads every record back intact; on disk every batch is in the topic's codec
    (``producer``: in the codec its producer used)."""
    admin = admin_for(broker)
    topic = f"stored-{topic_type}"
    create_topic(admin, topic, **{"compression.type": topic_type})
    sent: list[dict[str, Any]] = []
    expected_codecs: list[Compression] = []
    for codec in CODECS:
        messages = messages_for(codec, 60)
        produce(broker, topic, messages, **{"compression.type": codec})
        sent += messages
        count_before = len(expected_codecs)
        batches = stored_batches(broker, topic)
        new = len(batches) - count_before
        assert new >= 1
        want = Compression[codec.upper()] if topic_type == "producer" else STORED[topic_type]
        expected_codecs += [want] * new
    headers = [h for h, _ in stored_batches(broker, topic)]
    assert [h.compression for h in headers] == expected_codecs
    assert sum(h.records_count for h in headers) == len(sent)
    check_records(consume(broker, topic, len(sent)), sent)


def test_producer_and_the_same_codec_keep_the_producers_batches(broker):
    """compression.type=producer, and a topic whose codec is the producer's (whatever its
    level): the batches are the producer's (the log tests below show them stored byte for
    byte as sent)."""
    admin = admin_for(broker)
    create_topic(admin, "as-producer")
    create_topic(admin, "same-codec", **{"compression.type": "lz4",
                                         "compression.lz4.level": "17"})
    stored: dict[str, list[bytes]] = {}
    for topic in ("as-producer", "same-codec"):
        messages = messages_for("same", 50)
        produce(broker, topic, messages, **{"compression.type": "lz4", "linger.ms": 200})
        batches = stored_batches(broker, topic)
        assert {h.compression for h, _ in batches} == {Compression.LZ4}
        stored[topic] = [batch[16:] for _, batch in batches]
        check_records(consume(broker, topic, len(messages)), messages)
    # the same records from the same producer settings: the same bytes under both configs
    assert stored["as-producer"] == stored["same-codec"]


def test_idempotent_producer_keeps_producer_id_and_sequences(broker):
    admin = admin_for(broker)
    create_topic(admin, "idempotent", **{"compression.type": "zstd"})
    sent: list[dict[str, Any]] = []
    for round_ in range(3):
        messages = messages_for(f"idem{round_}", 40)
        produce(broker, "idempotent", messages, **{"enable.idempotence": True,
                                                   "compression.type": "snappy"})
        sent += messages
    headers = [h for h, _ in stored_batches(broker, "idempotent")]
    assert all(h.compression == Compression.ZSTD for h in headers)
    assert all(h.producer_id >= 0 and h.producer_epoch >= 0 for h in headers)
    # three producers, each with its own id, each from sequence 0, without a gap
    by_producer: dict[int, list[BatchHeader]] = {}
    for h in headers:
        by_producer.setdefault(h.producer_id, []).append(h)
    assert len(by_producer) == 3
    for batches in by_producer.values():
        sequence = 0
        for h in batches:
            assert h.base_sequence == sequence
            sequence += h.records_count
        assert sequence == 40
    check_records(consume(broker, "idempotent", len(sent)), sent)


def test_transactional_producer_keeps_its_fields_and_markers_stay_uncompressed(broker):
    admin = admin_for(broker)
    create_topic(admin, "transactional", **{"compression.type": "gzip"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20,
                         "transactional.id": "compressing", "compression.type": "lz4",
                         "message.timeout.ms": 10000})
    producer.init_transactions(TIMEOUT)
    committed = messages_for("committed", 30)
    producer.begin_transaction()
    for m in committed:
        producer.produce("transactional", **m)
    producer.commit_transaction(TIMEOUT)
    producer.begin_transaction()
    for m in messages_for("aborted", 10):
        producer.produce("transactional", **m)
    producer.flush(TIMEOUT)
    producer.abort_transaction(TIMEOUT)

    headers = [h for h, _ in stored_batches(broker, "transactional")]
    data = [h for h in headers if not h.is_control]
    markers = [h for h in headers if h.is_control]
    assert len(markers) == 2
    assert all(h.compression == Compression.NONE and h.is_transactional for h in markers)
    assert all(h.compression == Compression.GZIP and h.is_transactional for h in data)
    assert {h.producer_id for h in headers} == {data[0].producer_id}
    sequence = 0
    for h in data:
        assert h.base_sequence == sequence
        sequence += h.records_count
    assert sequence == 40
    got = consume(broker, "transactional", len(committed), **{"isolation.level":
                                                                "read_committed"})
    check_records(got, committed)


def test_broker_compression_type_is_the_default_of_topics(tmp_path):
    with samsa.Broker(tmp_path / "data", compression_type="lz4") as b:
        admin = admin_for(b)
        create_topic(admin, "inherits")
        create_topic(admin, "own", **{"compression.type": "producer"})
        entries = describe_topic(admin, "inherits")
        assert entries["compression.type"].value == "lz4"
        assert entries["compression.type"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        own = describe_topic(admin, "own")["compression.type"]
        assert (own.value, own.source) == ("producer", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
        for topic in ("inherits", "own", "auto-created"):  # the last through Metadata
            messages = messages_for(topic, 30)
            produce(b, topic, messages, **{"compression.type": "gzip"})
            want = Compression.GZIP if topic == "own" else Compression.LZ4
            assert {h.compression for h, _ in stored_batches(b, topic)} == {want}
            check_records(consume(b, topic, len(messages)), messages)
        # the coordinators' topics keep Kafka's own settings, whatever the broker's default
        consumer = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "g"})
        consumer.commit(offsets=[TopicPartition("own", 0, 5)], asynchronous=False)
        consumer.close()
        offsets = describe_topic(admin, "__consumer_offsets")["compression.type"]
        assert offsets.value == "producer"


def test_altering_the_topic_changes_later_appends(broker):
    admin = admin_for(broker)
    create_topic(admin, "altered")
    first = messages_for("first", 20)
    produce(broker, "altered", first, **{"compression.type": "snappy"})

    resource = ConfigResource(ResourceType.TOPIC, "altered",
                              set_config={"compression.type": "zstd",
                                          "compression.zstd.level": "19"})
    with pytest.warns(DeprecationWarning):  # librdkafka's legacy AlterConfigs
        assert outcomes(admin.alter_configs([resource])) == {resource: None}
    entries = describe_topic(admin, "altered")
    assert entries["compression.type"].value == "zstd"
    assert entries["compression.type"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["compression.zstd.level"].value == "19"
    second = messages_for("second", 20)
    produce(broker, "altered", second, **{"compression.type": "snappy"})

    change = ConfigResource(ResourceType.TOPIC, "altered", incremental_configs=[
        ConfigEntry("compression.type", "uncompressed",
                    incremental_operation=AlterConfigOpType.SET)])
    assert outcomes(admin.incremental_alter_configs([change])) == {change: None}
    third = messages_for("third", 20)
    produce(broker, "altered", third, **{"compression.type": "gzip"})

    batches = stored_batches(broker, "altered")
    codecs = [h.compression for h, _ in batches]
    firsts = [h.base_offset for h, _ in batches]
    assert codecs[firsts.index(0)] == Compression.SNAPPY
    assert codecs[firsts.index(20)] == Compression.ZSTD
    assert codecs[firsts.index(40)] == Compression.NONE
    assert all(c == Compression.SNAPPY for c, o in zip(codecs, firsts, strict=True) if o < 20)
    assert all(c == Compression.ZSTD for c, o in zip(codecs, firsts, strict=True)
               if 20 <= o < 40)
    assert all(c == Compression.NONE for c, o in zip(codecs, firsts, strict=True) if o >= 40)
    # zstd at level 19, as configured
    for header, batch in batches:
        if header.compression == Compression.ZSTD:
            payload = records_payload(batch, header)
            assert batch[HEADER_SIZE:] == compression.compress(Compression.ZSTD, payload, 19)
    assert dump_log_codecs(broker, "altered") == [c.name.lower() for c in codecs]
    check_records(consume(broker, "altered", 60), first + second + third)


BAD_VALUES = [
    ("compression.type", "brotli"),
    ("compression.type", "GZIP"),  # Kafka's ValidString is case-sensitive
    ("compression.type", "none"),  # the producer's name: a topic says uncompressed
    ("compression.gzip.level", "0"),
    ("compression.gzip.level", "10"),
    ("compression.gzip.level", "-2"),
    ("compression.lz4.level", "0"),
    ("compression.lz4.level", "18"),
    ("compression.zstd.level", "23"),
    ("compression.zstd.level", "-131073"),
    ("compression.zstd.level", "fast"),
]


def test_invalid_values_are_refused_and_change_nothing(broker):
    admin = admin_for(broker)
    created = outcomes(admin.create_topics(
        [NewTopic(f"bad-{i}", 1, 1, config={key: value})
         for i, (key, value) in enumerate(BAD_VALUES)]))
    for i, (key, _) in enumerate(BAD_VALUES):
        outcome = created[f"bad-{i}"]
        assert isinstance(outcome, KafkaError) and outcome.code() == KafkaError.INVALID_CONFIG
        assert key in outcome.str()
    topics = admin.list_topics(timeout=TIMEOUT).topics
    assert not [name for name in topics if name.startswith("bad-")]

    create_topic(admin, "kept", **{"compression.type": "gzip", "compression.gzip.level": "9"})
    for key, value in BAD_VALUES:
        legacy = ConfigResource(ResourceType.TOPIC, "kept", set_config={key: value})
        with pytest.warns(DeprecationWarning):
            outcome = outcomes(admin.alter_configs([legacy]))[legacy]
        assert outcome.code() == KafkaError.INVALID_CONFIG
        incremental = ConfigResource(ResourceType.TOPIC, "kept", incremental_configs=[
            ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
        outcome = outcomes(admin.incremental_alter_configs([incremental]))[incremental]
        assert outcome.code() == KafkaError.INVALID_CONFIG
    entries = describe_topic(admin, "kept")
    assert entries["compression.type"].value == "gzip"
    assert entries["compression.gzip.level"].value == "9"
    assert entries["compression.lz4.level"].value == "9"
    assert entries["compression.zstd.level"].value == "3"
    # and the limits themselves are taken
    limits = {"compression.gzip.level": "-1", "compression.lz4.level": "1",
              "compression.zstd.level": "-131072"}
    create_topic(admin, "limits", **{"compression.type": "zstd", **limits})
    entries = describe_topic(admin, "limits")
    assert {k: entries[k].value for k in limits} == limits


@pytest.mark.parametrize(("key", "value"), BAD_VALUES)
def test_invalid_broker_values_are_refused_at_start(tmp_path, key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        samsa.Broker(tmp_path / "data", **{key.replace(".", "_"): value}).start()


def test_described_as_kafka_describes_them(broker):
    admin = admin_for(broker)
    create_topic(admin, "described")
    entries = describe_topic(admin, "described")
    defaults = {"compression.type": "producer", "compression.gzip.level": "-1",
                "compression.lz4.level": "9", "compression.zstd.level": "3"}
    for key, value in defaults.items():
        assert entries[key].value == value
        assert entries[key].source == ConfigSource.DEFAULT_CONFIG.value
        assert not entries[key].is_read_only
        assert [s for s in entries[key].synonyms] == [key]  # the broker key of the same name
    resource = ConfigResource(ResourceType.BROKER, str(FIRST_GENERATED_BROKER_ID))
    brokers = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT)
    assert {k: brokers[k].value for k in defaults} == defaults
    assert set(defaults) <= set(BROKER_KEYS) & set(TOPIC_KEYS)


# --- the log ----------------------------------------------------------------------------------


def records(count: int, tag: bytes = b"r") -> list[RecordInput]:
    return [RecordInput(tag + b" value %d " % i + b"xyz" * (i % 17), tag + b"%d" % i,
                        NOW_MS + i, [("h", b"%d" % i), ("none", None)]) for i in range(count)]


def open_log(tmp_path: Path, name: str = "t-0", **props: Any) -> Log:
    return Log(tmp_path / name, LogConfig.from_props(props), clock=lambda: NOW_MS + 10_000)


def read_all(log: Log) -> list[bytes]:
    region = log.read(0, 1 << 24)
    assert region is not None
    data = region.read()
    return [data[pos : pos + h.size] for pos, h in iter_headers(data)]


@pytest.mark.parametrize("target", TOPIC_TYPES[1:])
@pytest.mark.parametrize("source", list(Compression), ids=lambda c: c.name.lower())
def test_log_recompresses_with_every_field_kept(tmp_path, source, target):
    log = open_log(tmp_path, **{"compression.type": target})
    sent = encode_batch(records(50), compression_type=source, producer_id=77,
                        producer_epoch=4, base_sequence=0, transactional=True)
    info = log.append(sent, leader_epoch=3)
    assert (info.first_offset, info.last_offset) == (0, 49)
    (stored,) = read_all(log)
    (header,) = validate_batches(stored, from_client=True)  # a good CRC, the records counted
    before = read_header(sent)
    assert header.compression == STORED[target]
    assert (header.base_offset, header.leader_epoch) == (0, 3)
    kept = ("last_offset_delta", "base_timestamp", "max_timestamp", "producer_id",
            "producer_epoch", "base_sequence", "records_count", "is_transactional",
            "is_control", "log_append_time")
    assert {k: getattr(header, k) for k in kept} == {k: getattr(before, k) for k in kept}
    assert list(decode_records(stored)) == list(decode_records(sent))
    assert records_payload(stored) == records_payload(sent)  # deltas and all, byte for byte
    if source == STORED[target]:
        assert stored[16:] == sent[16:]  # the same codec: the bytes as sent, no new CRC
    log.close()


def test_log_recompression_levels(tmp_path):
    for codec, key, level in (("gzip", "compression.gzip.level", 1),
                              ("lz4", "compression.lz4.level", 12),
                              ("zstd", "compression.zstd.level", -5)):
        log = open_log(tmp_path, f"{codec}-0", **{"compression.type": codec, key: level})
        log.append(encode_batch(records(200)))
        (stored,) = read_all(log)
        payload = records_payload(stored)
        expected = compression.compress(Compression[codec.upper()], payload, level)
        assert len(stored) - HEADER_SIZE == len(expected)
        default = compression.compress(Compression[codec.upper()], payload)
        assert len(default) != len(expected)  # the level made a difference
        log.close()


def test_log_append_time_and_recompression(tmp_path):
    log = open_log(tmp_path, **{"compression.type": "snappy",
                                "message.timestamp.type": "LogAppendTime"})
    sent = encode_batch(records(10), compression_type=Compression.GZIP)
    info = log.append(sent)
    (stored,) = read_all(log)
    (header,) = validate_batches(stored)
    assert header.compression == Compression.SNAPPY and header.log_append_time
    assert header.max_timestamp == info.log_append_time == NOW_MS + 10_000
    assert [r.timestamp for r in decode_records(stored)] == [NOW_MS + 10_000] * 10
    log.close()


def test_log_duplicate_of_a_recompressed_batch(tmp_path):
    """An idempotent producer's retry of a batch stored recompressed is still its duplicate."""
    log = open_log(tmp_path, **{"compression.type": "zstd"})
    sent = encode_batch(records(5), compression_type=Compression.LZ4, producer_id=9,
                        producer_epoch=0, base_sequence=0)
    log.append(encode_batch(records(3), producer_id=8, producer_epoch=0, base_sequence=0))
    first = log.append(sent)
    again = log.append(sent)
    assert again.duplicate and (again.first_offset, again.last_offset) == (3, 7)
    assert (first.first_offset, first.last_offset) == (3, 7)
    assert log.log_end_offset == 8
    log.close()


def test_log_recompressed_too_large_is_refused(tmp_path):
    """Recompressed to uncompressed, a batch that no longer fits max.message.bytes is refused
    (Kafka's RecordTooLargeException after the rebuild) and nothing is written."""
    big = [RecordInput(b"a" * 4000, b"k%d" % i, NOW_MS) for i in range(10)]
    sent = encode_batch(big, compression_type=Compression.ZSTD)
    assert len(sent) < 2000
    log = open_log(tmp_path, **{"compression.type": "uncompressed",
                                "max.message.bytes": 2000})
    with pytest.raises(MessageTooLargeError):
        log.append(sent)
    assert log.log_end_offset == 0 and log.size == 0
    log.close()


def test_follower_appends_are_never_recompressed(tmp_path):
    leader = open_log(tmp_path, "leader-0")
    leader.append(encode_batch(records(4), compression_type=Compression.GZIP), leader_epoch=1)
    (copied,) = read_all(leader)
    follower = open_log(tmp_path, "follower-0", **{"compression.type": "zstd"})
    follower.append(copied, assign_offsets=False)
    assert read_all(follower) == [copied]
    leader.close()
    follower.close()


@pytest.mark.parametrize("level", [None, 1, 9, 12, 17])
def test_lz4_frames_are_what_kafkas_java_reader_takes(level):
    """Kafka's Lz4BlockInputStream takes only frames of independent blocks (FLG bit 5; lz4's
    default is linked blocks) of version 01, and checks the descriptor's checksum."""
    import lz4.frame  # python-lz4: a decoder other than the broker's

    data = b"".join(b"record %d %s " % (i, b"abc" * (i % 30)) for i in range(20000))
    frame = compression.compress(Compression.LZ4, data, level)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg = frame[4]
    assert flg >> 6 == 1 and flg & 0x20 and not flg & 0x03  # version, independent, reserved
    assert lz4.frame.decompress(frame) == data
