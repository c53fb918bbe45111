"""The Spark tasks' bulk decoding of record batches into Arrow columns
(``samsa.spark.arrow_records``), against the per-record decoder (``samsa.records.record``).

Batches come from the project's own writer (every codec, null keys and values, headers, records
of one to three length bytes, log append time, corrupt batches) and from real clients through
a real broker, fetched as bytes by the tasks' own client: confluent-kafka's producers with
each codec, and its transactional producer committing and aborting, read under both isolation
levels. The fetch path of ``read_range`` and the librdkafka path it falls back to give the
same rows.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import samsa
from samsa.errors import CorruptRecordError
from samsa.records.batch import BatchHeader, Compression, iter_headers
from samsa.records.record import RecordInput, decode_records, encode_batch
from samsa.spark.arrow_records import decode_batches, record_batch
from samsa.spark.fetch_read import fetch_settings
from samsa.spark.fetched import visible_batches
from samsa.spark.source import OffsetRange, arrow_schema, read_range, read_range_librdkafka
from samsa.spark.task_client import PartitionClient, parse_bootstrap

TIMEOUT = 15.0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def expected_rows(buf: bytes, batches: list[tuple[int, BatchHeader]], topic: str,
                  partition: int) -> list[dict[str, Any]]:
    """What the per-record decoder reads from the batches, as the rows of Spark's schema."""
    rows = []
    for pos, header in batches:
        for r in decode_records(memoryview(buf)[pos : pos + header.size]):
            rows.append({
                "key": r.key, "value": r.value, "topic": topic, "partition": partition,
                "offset": r.offset, "timestamp": r.timestamp,
                "timestampType": 1 if header.log_append_time else 0,
                "headers": [{"key": k, "value": v} for k, v in r.headers] or None,
            })
    return rows


def bulk_rows(buf: bytes, batches: list[tuple[int, BatchHeader]], topic: str,
              partition: int) -> list[dict[str, Any]]:
    columns = decode_batches(buf, batches)
    batch = record_batch(columns, topic, partition, arrow_schema(True), 0, len(columns))
    batch.validate(full=True)
    rows = batch.to_pylist()
    for row in rows:  # as milliseconds, like the per-record decoder
        row["timestamp"] = round(row["timestamp"].timestamp() * 1000)
    return rows


def random_record(rnd: random.Random, i: int) -> RecordInput:
    def blob(sizes: tuple[int, ...]) -> bytes | None:
        return None if rnd.random() < 0.15 else rnd.randbytes(rnd.choice(sizes))

    headers = [(rnd.choice(["h", "trace-id", "ключ", ""]), blob((0, 3, 12, 13, 40)))
               for _ in range(rnd.choice((0, 0, 1, 2, 5)))]
    return RecordInput(
        value=blob((0, 1, 11, 12, 13, 100, 5000, 70_000)),  # one, two and three length bytes
        key=blob((0, 4, 12, 13, 64)),
        timestamp=1_700_000_000_000 + rnd.randrange(-5_000, 50_000) * (i % 3),
        headers=headers,
    )


@pytest.mark.parametrize("codec", list(Compression))
def test_written_batches_decode_as_the_per_record_decoder_reads_them(codec: Compression) -> None:
    rnd = random.Random(int(codec))
    buf = b""
    offset = 1_000
    for n in (1, 2, 17, 300):
        buf += encode_batch([random_record(rnd, i) for i in range(n)], base_offset=offset,
                            timestamp=1_700_000_000_000, compression_type=codec)
        offset += n + 7  # gaps between batches, as compaction leaves them
    batches = list(iter_headers(buf))
    assert bulk_rows(buf, batches, "t", 4) == expected_rows(buf, batches, "t", 4)


def test_log_append_time_and_row_slices() -> None:
    rnd = random.Random(9)
    batch = bytearray(encode_batch([random_record(rnd, i) for i in range(50)], base_offset=10,
                                   timestamp=5))
    # LogAppendTime: the broker sets the attribute and maxTimestamp (not under a check here)
    batch[22] |= 0x08
    batch[35:43] = (1_800_000_000_000).to_bytes(8, "big")
    buf = bytes(batch)
    batches = list(iter_headers(buf))
    rows = bulk_rows(buf, batches, "t", 0)
    assert rows == expected_rows(buf, batches, "t", 0)
    assert {(r["timestamp"], r["timestampType"]) for r in rows} == {(1_800_000_000_000, 1)}
    columns = decode_batches(buf, batches)
    part = record_batch(columns, "t", 0, arrow_schema(True), 7, 31)
    part.validate(full=True)
    assert part.column("offset").to_pylist() == list(range(17, 41))
    assert part.column("headers").to_pylist() == [r["headers"] for r in rows[7:31]]


def test_header_keys_that_are_not_utf8_are_replaced_as_the_per_record_decoder_does() -> None:
    buf = encode_batch([RecordInput(b"v", None, 1, [("ok", b"1")])])
    bad = buf.replace(b"\x04ok", b"\x04\xff\xfe")  # the key's bytes (the CRC is not read)
    batches = list(iter_headers(bad))
    assert bulk_rows(bad, batches, "t", 0) == expected_rows(bad, batches, "t", 0)


@pytest.mark.parametrize("damage", ["short", "long", "count"])
def test_records_that_do_not_fill_their_batch_are_corrupt(damage: str) -> None:
    records = [RecordInput(b"value-%d" % i, b"k") for i in range(5)]
    buf = bytearray(encode_batch(records))
    if damage == "short":  # a record length one byte short
        buf[61] -= 2
    elif damage == "long":
        buf[61] += 2
    else:  # one record more than the batch holds
        buf[57:61] = (6).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        decode_batches(bytes(buf), list(iter_headers(bytes(buf))))


# --- batches from real clients, through a real broker ---------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    data: Path = tmp_path_factory.mktemp("arrow-records") / "data"
    with samsa.Broker(data) as b:
        yield b


def create_topic(broker: samsa.Broker, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic(name, 1)]).values():
        future.result(timeout=TIMEOUT)


Answer = tuple[bytes, list[tuple[int, BatchHeader]]]


def fetch_all(broker: samsa.Broker, topic: str, read_committed: bool) -> list[Answer]:
    """Partition 0 as the broker answers fetches for it: each answer's records and the batches
    of them a consumer returns."""
    client = PartitionClient(
        parse_bootstrap(broker.bootstrap_servers), topic, 0, client_id="test",
        read_committed=read_committed, timeout_s=TIMEOUT, max_wait_ms=100, max_bytes=1 << 20,
        partition_max_bytes=64 * 1024,  # several answers
    )
    answers: list[Answer] = []
    try:
        offset = 0
        for _ in range(1000):
            client.send_fetch(offset)
            answer = client.receive_fetch()
            assert answer.error == 0
            records = bytes(answer.records)
            visible = visible_batches(records, read_committed=read_committed,
                                      aborted=answer.aborted)
            limit = answer.last_stable_offset if read_committed else answer.high_watermark
            if visible.next_offset is None:
                assert offset >= limit
                break
            answers.append((records, visible.batches))
            offset = visible.next_offset
        else:
            raise AssertionError("the partition never ended")
    finally:
        client.close()
    return answers


def produce(broker: samsa.Broker, topic: str, codec: str, count: int) -> None:
    rnd = random.Random(codec)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers,
                         "compression.type": codec, "linger.ms": 20})
    for i in range(count):
        producer.produce(
            topic,
            key=None if i % 3 == 0 else f"k{i}".encode(),
            # compressible (librdkafka sends a batch that would not shrink uncompressed)
            value=None if i % 11 == 0 else b"%d," % i * rnd.choice((0, 1, 20, 500)),
            headers=[("n", str(i).encode()), ("none", None)] if i % 4 == 0 else None,
            timestamp=1_700_000_000_000 + i,
        )
    assert producer.flush(TIMEOUT) == 0


@pytest.mark.parametrize("codec", CODECS)
def test_fetched_batches_of_a_real_producer(broker: samsa.Broker, codec: str) -> None:
    topic = f"fetched-{codec}"
    create_topic(broker, topic)
    produce(broker, topic, codec, 2000)
    answers = fetch_all(broker, topic, read_committed=False)
    rows = []
    for records, batches in answers:
        assert bulk_rows(records, batches, topic, 0) == expected_rows(records, batches, topic, 0)
        rows += bulk_rows(records, batches, topic, 0)
    assert [r["offset"] for r in rows] == list(range(2000))
    headers = iter_headers(answers[0][0])
    if codec != "none":
        assert all(h.compression.name.lower() == codec for _, h in headers)


def transactional_topic(broker: samsa.Broker, topic: str) -> tuple[set[bytes], set[bytes]]:
    """Committed and aborted transactions (two of them interleaved), plain records between:
    the values read_committed must return, and those it must not."""
    create_topic(broker, topic)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})

    def txn() -> Producer:
        p = Producer({"bootstrap.servers": broker.bootstrap_servers,
                      "transactional.id": f"arrow-{uuid.uuid4().hex[:8]}", "linger.ms": 0,
                      "compression.type": "lz4"})
        p.init_transactions(TIMEOUT)
        return p

    t1, t2 = txn(), txn()
    visible: set[bytes] = set()
    hidden: set[bytes] = set()

    def send(p: Producer, values: list[bytes], into: set[bytes]) -> None:
        for v in values:
            p.produce(topic, value=v, headers=[("v", v)])
        assert p.flush(TIMEOUT) == 0
        into.update(values)

    send(plain, [b"plain-0", b"plain-1"], visible)
    t1.begin_transaction()
    send(t1, [b"c1-%d" % i for i in range(5)], visible)
    t1.commit_transaction(TIMEOUT)
    t1.begin_transaction()
    send(t1, [b"a1-%d" % i for i in range(5)], hidden)
    t1.abort_transaction(TIMEOUT)
    t1.begin_transaction()
    t2.begin_transaction()
    for i in range(3):
        send(t1, [b"c2-%d" % i], visible)
        send(t2, [b"a2-%d" % i], hidden)
    t2.abort_transaction(TIMEOUT)
    send(plain, [b"plain-2"], visible)
    t1.commit_transaction(TIMEOUT)
    return visible, hidden


def test_transactions_read_committed_and_uncommitted(broker: samsa.Broker) -> None:
    topic = "fetched-txn"
    visible, hidden = transactional_topic(broker, topic)
    for read_committed, want in ((True, visible), (False, visible | hidden)):
        answers = fetch_all(broker, topic, read_committed)
        values = []
        for records, batches in answers:
            assert not any(h.is_control for _, h in batches)
            rows = bulk_rows(records, batches, topic, 0)
            assert rows == expected_rows(records, batches, topic, 0)
            values += [r["value"] for r in rows]
            assert all(r["headers"] == [{"key": "v", "value": r["value"]}] for r in rows)
        assert sorted(values) == sorted(want), f"read_committed={read_committed}"


AGREE = {"agree-txn": None, "agree-zstd": "zstd", "agree-none": "none"}


@pytest.fixture(scope="module")
def agree_topics(broker: samsa.Broker) -> list[str]:
    transactional_topic(broker, "agree-txn")
    for topic, codec in AGREE.items():
        if codec is not None:
            create_topic(broker, topic)
            produce(broker, topic, codec, 700)
    return list(AGREE)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_the_fetch_path_and_librdkafka_read_the_same_rows(
    broker: samsa.Broker, agree_topics: list[str], isolation: str
) -> None:
    """``read_range`` by Fetch and the librdkafka reader it falls back to, over ranges that
    start and end inside batches and transactions."""
    params = {"bootstrap.servers": broker.bootstrap_servers, "isolation.level": isolation}
    assert fetch_settings(params) is not None
    schema = arrow_schema(True)
    for topic in agree_topics:
        for start, end in ((0, 10_000), (3, 17), (5, 6), (12, 25)):
            rng = OffsetRange(topic, 0, start, end)
            fetched = list(read_range(rng, params, include_headers=True, fail_on_data_loss=True,
                                      poll_timeout_ms=5000, batch_rows=7))
            consumed = list(read_range_librdkafka(
                rng, params, include_headers=True, fail_on_data_loss=True, poll_timeout_ms=5000))
            assert (pa.Table.from_batches(fetched, schema=schema).to_pylist()
                    == pa.Table.from_batches(consumed, schema=schema).to_pylist()), rng
            assert all(b.num_rows <= 7 for b in fetched)


def test_settings_the_fetch_path_does_not_know_go_through_librdkafka(
    broker: samsa.Broker,
) -> None:
    topic = "fallback"
    create_topic(broker, topic)
    produce(broker, topic, "none", 50)
    known = {"bootstrap.servers": broker.bootstrap_servers, "group.id": "g", "client.id": "c"}
    assert fetch_settings(known) is not None
    for unknown in ({"security.protocol": "SSL"}, {"fetch.error.backoff.ms": "100"},
                    {"isolation.level": "bogus"}, {"fetch.max.bytes": "lots"}):
        assert fetch_settings({**known, **unknown}) is None, unknown
    params = {**known, "fetch.error.backoff.ms": "100"}
    rows = [r for b in read_range(OffsetRange(topic, 0, 0, 50), params, include_headers=False,
                                  fail_on_data_loss=True) for r in b.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(50))
