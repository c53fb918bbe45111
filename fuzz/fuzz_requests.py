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
import logging
import shutil
import struct
import tempfile
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader
from kio.serial.errors import OutOfBoundValue

from samsa.errors import CloseConnection
from samsa.handlers.registry import APIS
from samsa.protocol.codec import MalformedRequestError, decode_request
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


def broker() -> _Broker:
    global _broker
    if _broker is None:
        logging.getLogger("samsa").setLevel(logging.CRITICAL)  # refusals are routine here
        _broker = _Broker()
    return _broker


def close() -> None:
    """Stop the broker (the tests call this; a fuzzing process just exits)."""
    global _broker
    if _broker is not None:
        _broker.loop.run_until_complete(_broker.server.stop())
        _broker.loop.close()
        shutil.rmtree(_broker.dir, ignore_errors=True)
        _broker = None


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
        raise AssertionError(f"the event loop reported: {context.get('message')}") from (
            context.get("exception"))
    if chunks is not None:
        _check_response(frame, chunks)


if __name__ == "__main__":
    from fuzzing import fuzz

    fuzz(check)
