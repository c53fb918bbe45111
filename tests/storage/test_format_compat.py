"""Wire and disk format compatibility with a real Kafka client library (kafka-python).

Batches built by kafka-python's own RecordBatch v2 encoder go into a samsa Log and come back
out through ``Log.read``; kafka-python's decoder must then see the offsets the log assigned and
everything else exactly as the client wrote it, with a valid CRC-32C. The other direction:
``samsa.records.record.encode_batch`` output must decode with kafka-python.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecordsBuilder

from samsa.config import LogConfig
from samsa.records.batch import Compression
from samsa.records.record import RecordInput, decode_records, encode_batch
from samsa.storage import Log

T0 = 1_700_000_000_000
BROKER_TIME = T0 + 987_654
EPOCH = 5

CODECS = [
    pytest.param(Compression.NONE, id="none"),
    pytest.param(Compression.GZIP, id="gzip"),
    pytest.param(Compression.SNAPPY, id="snappy"),
    pytest.param(Compression.LZ4, id="lz4"),
    pytest.param(Compression.ZSTD, id="zstd"),
]


@dataclass(frozen=True)
class Rec:
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# Keys, null keys, null values, empty values, headers (with a null header value and a non-ASCII
# key), a timestamp that goes backwards inside the batch, and values big enough to compress.
RECORDS = [
    Rec(T0, b"key-0", b"value-0 " * 40, (("trace", b"abc"), ("n", b"1"))),
    Rec(T0 + 5, None, b"no key " * 30),
    Rec(T0 + 3, b"tombstone", None),
    Rec(T0 + 20, b"", b"", (("empty", b""), ("null", None))),
    Rec(T0 + 21, b"k\x00\xff", bytes(range(256)) * 2, (("h\u00e9", b"\x00\x01"),)),
    Rec(T0 + 1000, b"last", b"z" * 500),
]


def kafka_batch(
    codec: int,
    records: list[Rec] = RECORDS,
    *,
    producer: tuple[int, int, int] | None = None,
    transactional: bool = False,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    if producer is not None:
        builder.set_producer_state(*producer, transactional)
    for delta, r in enumerate(records):
        assert builder.append(delta, r.timestamp, r.key, r.value, list(r.headers)) is not None
    data = bytes(builder.build())
    # The builder falls back to no compression when it does not pay off: make sure it did not.
    assert DefaultRecordBatch(data).compression_type == int(codec)
    return data


def decode(data: bytes) -> list[DefaultRecordBatch]:
    """Every batch in ``data`` through kafka-python's fetch-path decoder."""
    records = MemoryRecords(data)
    batches = []
    while records.has_next():
        batch = records.next_batch()
        assert isinstance(batch, DefaultRecordBatch)
        batches.append(batch)
    assert records.valid_bytes() == len(data)
    return batches


def check_batch(
    batch: DefaultRecordBatch,
    records: list[Rec],
    *,
    base_offset: int,
    codec: int,
    leader_epoch: int,
    log_append_time: int | None = None,
) -> None:
    assert batch.validate_crc()  # must be called before iterating
    assert batch.magic == 2
    assert batch.base_offset == base_offset
    assert batch.leader_epoch == leader_epoch
    assert batch.compression_type == int(codec)
    assert batch.records_count == len(records)
    assert batch.last_offset_delta == len(records) - 1
    assert batch.first_timestamp == records[0].timestamp
    if log_append_time is None:
        assert batch.timestamp_type == 0
        assert batch.max_timestamp == max(r.timestamp for r in records)
    else:
        assert batch.timestamp_type == 1
        assert batch.max_timestamp == log_append_time
    decoded = list(batch)
    assert len(decoded) == len(records)
    for i, (got, want) in enumerate(zip(decoded, records, strict=True)):
        assert got.offset == base_offset + i
        assert got.key == want.key
        assert got.value == want.value
        assert [(k, v) for k, v in got.headers] == list(want.headers)
        if log_append_time is None:
            assert got.timestamp == want.timestamp
            assert got.timestamp_type == 0
        else:
            assert got.timestamp == log_append_time
            assert got.timestamp_type == 1


def new_log(path: Path, config: LogConfig | None = None) -> Log:
    return Log(path, config or LogConfig(), clock=lambda: BROKER_TIME)


def prefill(log: Log, count: int = 7) -> int:
    """Some records first, so the batch under test gets a non-zero base offset."""
    info = log.append(
        encode_batch([RecordInput(f"pre-{i}".encode(), timestamp=T0) for i in range(count)]),
        leader_epoch=EPOCH,
    )
    return info.last_offset + 1


# --- kafka-python -> samsa -> kafka-python -------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batch_round_trips_through_the_log(tmp_path: Path, codec: int) -> None:
    log = new_log(tmp_path)
    base = prefill(log)
    sent = kafka_batch(codec)
    info = log.append(sent, leader_epoch=EPOCH)
    assert (info.first_offset, info.last_offset) == (base, base + len(RECORDS) - 1)
    assert info.log_append_time == -1

    region = log.read(base, 1 << 20)
    assert region is not None
    data = region.read()
    assert len(data) == len(sent)
    # Only the 16-byte prefix outside the CRC (baseOffset, batchLength, leader epoch) changed.
    assert data[16:] == sent[16:]
    [batch] = decode(data)
    check_batch(batch, RECORDS, base_offset=base, codec=codec, leader_epoch=EPOCH)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert not batch.is_transactional and not batch.is_control_batch

    # samsa's own decoder agrees with kafka-python's on the same bytes.
    ours = list(decode_records(data))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in ours] == [
        (base + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_idempotent_batch_keeps_producer_state(tmp_path: Path, codec: int) -> None:
    log = new_log(tmp_path)
    base = prefill(log)
    # records before it deleted: a producer unknown here may go on at any sequence (as after
    # retention), the only way a first batch far from sequence 0 is taken
    log.delete_records_before(base)
    sent = kafka_batch(codec, producer=(123_456_789, 17, 2_000_000_000))
    log.append(sent, leader_epoch=EPOCH)
    [batch] = decode(log.read_batches(base))
    check_batch(batch, RECORDS, base_offset=base, codec=codec, leader_epoch=EPOCH)
    assert batch.producer_id == 123_456_789
    assert batch.producer_epoch == 17
    assert batch.base_sequence == 2_000_000_000
    assert batch.last_sequence == 2_000_000_000 + len(RECORDS) - 1
    assert not batch.is_transactional


def test_transactional_batch_keeps_its_flag(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    base = prefill(log)
    log.append(kafka_batch(Compression.LZ4, producer=(42, 3, 0), transactional=True))
    [batch] = decode(log.read_batches(base))
    check_batch(batch, RECORDS, base_offset=base, codec=Compression.LZ4, leader_epoch=0)
    assert batch.is_transactional and not batch.is_control_batch
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 0)


def test_several_kafka_python_batches_in_one_append(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    base = prefill(log, 3)
    parts = [
        (codec, RECORDS[: 2 + i])
        for i, codec in enumerate(
            [Compression.ZSTD, Compression.NONE, Compression.GZIP, Compression.SNAPPY]
        )
    ]
    sent = b"".join(kafka_batch(codec, recs) for codec, recs in parts)
    info = log.append(sent, leader_epoch=EPOCH)
    total = sum(len(recs) for _, recs in parts)
    assert (info.first_offset, info.last_offset) == (base, base + total - 1)
    batches = decode(log.read_batches(base))
    assert len(batches) == len(parts)
    offset = base
    for batch, (codec, recs) in zip(batches, parts, strict=True):
        check_batch(batch, recs, base_offset=offset, codec=codec, leader_epoch=EPOCH)
        offset += len(recs)
    # Every offset of the append is readable on its own, from the batch holding it.
    for o in range(base, offset):
        [first, *_] = decode(log.read_batches(o, 1))
        assert first.base_offset <= o <= first.base_offset + first.last_offset_delta


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_producer_buffer(tmp_path: Path, codec: int) -> None:
    """The exact path kafka-python's producer takes: MemoryRecordsBuilder -> buffer."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=int(codec), batch_size=1 << 20)
    for r in RECORDS:
        assert builder.append(r.timestamp, r.key, r.value, list(r.headers)) is not None
    builder.close()
    sent = bytes(builder.buffer())
    log = new_log(tmp_path)
    base = prefill(log)
    log.append(sent, leader_epoch=EPOCH)
    [batch] = decode(log.read_batches(base))
    check_batch(batch, RECORDS, base_offset=base, codec=codec, leader_epoch=EPOCH)


# --- LogAppendTime -------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_topic(tmp_path: Path, codec: int) -> None:
    log = new_log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    base = prefill(log)
    info = log.append(kafka_batch(codec), leader_epoch=EPOCH)
    assert info.log_append_time == BROKER_TIME
    [batch] = decode(log.read_batches(base))
    check_batch(
        batch,
        RECORDS,
        base_offset=base,
        codec=codec,
        leader_epoch=EPOCH,
        log_append_time=BROKER_TIME,
    )
    assert all(r.timestamp == BROKER_TIME for r in decode_records(log.read_batches(base)))
    # The prefilled batch went through the same path.
    [pre] = decode(log.read_batches(0, 1))
    assert pre.validate_crc()
    assert pre.timestamp_type == 1 and pre.max_timestamp == BROKER_TIME


def test_log_append_time_survives_reopen(tmp_path: Path) -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime")
    log = new_log(tmp_path, config)
    log.append(kafka_batch(Compression.GZIP), leader_epoch=EPOCH)
    log.close()
    log = Log(tmp_path, config, recovery_point=0, clock=lambda: BROKER_TIME + 1)
    try:
        [batch] = decode(log.read_batches(0))
        check_batch(
            batch,
            RECORDS,
            base_offset=0,
            codec=Compression.GZIP,
            leader_epoch=EPOCH,
            log_append_time=BROKER_TIME,
        )
        found = log.offset_for_timestamp(BROKER_TIME)
        assert found is not None and (found.offset, found.timestamp) == (0, BROKER_TIME)
    finally:
        log.close()


# --- samsa -> kafka-python -----------------------------------------------------------------------


def as_inputs(records: list[Rec]) -> list[RecordInput]:
    return [RecordInput(r.value, r.key, r.timestamp, list(r.headers)) for r in records]


@pytest.mark.parametrize("codec", CODECS)
def test_samsa_encode_batch_decodes_with_kafka_python(codec: Compression) -> None:
    data = encode_batch(
        as_inputs(RECORDS), base_offset=1234, compression_type=codec, leader_epoch=9
    )
    [batch] = decode(data)
    check_batch(batch, RECORDS, base_offset=1234, codec=codec, leader_epoch=9)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert not batch.is_transactional and not batch.is_control_batch


@pytest.mark.parametrize("codec", CODECS)
def test_samsa_encode_batch_producer_fields_decode_with_kafka_python(
    codec: Compression,
) -> None:
    data = encode_batch(
        as_inputs(RECORDS),
        compression_type=codec,
        producer_id=77,
        producer_epoch=2,
        base_sequence=10,
        transactional=True,
    )
    [batch] = decode(data)
    check_batch(batch, RECORDS, base_offset=0, codec=codec, leader_epoch=-1)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 2, 10)
    assert batch.is_transactional


def test_samsa_encode_batch_large_payload_decodes_with_kafka_python() -> None:
    """Bigger than one 32 KiB xerial snappy block and one lz4 frame block."""
    big = [
        Rec(T0 + i, f"k{i}".encode(), bytes([i % 251]) * 3000 + str(i).encode())
        for i in range(60)
    ]
    for codec in Compression:
        [batch] = decode(encode_batch(as_inputs(big), compression_type=codec))
        check_batch(batch, big, base_offset=0, codec=codec, leader_epoch=-1)


@pytest.mark.parametrize("codec", CODECS)
def test_samsa_batches_through_the_log_decode_with_kafka_python(
    tmp_path: Path, codec: Compression
) -> None:
    log = new_log(tmp_path)
    base = prefill(log)
    log.append(encode_batch(as_inputs(RECORDS), compression_type=codec), leader_epoch=EPOCH)
    [batch] = decode(log.read_batches(base))
    check_batch(batch, RECORDS, base_offset=base, codec=codec, leader_epoch=EPOCH)
