"""The follower's hand-written Fetch v12 (samsa/protocol/replica_fetch.py) against kio: the
request byte for byte as kio encodes it, the response read as kio reads it."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from samsa.errors import ErrorCode
from samsa.protocol.build import response
from samsa.protocol.client import ClientCodec
from samsa.protocol.codec import encode_response
from samsa.protocol.replica_fetch import (
    FetchResponseError,
    FetchTopics,
    decode_fetch_response,
    encode_fetch_request,
)

TOPICS: list[FetchTopics] = [
    [],
    [("orders", [(0, 3, 12345, 2, 100, 1048576)])],
    [("orders", [(0, 3, 12345, 2, 100, 1048576), (7, -1, 0, -1, -1, 65536)]),
     ("ünïcode-" + "t" * 200, [(2, 0, 2**40, 0, 0, 2**31 - 1)])],
]


@pytest.mark.parametrize("topics", TOPICS)
@pytest.mark.parametrize("client_id", ["broker-2-fetcher-0", ""])
def test_the_request_is_kios(topics: FetchTopics, client_id: str) -> None:
    codec = ClientCodec(client_id)
    correlation = 41
    codec._correlation = iter([correlation])  # type: ignore[assignment]
    expected, _ = codec.encode(1, 12, FetchRequest(
        replica_id=2, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1,
        max_bytes=10485760, isolation_level=0, session_id=0, session_epoch=-1,
        topics=tuple(FetchTopic(topic=t, partitions=tuple(
            FetchPartition(partition=p, current_leader_epoch=e, fetch_offset=o,
                           last_fetched_epoch=le, log_start_offset=s, partition_max_bytes=m)
            for p, e, o, le, s, m in parts)) for t, parts in topics),
        forgotten_topics_data=(), rack_id=""))
    assert encode_fetch_request(correlation, client_id, 2, 500, 1, 10485760, topics) == expected


def _partition(index: int, **fields: Any) -> dict[str, Any]:
    return {"partition_index": index, "error_code": ErrorCode.none, "high_watermark": 10,
            "last_stable_offset": 9, "log_start_offset": 1, "aborted_transactions": None,
            "preferred_read_replica": -1, "records": b"", **fields}


RESPONSES: list[dict[str, Any]] = [
    {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": []},
    {"throttle_time": 7, "error_code": ErrorCode.fetch_session_id_not_found, "session_id": 0,
     "responses": []},
    {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": [
        {"topic": "orders", "partitions": [
            _partition(0, records=b"\x01" * 300),
            _partition(1, records=None, error_code=ErrorCode.offset_out_of_range,
                       high_watermark=-1),
            _partition(2, diverging_epoch={"epoch": 4, "end_offset": 77}),
            _partition(3, current_leader={"leader_id": 2, "leader_epoch": 9},
                       snapshot_id={"end_offset": 5, "epoch": 1},
                       aborted_transactions=[{"producer_id": 3, "first_offset": 4},
                                             {"producer_id": 5, "first_offset": 6}]),
            _partition(4, aborted_transactions=[], preferred_read_replica=3,
                       records=b"x" * 70000),
        ]},
        {"topic": "ünïcode", "partitions": [_partition(0, error_code=ErrorCode.
                                                       not_leader_or_follower)]},
    ]},
]


def _frame(data: dict[str, Any], correlation: int) -> bytes:
    return b"".join(bytes(c) for c in encode_response(correlation, response(1, 12, data)))[4:]


@pytest.mark.parametrize("data", RESPONSES)
def test_the_response_reads_as_kio_reads_it(data: dict[str, Any]) -> None:
    frame = _frame(data, 12)
    codec = ClientCodec("c")
    codec._correlation = iter([12])  # type: ignore[assignment]
    _, sent = codec.encode(1, 12, FetchRequest(max_wait=datetime.timedelta(0), min_bytes=1,
                                               topics=(), forgotten_topics_data=()))
    theirs = codec.decode(sent, frame)
    ours = decode_fetch_response(memoryview(frame), 12)
    assert ours.error_code == theirs.error_code
    assert ours.throttle_time_ms == theirs.throttle_time.total_seconds() * 1000
    assert ours.session_id == theirs.session_id
    assert [t.topic for t in ours.responses] == [t.topic for t in theirs.responses]
    for mine, kio in zip(ours.responses, theirs.responses, strict=True):
        assert len(mine.partitions) == len(kio.partitions)
        for p, q in zip(mine.partitions, kio.partitions, strict=True):
            assert isinstance(p.error_code, ErrorCode)
            assert (p.partition_index, p.error_code, p.high_watermark, p.last_stable_offset,
                    p.log_start_offset, p.preferred_read_replica) == (
                q.partition_index, q.error_code, q.high_watermark, q.last_stable_offset,
                q.log_start_offset, q.preferred_read_replica)
            assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (
                q.diverging_epoch.epoch, q.diverging_epoch.end_offset)
            assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (
                q.current_leader.leader_id, q.current_leader.leader_epoch)
            if q.aborted_transactions is None:
                assert p.aborted_transactions is None
            else:
                assert p.aborted_transactions is not None
                assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [
                    (a.producer_id, a.first_offset) for a in q.aborted_transactions]
            if q.records is None:
                assert p.records is None
            else:
                assert isinstance(p.records, memoryview) and p.records.readonly
                assert bytes(p.records) == q.records


def test_records_are_views_of_the_frame() -> None:
    frame = bytearray(_frame(RESPONSES[2], 3))
    view = memoryview(frame).toreadonly()
    records = decode_fetch_response(view, 3).responses[0].partitions[0].records
    assert records is not None and records.obj is frame


def test_another_correlation_id_is_refused() -> None:
    with pytest.raises(FetchResponseError, match="answered correlation id 3, expected 4"):
        decode_fetch_response(memoryview(_frame(RESPONSES[0], 3)), 4)


def test_a_cut_response_is_refused() -> None:
    frame = _frame(RESPONSES[2], 3)
    for cut in (0, 2, 5, 30, 200, len(frame) - 1):
        with pytest.raises(FetchResponseError):
            decode_fetch_response(memoryview(frame[:cut]), 3)
