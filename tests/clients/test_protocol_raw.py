"""The wire protocol over a plain socket: framing, versions, ordering, and per-API error rules
(shared/kafka-protocol/INDEX.md sections 2 and 4)."""

from __future__ import annotations

import struct
import threading
import time

import pytest
from crc32c import crc32c
from kio.schema.errors import ErrorCode

import samsa
from samsa.records.batch import Compression

from .conftest import (
    API_VERSIONS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    ConnectionClosed,
    RawClient,
    decode_all,
    decode_response,
    encode_request,
    make_batch,
    whole_batches,
)

pytestmark = pytest.mark.timeout(60)


def api_ranges(response) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


# --- ApiVersions --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_every_version(raw, version):
    client = raw()
    corr = client.send(API_VERSIONS, version, {"client_software_name": "raw",
                                               "client_software_version": "1.0"}
                       if version >= 3 else {})
    frame = client.recv_frame()
    # Header v0 for every version, v3/v4 included: correlation id then straight to the body's
    # error code, no tagged-field byte in between.
    assert struct.unpack_from(">ih", frame, 0) == (corr, 0)
    got, response = decode_response(API_VERSIONS, version, frame)  # consumes the whole frame
    assert got == corr
    assert response.error_code == ErrorCode.none
    ranges = api_ranges(response)
    assert ranges[API_VERSIONS] == (0, 4)
    # Kafka 4 advertises Produce from v0 and serves v3 and later (KAFKA-18659)
    assert ranges[PRODUCE] == (0, 11)
    assert METADATA in ranges


def test_api_versions_bad_software_name_is_invalid_request(raw):
    response = raw().request(API_VERSIONS, 3, {"client_software_name": "-bad name-",
                                              "client_software_version": "1.0"})
    assert response.error_code == ErrorCode.invalid_request


def test_api_versions_unknown_version_answers_v0_and_keeps_the_connection(raw):
    client = raw()
    # An ApiVersions v9 request: the v3 bytes (flexible, header v2) with the version patched.
    frame = bytearray(encode_request(API_VERSIONS, 3, {"client_software_name": "raw",
                                                       "client_software_version": "1.0"}, 77))
    struct.pack_into(">h", frame, 6, 9)
    client.send_bytes(bytes(frame))
    corr, response = decode_response(API_VERSIONS, 0, client.recv_frame())
    assert corr == 77
    assert response.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
        (API_VERSIONS, 0, 4)
    ]
    # The connection stays open: the client retries at a version we have.
    assert client.api_versions(3).error_code == ErrorCode.none


def test_api_versions_unknown_version_with_garbage_body(raw):
    """The fallback must not parse the body (Kafka treats it as v0)."""
    client = raw()
    header = struct.pack(">hhi", API_VERSIONS, 42, 5) + struct.pack(">h", 1) + b"c"
    payload = header + b"\xff\xfe\x00\x01garbage"
    client.send_bytes(struct.pack(">i", len(payload)) + payload)
    corr, response = decode_response(API_VERSIONS, 0, client.recv_frame())
    assert (corr, response.error_code) == (5, ErrorCode.unsupported_version)
    assert client.api_versions(0).error_code == ErrorCode.none


# --- unsupported requests close the connection ------------------------------------------------


def test_unknown_api_key_closes_connection(raw):
    client, other = raw(), raw()
    header = struct.pack(">hhi", 999, 0, 1) + struct.pack(">h", 3) + b"raw"
    client.send_bytes(struct.pack(">i", len(header)) + header)
    assert client.is_closed_by_peer()
    assert other.api_versions().error_code == ErrorCode.none


def test_produce_v2_closes_connection(raw):
    """Advertised (KAFKA-18659) but not served: closed as Kafka 4 closes it, nothing written
    (tests/compat/test_old_librdkafka.py has every version and acks)."""
    client, other = raw(), raw()
    client.create_topic("t")
    # kio has no Produce v2: take the v3 bytes (header v1, client id "raw"), set version 2 and
    # drop v3's TransactionalId (a null string, int16 -1) to get the v2 layout.
    v3 = encode_request(PRODUCE, 3, client.produce_body("t", make_batch([b"x"])), 9)
    header_end = 4 + 2 + 2 + 4 + 2 + len("raw")
    assert v3[header_end : header_end + 2] == b"\xff\xff"
    payload = bytearray(v3[4:header_end] + v3[header_end + 2 :])
    struct.pack_into(">h", payload, 2, 2)
    client.send_bytes(struct.pack(">i", len(payload)) + payload)
    assert client.is_closed_by_peer()
    assert other.log_end_offset("t") == 0


def test_request_after_close_is_not_answered(raw):
    client = raw()
    header = struct.pack(">hhi", 999, 0, 1) + struct.pack(">h", 0)
    bad = struct.pack(">i", len(header)) + header
    # The bad frame and a good one in one write: nothing may come back for the good one.
    client.send_bytes(bad + encode_request(API_VERSIONS, 0, {}, 2))
    with pytest.raises((ConnectionClosed, ConnectionResetError)):
        client.recv_frame(timeout=5)


# --- ordering ----------------------------------------------------------------------------------


def test_pipelined_requests_answered_in_order(raw):
    client = raw()
    client.create_topic("pipe")
    frames, expected = [], []
    for i in range(10):
        corr = 1000 + 7 * i
        if i % 2:
            frames.append(encode_request(API_VERSIONS, 3, {"client_software_name": "raw",
                                                           "client_software_version": "1"},
                                         corr))
            expected.append((API_VERSIONS, 3, corr))
        else:
            frames.append(encode_request(METADATA, 8, {
                "topics": [{"name": "pipe"}], "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False}, corr))
            expected.append((METADATA, 8, corr))
    client.send_bytes(b"".join(frames))
    for key, version, corr in expected:
        got, response = decode_response(key, version, client.recv_frame())
        assert got == corr
        if key == METADATA:
            assert [t.name for t in response.topics] == ["pipe"]
        else:
            assert response.error_code == ErrorCode.none


def test_pipelined_requests_split_across_writes(raw):
    """TCP may cut frames anywhere: send the bytes of three requests one byte at a time."""
    client = raw()
    data = b"".join(encode_request(API_VERSIONS, 0, {}, c) for c in (11, 12, 13))
    for i in range(len(data)):
        client.send_bytes(data[i : i + 1])
    for corr in (11, 12, 13):
        got, response = decode_response(API_VERSIONS, 0, client.recv_frame())
        assert (got, response.error_code) == (corr, ErrorCode.none)


# --- Produce ---------------------------------------------------------------------------------


def test_produce_acks0_sends_no_response(raw):
    client = raw()
    client.create_topic("a0")
    client.send(PRODUCE, 8, client.produce_body("a0", make_batch([b"one", b"two"]), acks=0),
                correlation_id=500)
    corr = client.send(API_VERSIONS, 0, {}, correlation_id=501)
    got, response = decode_response(API_VERSIONS, 0, client.recv_frame())
    assert got == corr == 501
    assert response.error_code == ErrorCode.none
    assert client.log_end_offset("a0") == 2
    assert [r.value for r in decode_all(client.fetch("a0", 0).records)] == [b"one", b"two"]


def test_produce_acks0_failure_closes_connection(raw):
    client = raw()
    client.create_topic("a0f")
    client.send(PRODUCE, 8, client.produce_body("a0f", make_batch([b"x"]), partition=7, acks=0))
    assert client.is_closed_by_peer()


def test_produce_assigns_offsets_and_returns_base_offset(raw):
    client = raw()
    client.create_topic("p")
    first = client.produce("p", make_batch([b"a", b"b", b"c"]))
    second = client.produce("p", make_batch([b"d"]))
    assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.none, 3)
    records = decode_all(client.fetch("p", 0).records)
    assert [(r.offset, r.value) for r in records] == [
        (0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")
    ]


def test_produce_two_batches_in_one_partition_is_invalid_record(raw):
    client = raw()
    client.create_topic("two")
    client.produce("two", make_batch([b"before"]))
    result = client.produce("two", make_batch([b"a"]) + make_batch([b"b"]))
    assert result.error_code == ErrorCode.invalid_record
    assert client.log_end_offset("two") == 1


def test_produce_corrupt_crc_is_corrupt_message(raw):
    client = raw()
    client.create_topic("crc")
    client.produce("crc", make_batch([b"before"]))
    batch = bytearray(make_batch([b"hello world"]))
    batch[-3] ^= 0xFF  # a byte of the record value, covered by the CRC
    result = client.produce("crc", bytes(batch))
    assert result.error_code == ErrorCode.corrupt_message
    assert client.log_end_offset("crc") == 1
    assert [r.value for r in decode_all(client.fetch("crc", 0).records)] == [b"before"]


def recounted(batch: bytes, count: int) -> bytes:
    """``batch`` with a header claiming ``count`` records (recordsCount and lastOffsetDelta
    agree with each other, not with the records in its bytes) and a correct CRC-32C."""
    out = bytearray(batch)
    struct.pack_into(">i", out, 23, count - 1)  # lastOffsetDelta
    struct.pack_into(">i", out, 57, count)  # recordsCount
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[21:]))
    return bytes(out)


@pytest.mark.parametrize("codec", list(Compression), ids=lambda c: c.name.lower())
@pytest.mark.parametrize(("records", "claimed"), [(2, 3), (3, 1), (1, 2)],
                         ids=["fewer-than-claimed", "more-than-claimed", "one-of-two"])
def test_produce_batch_whose_count_disagrees_with_its_records_is_invalid_record(
        raw, codec, records, claimed):
    """Kafka's LogValidator iterates the records of every produced batch and refuses one whose
    declared count is not what its bytes hold ("Incorrect declared batch size": Kafka's
    InvalidRecordException, INVALID_RECORD since KIP-467): nothing is written, and consumers
    never meet a batch they cannot read."""
    client = raw()
    topic = f"count-{codec.name.lower()}"
    client.create_topic(topic)
    client.produce(topic, make_batch([b"before"]))
    values = [f"value-{i}".encode() for i in range(records)]
    batch = recounted(make_batch(values, compression_type=codec), claimed)
    result = client.produce(topic, batch)
    assert result.error_code == ErrorCode.invalid_record, result
    assert client.log_end_offset(topic) == 1
    assert [r.value for r in decode_all(client.fetch(topic, 0).records)] == [b"before"]
    # the same records with the count they really have are taken
    assert client.produce(topic, make_batch(values, compression_type=codec)).error_code == 0
    assert client.log_end_offset(topic) == 1 + records


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD],
                         ids=lambda c: c.name.lower())
def test_produce_decompression_bomb_is_corrupt_message(raw, codec):
    """A small compressed batch whose records decompress past samsa's bound (64 MiB and 64
    times its compressed size; Kafka streams a batch and has none) is refused without the
    broker holding it whole; the broker goes on."""
    client = raw()
    topic = f"bomb-{codec.name.lower()}"
    client.create_topic(topic)
    bomb = make_batch([bytes(70 * 1024 * 1024)], compression_type=codec)
    assert len(bomb) < 1024 * 1024  # under max.message.bytes: only its inside is too big
    result = client.produce(topic, bomb)
    assert result.error_code == ErrorCode.corrupt_message, result
    assert client.log_end_offset(topic) == 0
    assert client.produce(topic, make_batch([b"after"], compression_type=codec)).error_code == 0


def test_produce_record_running_past_its_batch_is_invalid_record(raw):
    """A record whose length varint reaches past the end of the batch (or is negative)."""
    client = raw()
    client.create_topic("overrun")
    batch = bytearray(make_batch([b"abc"]))
    for length in (0x7E, 0x01):  # zig-zag 63 (past the end), zig-zag -1
        batch[61] = length
        struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
        result = client.produce("overrun", bytes(batch))
        assert result.error_code == ErrorCode.invalid_record, (length, result)
    assert client.log_end_offset("overrun") == 0


def test_produce_acks_2_is_invalid_required_acks(raw):
    client = raw()
    client.create_topic("acks")
    result = client.produce("acks", make_batch([b"x"]), acks=2)
    assert result.error_code == ErrorCode.invalid_required_acks
    assert client.log_end_offset("acks") == 0


def test_produce_unknown_partition(raw):
    client = raw()
    client.create_topic("up")
    result = client.produce("up", make_batch([b"x"]), partition=3)
    assert result.error_code == ErrorCode.unknown_topic_or_partition


def test_produce_null_records_is_rejected(raw):
    client = raw()
    client.create_topic("nul")
    result = client.produce("nul", None)
    assert result.error_code != ErrorCode.none
    assert client.log_end_offset("nul") == 0


# --- Fetch ----------------------------------------------------------------------------------


def test_fetch_long_poll_wakes_on_produce(raw):
    waiter, producer = raw(), raw()
    waiter.create_topic("lp")
    producer.produce("lp", make_batch([b"first"]))
    result: dict = {}

    def long_poll() -> None:
        try:
            result["data"] = waiter.fetch("lp", 1, max_wait_ms=5000, min_bytes=1, timeout=15)
        finally:
            result["returned"] = time.monotonic()

    thread = threading.Thread(target=long_poll, daemon=True)
    started = time.monotonic()
    thread.start()
    time.sleep(0.5)
    assert "returned" not in result, "the fetch at the log end should wait for data"
    produced = time.monotonic()
    assert producer.produce("lp", make_batch([b"second"])).error_code == ErrorCode.none
    thread.join(10)
    assert not thread.is_alive()
    assert result["returned"] - produced < 2.0
    assert result["returned"] - started < 4.0
    assert [(r.offset, r.value) for r in decode_all(result["data"].records)] == [(1, b"second")]


def test_fetch_long_poll_times_out_empty(raw):
    client = raw()
    client.create_topic("lpe")
    started = time.monotonic()
    data = client.fetch("lpe", 0, max_wait_ms=300, min_bytes=1)
    elapsed = time.monotonic() - started
    assert 0.25 <= elapsed < 3.0
    assert data.error_code == ErrorCode.none
    assert not data.records
    assert data.high_watermark == 0


def test_fetch_smaller_max_bytes_still_returns_first_whole_batch(raw):
    client = raw()
    client.create_topic("k74")
    big = make_batch([b"x" * 5000, b"y" * 5000])
    client.produce("k74", big)
    client.produce("k74", make_batch([b"z"]))
    data = client.fetch("k74", 0, max_bytes=100, partition_max_bytes=100)
    assert data.error_code == ErrorCode.none
    batches = whole_batches(data.records)
    assert len(batches) >= 1
    assert len(batches[0]) == len(big)
    assert [r.value for r in decode_all(batches[0])] == [b"x" * 5000, b"y" * 5000]


def test_fetch_offset_out_of_range(raw):
    client = raw()
    client.create_topic("oor")
    client.produce("oor", make_batch([b"a"]))
    data = client.fetch("oor", 10)
    assert data.error_code == ErrorCode.offset_out_of_range
    # as Kafka: a read that failed tells no offsets (the client asks ListOffsets)
    assert (data.high_watermark, data.last_stable_offset, data.log_start_offset) == (-1, -1, -1)


def test_fetch_at_log_end_is_empty_not_an_error(raw):
    client = raw()
    client.create_topic("end")
    client.produce("end", make_batch([b"a"]))
    data = client.fetch("end", 1)
    assert (data.error_code, data.high_watermark) == (ErrorCode.none, 1)
    assert not data.records


def test_fetch_unknown_topic(raw):
    data = raw().fetch("never-created", 0)
    assert data.error_code == ErrorCode.unknown_topic_or_partition


def test_fetch_read_committed(raw):
    client = raw()
    client.create_topic("rc")
    client.produce("rc", make_batch([b"a"]))
    body = client.fetch_body("rc", 0)
    body["isolation_level"] = 1
    response = client.request(1, 11, body)
    data = response.responses[0].partitions[0]
    assert data.error_code == ErrorCode.none
    assert data.last_stable_offset == 1
    assert [r.value for r in decode_all(data.records)] == [b"a"]


def test_leader_epoch_checks(raw):
    client = raw()
    client.create_topic("ep")
    client.produce("ep", make_batch([b"a"]))
    assert client.fetch("ep", 0, current_leader_epoch=0).error_code == ErrorCode.none
    assert client.fetch("ep", 0, current_leader_epoch=5).error_code == (
        ErrorCode.unknown_leader_epoch
    )
    assert client.list_offsets("ep", current_leader_epoch=0).error_code == ErrorCode.none
    assert client.list_offsets("ep", current_leader_epoch=5).error_code == (
        ErrorCode.unknown_leader_epoch
    )


# --- ListOffsets / OffsetForLeaderEpoch ----------------------------------------------------------


def test_list_offsets_special_timestamps(raw):
    client = raw()
    client.create_topic("lo")
    t = 1_700_000_000_000
    client.produce("lo", make_batch([b"a", b"b"], timestamps=[t, t + 50]))
    client.produce("lo", make_batch([b"c"], timestamps=[t + 20]))
    assert client.list_offsets("lo", -1).offset == 3
    assert client.list_offsets("lo", -2).offset == 0
    latest_ts = client.list_offsets("lo", -3, version=7)
    assert (latest_ts.offset, latest_ts.timestamp) == (1, t + 50)
    by_time = client.list_offsets("lo", t + 10)
    assert (by_time.offset, by_time.timestamp) == (1, t + 50)
    assert client.list_offsets("lo", t + 51).offset == -1


def test_offset_for_leader_epoch_end_offset(raw):
    client = raw()
    client.create_topic("ofle")
    client.produce("ofle", make_batch([b"a", b"b", b"c"]))
    body = {"replica_id": -1, "topics": [{"topic": "ofle", "partitions": [
        {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}
    response = client.request(OFFSET_FOR_LEADER_EPOCH, 3, body)
    result = response.topics[0].partitions[0]
    assert result.error_code == ErrorCode.none
    assert (result.leader_epoch, result.end_offset) == (0, client.log_end_offset("ofle")) == (0, 3)


# --- Metadata ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 4, 8, 12])
def test_metadata_null_lists_all_and_empty_lists_none(raw, version):
    client = raw()
    client.create_topic("m1")
    client.create_topic("m2")
    everything = client.metadata(None, version=version)
    assert {t.name for t in everything.topics} == {"m1", "m2"}
    assert [b.node_id for b in everything.brokers] == [everything.controller_id]
    nothing = client.metadata([], version=version)
    assert list(nothing.topics) == []
    assert len(nothing.brokers) == 1


def test_metadata_v0_empty_lists_all(raw):
    client = raw()
    client.create_topic("m0")
    response = client.request(METADATA, 0, {"topics": []})
    assert [t.name for t in response.topics] == ["m0"]


def test_metadata_invalid_topic_name(raw):
    client = raw()
    response = client.metadata(["bad name!"])
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("bad name!", ErrorCode.invalid_topic_exception)
    ]
    assert [t.name for t in client.metadata(None).topics] == []


def test_metadata_without_auto_create(raw):
    client = raw()
    response = client.metadata(["nope"], auto_create=False)
    assert response.topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert client.metadata(None).topics == ()


def test_metadata_advertises_the_bound_address(broker, raw):
    response = raw().metadata(["adv"])
    (b,) = response.brokers
    assert f"{b.host}:{b.port}" == broker.bootstrap_servers
    (p,) = response.topics[0].partitions
    assert (p.leader_id, list(p.replica_nodes), list(p.isr_nodes), p.leader_epoch) == (
        b.node_id, [b.node_id], [b.node_id], 0
    )


# --- idempotence ----------------------------------------------------------------------------


def test_idempotent_duplicate_gets_the_original_offsets(raw):
    client = raw()
    client.create_topic("idem")
    client.produce("idem", make_batch([b"other"]))  # the idempotent batch starts at offset 1
    pid, epoch = client.init_producer_id()
    assert epoch == 0
    batch = make_batch([b"a", b"b"], producer_id=pid, producer_epoch=0, base_sequence=0)
    first = client.produce("idem", batch)
    second = client.produce("idem", batch)
    assert (first.error_code, first.base_offset) == (ErrorCode.none, 1)
    assert second.error_code == ErrorCode.none
    assert second.base_offset == first.base_offset, (
        "a retried duplicate must be answered with the original batch's base offset "
        "(needs the producer-state integration in Log.append)"
    )
    assert client.log_end_offset("idem") == 3


def test_idempotent_sequence_gap_is_out_of_order(raw):
    client = raw()
    client.create_topic("gap")
    pid, _ = client.init_producer_id()
    ok = client.produce("gap", make_batch([b"a"], producer_id=pid, producer_epoch=0,
                                          base_sequence=0))
    assert ok.error_code == ErrorCode.none
    gap = client.produce("gap", make_batch([b"b"], producer_id=pid, producer_epoch=0,
                                           base_sequence=5))
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    assert client.log_end_offset("gap") == 1


def test_init_producer_id_gives_distinct_ids(raw):
    client = raw()
    ids = {client.init_producer_id()[0] for _ in range(5)}
    assert len(ids) == 5


def test_frame_larger_than_socket_request_max_bytes_closes(broker_factory):
    b = broker_factory(socket_request_max_bytes=10_000)
    with RawClient(("127.0.0.1", b.port)) as client, RawClient(("127.0.0.1", b.port)) as other:
        client.send_bytes(struct.pack(">i", 10_001) + b"\x00" * 100)
        assert client.is_closed_by_peer()
        assert other.api_versions().error_code == ErrorCode.none


def test_idempotent_retry_of_an_older_batch(raw):
    """Any of the last 5 batches of a producer is recognised as a duplicate."""
    client = raw()
    client.create_topic("idem5")
    pid, _ = client.init_producer_id()
    batches = [
        make_batch([b"%d-%d" % (i, j) for j in range(2)], producer_id=pid, producer_epoch=0,
                   base_sequence=2 * i)
        for i in range(4)
    ]
    offsets = [client.produce("idem5", b).base_offset for b in batches]
    assert offsets == [0, 2, 4, 6]
    again = client.produce("idem5", batches[1])
    assert (again.error_code, again.base_offset) == (ErrorCode.none, 2)
    assert client.log_end_offset("idem5") == 8
    # The producer goes on at the next sequence as if nothing happened.
    nxt = client.produce("idem5", make_batch([b"next"], producer_id=pid, producer_epoch=0,
                                             base_sequence=8))
    assert (nxt.error_code, nxt.base_offset) == (ErrorCode.none, 8)


def test_idempotent_stale_epoch_is_rejected(raw):
    client = raw()
    client.create_topic("epoch")
    pid, _ = client.init_producer_id()
    first = client.produce("epoch", make_batch([b"a"], producer_id=pid, producer_epoch=0,
                                               base_sequence=0))
    bumped = client.produce("epoch", make_batch([b"b"], producer_id=pid, producer_epoch=1,
                                                base_sequence=0))
    assert (first.error_code, bumped.error_code) == (ErrorCode.none, ErrorCode.none)
    stale = client.produce("epoch", make_batch([b"c"], producer_id=pid, producer_epoch=0,
                                               base_sequence=1))
    assert stale.error_code in (ErrorCode.invalid_producer_epoch, ErrorCode.producer_fenced)
    assert client.log_end_offset("epoch") == 2


def test_idempotent_duplicate_detected_after_restart(tmp_path):
    """Producer state survives a clean restart: a retry sent to the new broker process is still
    recognised."""
    batch = None
    with samsa.Broker(tmp_path) as b, RawClient(("127.0.0.1", b.port)) as client:
        client.create_topic("idem-restart")
        pid, _ = client.init_producer_id()
        batch = make_batch([b"x", b"y"], producer_id=pid, producer_epoch=0, base_sequence=0)
        assert client.produce("idem-restart", batch).base_offset == 0
    with samsa.Broker(tmp_path) as b, RawClient(("127.0.0.1", b.port)) as client:
        again = client.produce("idem-restart", batch)
        assert (again.error_code, again.base_offset) == (ErrorCode.none, 0)
        assert client.log_end_offset("idem-restart") == 2
        # And a new InitProducerId never hands out the same id again.
        assert client.init_producer_id()[0] != pid
