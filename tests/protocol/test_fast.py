"""The hand-written Produce response encoder is byte-identical to kio's, at every version."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.errors import ErrorCode
from samsa.handlers import load_handlers
from samsa.handlers.registry import APIS
from samsa.protocol import build
from samsa.protocol.codec import encode_response
from samsa.protocol.fast import encode_fast

load_handlers()
PRODUCE = APIS[0]


def _partition(index: int, error: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"index": index, "error_code": error, "base_offset": 12345678901 * index,
            "log_append_time": -1 if index % 2 else 1_700_000_000_123,
            "log_start_offset": 7 * index, "record_errors": [], "error_message": message}


CASES = {
    "one": {"responses": [{"name": "t", "partition_responses": [
        _partition(0, ErrorCode.none, None)]}], "throttle_time": 0},
    "many": {"responses": [
        {"name": "orders", "partition_responses": [
            _partition(i, ErrorCode.none, None) for i in range(3)]},
        {"name": "ünïcode-topic", "partition_responses": [
            _partition(5, ErrorCode.message_too_large, "record batch of 2000 bytes exceeds"),
            _partition(6, ErrorCode.unknown_topic_or_partition, "")]},
    ], "throttle_time": 17},
    "empty": {"responses": [], "throttle_time": 0},
    "record errors": {"responses": [{"name": "compacted", "partition_responses": [
        {**_partition(0, ErrorCode.invalid_record, "One or more records have been rejected"),
         "record_errors": [{"batch_index": 1, "batch_index_error_message": "no key"},
                           {"batch_index": 4, "batch_index_error_message": None}]}]}],
        "throttle_time": 0},
}


@pytest.mark.parametrize("version", range(PRODUCE.min_version, PRODUCE.max_version + 1))
@pytest.mark.parametrize("case", sorted(CASES))
def test_produce_response_matches_kio(version: int, case: str) -> None:
    data = CASES[case]
    expected = b"".join(bytes(c) for c in encode_response(99, build.response(0, version, data)))
    assert encode_fast(0, version, 99, data) == expected
