"""Fuzz target: request frames through the broker's real request path.

The input is one frame, the bytes after the int32 size prefix, as ``Connection`` hands it to
``KafkaServer.dispatch``: ``codec.decode_request`` (with ``guard.check_body`` before kio's
native reader), the handler registry, the handler itself against a real in-process broker (a
temporary log directory, topic ``t`` with two partitions), and the response's encoding.

What dispatch may do with any frame: answer it, answer nothing (acks=0), or raise
``CloseConnection`` (an undecodable frame, an unsupported version: Kafka closes the
connection). Anything else escaping it is a crash; so is an answer that kio cannot decode as
the response of that API and version (a malformed response), and an exception the event loop
reports from a callback while the request ran.

Requests that wait (a long-poll Fetch, a JoinGroup in a rebalance) are given a few
milliseconds and then cancelled, as a client disconnecting cancels them. CreateTopics and
CreatePartitions asking for more than a few partitions are decoded but not executed: a
fuzzer that creates a million partitions measures the disk, not the code.

    python fuzz/fuzz_requests.py tests/fuzz_corpus/requests -runs=200000
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import datetime
import logging
import random
import shutil
import struct
import tempfile
import traceback
import types
import typing
import uuid
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader
from kio.serial.errors import OutOfBoundValue

from samsa.errors import CloseConnection
from samsa.handlers.registry import APIS
from samsa.protocol.codec import MalformedRequestError, decode_request, encode_message
from samsa.records.batch import Compression
from samsa.records.record import RecordInput, encode_batch
from samsa.server.kafka_server import API_VERSIONS_KEY, KafkaServer
from samsa.storage.log import FileRegion

TOPIC = "t"
PARTITIONS = 2
WAIT_S = 0.02  # what a request may wait before it is cancelled
MAX_NEW_PARTITIONS = 8
MAX_TOPICS = 64
_CREATE_TOPICS, _CREATE_PARTITIONS = 19, 37
_SIZE = struct.Struct(">i")


class _Broker:
    """One broker for the whole run, on its own event loop, started on first use."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="samsa-fuzz-")
        atexit.register(shutil.rmtree, self.dir, True)
        self.loop = asyncio.new_event_loop()
        self.loop_errors: list[dict[str, Any]] = []
        self.loop.set_exception_handler(lambda _loop, context: self.loop_errors.append(context))
        self.server = KafkaServer({
            "log.dirs": self.dir,
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": False,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.num.partitions": 1,
            "log.cleaner.enable": False,
        })
        self.loop.run_until_complete(self.server.start())

    def ensure_topic(self) -> None:
        topics = self.server.topics
        if topics is not None and topics.get(TOPIC) is None:
            self.server.topic_admin.create_topic(TOPIC, PARTITIONS)

    def admissible(self, frame: bytes) -> bool:
        """Whether to execute the request: no requests for many new partitions."""
        try:
            request = decode_request(frame)
        except MalformedRequestError:
            return True  # dispatch decodes it again and must refuse it the same way
        body = request.body
        if request.api_key == _CREATE_TOPICS and body is not None:
            topics = self.server.topics
            if topics is not None and len(topics.topics) >= MAX_TOPICS:
                return False
            # (kio reads a null array as None even where the schema says it cannot be null)
            return sum(max(t.num_partitions, 1) + len(t.assignments or ())
                       for t in body.topics or ()) <= MAX_NEW_PARTITIONS
        if request.api_key == _CREATE_PARTITIONS and body is not None:
            return sum(max(t.count, 0) for t in body.topics or ()) <= MAX_NEW_PARTITIONS * 4
        return True

    def dispatch(self, frame: bytes) -> list[Any] | None:
        """Run dispatch; its answer, None, or raise what escaped it."""
        task = self.loop.create_task(self.server.dispatch(frame, _PEER))
        self.loop.run_until_complete(asyncio.wait([task], timeout=WAIT_S))
        if not task.done():
            task.cancel()
            self.loop.run_until_complete(asyncio.wait([task]))
            if task.cancelled():
                return None
        return task.result()


class _Peer:
    peer = "127.0.0.1:9"


_PEER: Any = _Peer()
_broker: _Broker | None = None
_saved_level: int | None = None  # the "samsa" logger's level before the broker quieted it


def broker() -> _Broker:
    global _broker, _saved_level
    if _broker is None:
        samsa_log = logging.getLogger("samsa")
        _saved_level = samsa_log.level
        samsa_log.setLevel(logging.CRITICAL)  # refusals are routine here
        _broker = _Broker()
    return _broker


def close() -> None:
    """Stop the broker (the tests call this; a fuzzing process just exits)."""
    global _broker, _saved_level
    if _broker is not None:
        _broker.loop.run_until_complete(_broker.server.stop())
        _broker.loop.close()
        shutil.rmtree(_broker.dir, ignore_errors=True)
        _broker = None
    if _saved_level is not None:  # the tests that run next in this process log as before
        logging.getLogger("samsa").setLevel(_saved_level)
        _saved_level = None


def _check_response(frame: bytes, chunks: list[Any]) -> None:
    """The answer is one size-prefixed frame that kio decodes as this API's response."""
    data = b"".join(c.read() if isinstance(c, FileRegion) else bytes(c) for c in chunks)
    (size,) = _SIZE.unpack_from(data, 0)
    if size != len(data) - 4:
        raise AssertionError(f"response frame says {size} bytes and has {len(data) - 4}")
    key, version = struct.unpack_from(">hh", frame, 0)
    if key == API_VERSIONS_KEY and not APIS[key].supports(version):
        version = 0  # an unknown ApiVersions version is answered as v0 (KIP-511)
    schema = load_response_schema(key, version)
    header, header_size = entity_reader(schema.__header_schema__)(data, 4)
    correlation_id = _SIZE.unpack_from(frame, 4)[0]
    if header.correlation_id != correlation_id:
        raise AssertionError(f"correlation id {header.correlation_id} != {correlation_id}")
    try:
        _, body_size = entity_reader(schema)(data, 4 + header_size)  # readers return sizes
    except OutOfBoundValue as exc:
        if "negative timestamp" in str(exc):
            return  # Kafka's -1 for "no time", which build.py writes and kio cannot read
        raise
    end = 4 + header_size + body_size
    if end != len(data):
        raise AssertionError(f"{len(data) - end} bytes after the response body")


def check(data: bytes) -> None:
    b = broker()
    frame = bytes(data)
    b.ensure_topic()
    if not b.admissible(frame):
        return
    try:
        chunks = b.dispatch(frame)
    except CloseConnection:
        chunks = None
    if b.loop_errors:
        context = b.loop_errors[0]
        b.loop_errors.clear()
        exc = context.get("exception")
        detail = "".join(traceback.format_exception(exc)) if exc is not None else ""
        raise AssertionError(f"the event loop reported: {context.get('message')}\n{detail}")
    if chunks is not None:
        _check_response(frame, chunks)


# -- a structure-aware mutator (fuzzing only) ------------------------------------------------
#
# Byte mutations of a frame mostly break its encoding, and the decoder refuses it: good for
# the decoder, thin for the handlers. Half of the mutations here decode the frame instead,
# change one field somewhere in the request (an edge value of its type, a topic or group name
# the broker knows, a real record batch, an element of an array duplicated or dropped) and
# encode it again, so the handlers see well-formed requests with odd contents.

_INTS = {
    "int8": (8, True), "int16": (16, True), "int32": (32, True), "int64": (64, True),
    "uint16": (16, False), "uint32": (32, False),
}
_NAMES = ("", TOPIC, "u", "g", "tx", "m", "__consumer_offsets", "__transaction_state",
          "missing", "a" * 250, "x/y", "..", "\u00e9")


def _batches(rng: random.Random) -> bytes:
    codec = rng.choice(list(Compression))
    records = [RecordInput(b"v%d" % i, rng.choice([None, b"k%d" % i]))
               for i in range(rng.randint(1, 3))]
    kind = rng.randrange(4)
    extra: dict[str, Any] = {}
    if kind >= 1:
        extra = {"producer_id": rng.choice([0, 1000, 5]), "producer_epoch": rng.choice([0, 1]),
                 "base_sequence": rng.choice([0, 1, 5])}
    if kind == 2:
        extra["transactional"] = True
    return encode_batch(records, timestamp=1_700_000_000_000, compression_type=codec, **extra)


def _leaf(kafka_type: str, value: Any, nullable: bool, rng: random.Random) -> Any:
    if nullable and rng.random() < 0.1:
        return None
    if kafka_type in _INTS:
        bits, signed = _INTS[kafka_type]
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        return rng.choice([0, 1, 2, 3, -1, low, high, high - 1, rng.randint(low, high)]
                          if signed else [0, 1, 2, high, rng.randint(low, high)])
    if kafka_type == "bool":
        return not value
    if kafka_type == "string":
        return rng.choice(_NAMES)
    if kafka_type in ("bytes", "records"):
        return rng.choice([b"", b"\x00" * rng.randint(1, 70), rng.randbytes(rng.randint(1, 80)),
                           _batches(rng), _batches(rng) + _batches(rng)])
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(milliseconds=rng.choice([0, 1, -1, 5, 30000, (1 << 31) - 1]))
    if kafka_type == "uuid":
        return rng.choice([uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))])
    if kafka_type == "float64":
        return rng.choice([0.0, -1.0, float("inf"), float("nan")])
    return value


def _mutate_entity(entity: Any, rng: random.Random) -> Any:
    """``entity`` with one field somewhere inside it changed."""
    f = rng.choice(dataclasses.fields(entity))
    value = getattr(entity, f.name)
    tp = f.type
    nullable = typing.get_origin(tp) in (typing.Union, types.UnionType)
    if nullable:
        tp = next(a for a in typing.get_args(tp) if a is not type(None))
    many = typing.get_origin(tp) is tuple
    element = typing.get_args(tp)[0] if many else tp
    nested = isinstance(element, type) and dataclasses.is_dataclass(element)
    kafka_type = f.metadata.get("kafka_type", "")
    if many:
        items = list(value or ())
        r = rng.random()
        if items and r < 0.5:
            i = rng.randrange(len(items))
            items[i] = (_mutate_entity(items[i], rng) if nested
                        else _leaf(kafka_type, items[i], False, rng))
        elif items and r < 0.7:
            items.append(rng.choice(items))
        elif items and r < 0.85:
            del items[rng.randrange(len(items))]
        elif not nested:
            items.append(_leaf(kafka_type, 0, False, rng))
        new: Any = tuple(items)
    elif nested:
        new = None if value is None else _mutate_entity(value, rng)
    else:
        new = _leaf(kafka_type, value, nullable, rng)
    return dataclasses.replace(entity, **{f.name: new})


def _encode(request: Any, body: Any) -> bytes:
    schema = type(body)
    header_schema = schema.__header_schema__
    header = header_schema(request_api_key=request.api_key,
                           request_api_version=request.api_version,
                           correlation_id=request.correlation_id, client_id=request.client_id)
    return encode_message(header) + encode_message(body)


def mutator(byte_mutate: Any) -> Any:
    def mutate(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if rng.random() < 0.5:
            return bytes(byte_mutate(data, max_size))
        try:
            request = decode_request(data)
            if request.body is None:
                return bytes(byte_mutate(data, max_size))
            body = request.body
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                body = _mutate_entity(body, rng)
            frame = _encode(request, body)
        except Exception:  # undecodable, or a value the version cannot encode
            return bytes(byte_mutate(data, max_size))
        return frame if len(frame) <= max_size else bytes(byte_mutate(data, max_size))

    return mutate


if __name__ == "__main__":
    from fuzzing import fuzz

    fuzz(check, mutator)
