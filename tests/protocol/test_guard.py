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


@pytest.mark.parametrize(
    "frame",
    [
        # SyncGroup v0: group "g", generation 1, member "m", assignments: int32 -1
        struct.pack(">hhih", 14, 0, 7, 2) + b"fz" + struct.pack(">h", 1) + b"g"
        + struct.pack(">ih", 1, 1) + b"m" + struct.pack(">i", -1),
        # SyncGroup v5 (flexible): ..., protocol type and name null, assignments: compact 0
        struct.pack(">hhih", 14, 5, 7, 2) + b"fz" + b"\x00" + b"\x02g" + struct.pack(">i", 1)
        + b"\x02m" + b"\x00\x00\x00" + b"\x00" + b"\x00",
        # Produce v3: one topic whose partition_data is int32 -1
        struct.pack(">hhih", 0, 3, 7, 2) + b"fz" + struct.pack(">hhii", -1, 1, 1000, 1)
        + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1),
    ],
    ids=["syncgroup-v0", "syncgroup-v5", "produce-v3-nested"],
)
def test_null_for_a_non_nullable_array_is_refused(frame: bytes) -> None:
    """kio's reader returns None for it, which no handler expects; Kafka refuses it too."""
    with pytest.raises(MalformedRequestError, match="non-nullable array .* was sent as null"):
        decode_request(frame)


def test_null_for_a_nullable_array_is_kept() -> None:
    """Metadata's topics: null asks for every topic."""
    frame = struct.pack(">hhih", 3, 1, 7, 2) + b"fz" + struct.pack(">i", -1)
    assert decode_request(frame).body.topics is None
