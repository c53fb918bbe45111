"""The pre-decode guard: every advertised flexible request compiles, and frames that claim
more than they hold are refused before kio's native reader allocates anything."""

from __future__ import annotations

import datetime
import struct
import sys

import pytest
from kio.index import load_request_schema
from kio.serial import entity_writer

from samsa.handlers import load_handlers
from samsa.handlers.registry import APIS
from samsa.protocol.codec import MalformedRequestError, decode_request
from samsa.protocol.guard import walker_for
from samsa.records.record import RecordInput, encode_batch

load_handlers()

FLEXIBLE = [
    (api.key, version)
    for api in APIS.values()
    for version in range(api.min_version, api.max_version + 1)
    if load_request_schema(api.key, version).__flexible__
]


@pytest.mark.parametrize(("key", "version"), FLEXIBLE)
def test_every_advertised_flexible_request_has_a_walker(key: int, version: int) -> None:
    assert callable(walker_for(load_request_schema(key, version)))


def _produce_frame(version: int) -> bytes:
    schema = load_request_schema(0, version)
    module = sys.modules[schema.__module__]
    request = schema(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
        topic_data=(module.TopicProduceData(name="t", partition_data=(
            module.PartitionProduceData(index=0, records=encode_batch([RecordInput(b"v")])),
        )),),
    )
    header = schema.__header_schema__
    chunks: list[bytes] = []

    class Sink:
        write = chunks.append

    entity_writer(header)(Sink, header(request_api_key=0, request_api_version=version,
                                       correlation_id=1, client_id="c"))
    entity_writer(schema)(Sink, request)
    return b"".join(bytes(c) for c in chunks)


def test_valid_flexible_produce_decodes_and_every_truncation_is_refused() -> None:
    frame = _produce_frame(10)
    assert decode_request(frame).body.topic_data[0].name == "t"
    for cut in range(len(frame)):
        with pytest.raises(MalformedRequestError):
            decode_request(frame[:cut])


@pytest.mark.parametrize(
    "frame",
    [
        struct.pack(">hhih", 3, 12, 7, 2) + b"fz" + b"\x00" + b"\xff\xff\xff\xff\x0f",
        struct.pack(">hhih", 0, 9, 7, 2) + b"fz" + b"\x00\x00" + struct.pack(">hi", -1, 1000)
        + b"\xff\xff\xff\xff\x0f",
    ],
    ids=["metadata-v12", "produce-v9"],
)
def test_huge_compact_array_count_is_refused(frame: bytes) -> None:
    with pytest.raises(MalformedRequestError, match="array claims"):
        decode_request(frame)
