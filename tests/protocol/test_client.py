"""The one Kafka wire client: its sans-IO core (against the broker's own server-side codec, no
socket), its asyncio transport and its blocking transport (against a real broker and against
peers that misbehave)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

import samsa
from samsa.protocol.build import response
from samsa.protocol.client import (
    SIZE,
    ClientCodec,
    ResponseError,
    api_versions_request,
    choose_version,
    version_ranges,
)
from samsa.protocol.codec import decode_request, encode_response
from samsa.protocol.connection import BrokerConnection, BrokerConnectionError
from samsa.protocol.replica_fetch import decode_fetch_response, encode_fetch_request
from samsa.tools.common import ToolError
from samsa.tools.wire import Wire

METADATA = 3


def _answer(frame: bytes, correlation_id: int | None = None) -> bytes:
    """What the broker's codec answers to an ApiVersions request ``frame`` (size prefix
    included), as one response frame without its size prefix."""
    request = decode_request(frame[SIZE.size:])
    body = response(18, request.api_version, {
        "error_code": 0,
        "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12},
                     {"api_key": 0, "min_version": 3, "max_version": 11}],
    })
    chunks = encode_response(
        request.correlation_id if correlation_id is None else correlation_id, body)
    return b"".join(bytes(c) for c in chunks)[SIZE.size:]


def test_a_request_round_trips_through_the_broker_codec() -> None:
    codec = ClientCodec("round-trip")
    frame, sent = codec.encode(*api_versions_request())
    assert SIZE.unpack_from(frame)[0] == len(frame) - SIZE.size
    request = decode_request(frame[SIZE.size:])
    assert (request.api_key, request.api_version, request.correlation_id,
            request.client_id) == (18, 0, 1, "round-trip")
    answer = _answer(frame)
    assert codec.frame_size(SIZE.pack(len(answer))) == len(answer)
    decoded = codec.decode(sent, answer)
    assert version_ranges(decoded) == {3: (0, 12), 0: (3, 11)}
    # correlation ids advance per request
    _, second = codec.encode(*api_versions_request())
    assert second.correlation_id == 2


def test_an_answer_to_another_request_is_refused() -> None:
    codec = ClientCodec("c")
    frame, sent = codec.encode(*api_versions_request())
    with pytest.raises(ResponseError, match="answered correlation id 7, expected 1"):
        codec.decode(sent, _answer(frame, correlation_id=7))


@pytest.mark.parametrize("cut", [0, 3, 6, 9])
def test_a_truncated_answer_is_a_response_error(cut: int) -> None:
    codec = ClientCodec("c")
    frame, sent = codec.encode(*api_versions_request())
    answer = _answer(frame)
    with pytest.raises(ResponseError, match="cannot read the answer"):
        codec.decode(sent, answer[:cut])


@pytest.mark.parametrize("size", [-1, -(2**31), 2**30 + 1])
def test_impossible_frame_sizes_are_refused(size: int) -> None:
    with pytest.raises(ResponseError, match=f"a response frame of {size} bytes"):
        ClientCodec.frame_size(SIZE.pack(size))


def test_version_choice_and_refused_api_versions() -> None:
    ranges = {3: (0, 12), 0: (3, 11)}
    assert choose_version(ranges, 3, 4, 9) == 9
    assert choose_version(ranges, 3, 4, 13) == 12
    assert choose_version(ranges, 0, 0, 2) is None
    assert choose_version(ranges, 47, 0, 0) is None  # not advertised

    class Refused:
        error_code = 35
        api_keys = ()

    with pytest.raises(ResponseError, match="UNSUPPORTED_VERSION"):
        version_ranges(Refused())


# --- transports ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[samsa.Broker]:
    with samsa.Broker(Path(tmp_path_factory.mktemp("client")) / "data") as b:
        yield b


@pytest.fixture
def peer() -> Iterator[Callable[[Callable[[socket.socket], None]], int]]:
    """``peer(behaviour)``: a one-connection TCP server on loopback that runs ``behaviour``
    on the accepted socket; returns its port."""
    servers: list[tuple[socket.socket, threading.Thread]] = []

    def start(behaviour: Callable[[socket.socket], None]) -> int:
        server = socket.create_server(("127.0.0.1", 0))
        server.settimeout(30)

        def serve() -> None:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(30)
                behaviour(conn)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        servers.append((server, thread))
        return server.getsockname()[1]

    yield start
    for server, thread in servers:
        server.close()
        thread.join(timeout=30)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while len(data) < SIZE.size or len(data) < SIZE.size + SIZE.unpack_from(data)[0]:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _close_after_request(conn: socket.socket) -> None:
    _read_request(conn)


def _answer_garbage(conn: socket.socket) -> None:
    _read_request(conn)
    conn.sendall(SIZE.pack(6) + b"\x00\x00\x00\x01\xff\xff")


def _never_answer(conn: socket.socket) -> None:
    _read_request(conn)
    conn.recv(1)  # until the client gives up and closes


def test_async_connection_talks_to_a_broker(broker: samsa.Broker) -> None:
    async def main() -> None:
        connection = await BrokerConnection.open("127.0.0.1", broker.port, "test", 30.0)
        try:
            assert choose_version(connection.versions, METADATA, 12, 12) == 12
            answer = await connection.request(
                METADATA, 12, MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                              include_topic_authorized_operations=False), 30.0)
            assert [b.port for b in answer.brokers] == [broker.port]
        finally:
            await connection.close()

        with pytest.raises(BrokerConnectionError,
                           match=f"the broker at 127.0.0.1:{broker.port} does not support "
                                 "Metadata v99"):
            await BrokerConnection.open("127.0.0.1", broker.port, "test", 30.0,
                                        require=((METADATA, 99, "Metadata"),))

    asyncio.run(main())


# Only the peer that never answers waits out its (short) deadline; the others have a long one
# that a loaded machine cannot exhaust.
BROKEN_PEERS = [
    (_close_after_request, 30.0), (_answer_garbage, 30.0), (_never_answer, 0.5),
]


@pytest.mark.parametrize(("behaviour", "timeout", "message"), [
    (*BROKEN_PEERS[0], "connection to 127.0.0.1:\\d+ lost"),
    (*BROKEN_PEERS[1], "cannot read the answer \\(api key 18 v0\\)"),
    (*BROKEN_PEERS[2], "no answer from 127.0.0.1:\\d+ within 0.5 s"),
])
def test_async_connection_fails_cleanly_on_a_broken_peer(
    peer: Callable[[Callable[[socket.socket], None]], int],
    behaviour: Callable[[socket.socket], None], timeout: float, message: str,
) -> None:
    port = peer(behaviour)
    with pytest.raises(BrokerConnectionError, match=message):
        asyncio.run(BrokerConnection.open("127.0.0.1", port, "test", timeout))


def test_async_connection_refused() -> None:
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    with pytest.raises(BrokerConnectionError, match=f"cannot connect to 127.0.0.1:{port}"):
        asyncio.run(BrokerConnection.open("127.0.0.1", port, "test", 5.0))


def test_blocking_wire_talks_to_a_broker(broker: samsa.Broker) -> None:
    with Wire("127.0.0.1", broker.port, time.monotonic() + 30) as wire:
        assert wire.version(METADATA, 4, 12, "Metadata") == 12
        answer = wire.request(METADATA, 12, MetadataRequest(
            topics=(), allow_auto_topic_creation=False,
            include_topic_authorized_operations=False))
        assert [b.port for b in answer.brokers] == [broker.port]
        with pytest.raises(ToolError, match="UNSUPPORTED_VERSION: .* does not support Fancy"):
            wire.version(METADATA, 99, 100, "Fancy")


@pytest.mark.parametrize(("behaviour", "timeout", "message"), [
    (*BROKEN_PEERS[0], "127.0.0.1:\\d+ closed the connection"),
    (*BROKEN_PEERS[1], "127.0.0.1:\\d+: cannot read the answer \\(api key 18 v0\\)"),
    (*BROKEN_PEERS[2], "REQUEST_TIMED_OUT: no answer from 127.0.0.1:\\d+ in time"),
])
def test_blocking_wire_fails_in_one_line_on_a_broken_peer(
    peer: Callable[[Callable[[socket.socket], None]], int],
    behaviour: Callable[[socket.socket], None], timeout: float, message: str,
) -> None:
    port = peer(behaviour)
    with pytest.raises(ToolError, match=message) as failure:
        Wire("127.0.0.1", port, time.monotonic() + timeout)
    assert "\n" not in failure.value.message


def test_request_frame_answers_a_view_and_abandon_ends_a_long_poll(broker: samsa.Broker) -> None:
    """The replica fetcher's way: a pre-encoded frame, its answer as a read-only view of the
    connection's buffer; ``abandon`` ends a request in flight (None) and closes the
    connection."""
    topic = "request-frame"

    async def main() -> None:
        connection = await BrokerConnection.open("127.0.0.1", broker.port, "test", 30.0)
        try:
            frame, sent = connection.codec.encode(METADATA, 12, MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=topic),),
                allow_auto_topic_creation=True, include_topic_authorized_operations=False))
            view = await connection.request_frame(frame, METADATA, 30.0)
            assert isinstance(view, memoryview) and view.readonly
            assert [t.name for t in connection.codec.decode(sent, view).topics] == [topic]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while True:  # until the new topic's partition has a leader
                correlation = connection.next_correlation_id()
                fetch = encode_fetch_request(correlation, "test", -1, 0, 1, 1 << 20,
                                             [(topic, [(0, -1, 0, -1, -1, 1 << 20)])])
                answer = await connection.request_frame(fetch, 1, 30.0)
                assert answer is not None
                partition = decode_fetch_response(answer, correlation).responses[0].partitions[0]
                if partition.error_code == 0 or loop.time() > deadline:
                    break
                await asyncio.sleep(0.05)
            assert partition.error_code == 0
            # a consumer's long poll at the end of an empty partition: 20 s unless abandoned
            correlation = connection.next_correlation_id()
            fetch = encode_fetch_request(correlation, "test", -1, 20_000, 1, 1 << 20,
                                         [(topic, [(0, -1, 0, -1, -1, 1 << 20)])])
            loop.call_later(0.2, connection.abandon)
            started = loop.time()
            assert await connection.request_frame(fetch, 1, 30.0) is None
            assert loop.time() - started < 10
            with pytest.raises(BrokerConnectionError, match="abandoned"):
                await connection.request_frame(fetch, 1, 30.0)
        finally:
            await connection.close()

    asyncio.run(main())
