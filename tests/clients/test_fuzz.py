"""Hostile bytes on the wire: the broker closes the offending connection and nothing else.

One ``samsa server`` subprocess serves the whole module. After every case: the process is
alive, a long-lived observer connection gets correct ApiVersions and Metadata answers, no topic
appeared, and the fuzz topic's log end offset is unchanged, unless a mutated produce frame was
still a valid produce, in which case the records appended must be exactly the original ones
with a valid CRC.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from samsa.records.batch import CRC_START, read_header
from samsa.records.record import decode_records

from .conftest import (
    API_VERSIONS,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    ConnectionClosed,
    RawClient,
    decode_response,
    encode_request,
    make_batch,
    wait_for,
    whole_batches,
)

pytestmark = pytest.mark.timeout(90)

TOPIC = "fuzz"
MAX_REQUEST = 1 << 20  # socket.request.max.bytes of the fuzzed broker
SENTINEL_CORR = 0x5E771E
SENTINEL = encode_request(API_VERSIONS, 0, {}, SENTINEL_CORR)
VALUES = [b"alpha", b"beta", b"gamma"]

FUZZ = settings(
    derandomize=True, database=None, deadline=None, max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Target:
    proc: subprocess.Popen
    port: int
    observer: RawClient
    leo: int = 0
    topics: set[str] = field(default_factory=set)

    def connect(self, timeout: float = 5.0) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        sock.settimeout(timeout)
        return sock

    def check_healthy(self) -> None:
        """The invariants every case must leave intact (updates ``leo`` for valid produces)."""
        assert self.proc.poll() is None, "the broker process died"
        versions = self.observer.api_versions(0)
        assert versions.error_code == ErrorCode.none
        assert {k.api_key for k in versions.api_keys} >= {PRODUCE, FETCH, METADATA, API_VERSIONS}
        md = self.observer.metadata(None)
        assert {t.name for t in md.topics} == self.topics
        assert len(md.brokers) == 1
        leo = self.observer.log_end_offset(TOPIC)
        if leo != self.leo:
            self._check_appended(self.leo, leo)
            self.leo = leo

    def _check_appended(self, start: int, end: int) -> None:
        """A mutated produce went through: it must have been a whole, valid batch of the
        original records (a single-byte change outside the CRC's coverage)."""
        assert end > start, f"log end offset went backwards: {start} -> {end}"
        data = self.observer.fetch(TOPIC, start)
        assert data.error_code == ErrorCode.none
        batches = whole_batches(data.records)
        records = []
        for batch in batches:
            header = read_header(batch)
            assert crc32c(batch[CRC_START:]) == header.crc, "stored batch has a bad CRC"
            assert header.magic == 2
            records.extend(decode_records(batch))
        assert [r.offset for r in records] == list(range(start, end))
        assert [r.value for r in records] == VALUES * ((end - start) // len(VALUES))


class Server:
    """The fuzzed ``samsa server`` subprocess. If a case kills it, that case fails and the next
    test gets a restarted server (same data dir), so one crash does not hide the others."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.target: Target | None = None

    def start(self) -> Target:
        port = free_port()
        samsa_bin = Path(sys.executable).parent / "samsa"
        proc = subprocess.Popen(
            [str(samsa_bin), "server",
             "--override", f"log.dirs={self.data}",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             "--override", f"socket.request.max.bytes={MAX_REQUEST}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

        def connects() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                assert proc.poll() is None, "samsa server exited during startup"
                return False

        try:
            wait_for(connects, timeout=30, what="samsa server to listen")
            observer = RawClient(("127.0.0.1", port))
            observer.create_topic(TOPIC)
        except BaseException:
            proc.kill()
            proc.wait(10)
            raise
        self.target = Target(proc, port, observer, topics={TOPIC})
        self.target.leo = observer.log_end_offset(TOPIC)
        self.target.check_healthy()
        return self.target

    def alive_target(self) -> Target:
        if self.target is None or self.target.proc.poll() is not None:
            if self.target is not None:
                self.target.observer.close()
            return self.start()
        return self.target

    def stop(self) -> int | None:
        if self.target is None:
            return None
        t = self.target
        t.observer.close()
        if t.proc.poll() is not None:
            return None
        t.proc.send_signal(signal.SIGTERM)
        try:
            return t.proc.wait(30)
        finally:
            if t.proc.poll() is None:
                t.proc.kill()
                t.proc.wait(10)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("fuzz-data"))
    try:
        yield srv
    finally:
        code = srv.stop()
    assert code in (0, None), f"samsa server exited with {code} on SIGTERM"


@pytest.fixture
def target(server: Server) -> Target:
    return server.alive_target()


@dataclass
class Outcome:
    frames: list[bytes]
    closed: bool  # the broker closed the connection


def probe(target: Target, data: bytes, sentinel: bool = True, wait: float = 0.5) -> Outcome:
    """Send ``data`` on a new connection (then an ApiVersions sentinel, so that we know when
    the broker is done with what came before) and collect responses until the sentinel's
    answer, the broker closing, or ``wait`` seconds. Then close our side."""
    sock = target.connect()
    frames: list[bytes] = []
    closed = False
    buf = bytearray()
    try:
        try:
            sock.sendall(data + (SENTINEL if sentinel else b""))
        except (BrokenPipeError, ConnectionResetError):
            return Outcome(frames, True)
        deadline = time.monotonic() + wait
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            buf += chunk
            while len(buf) >= 4:
                (size,) = struct.unpack_from(">i", buf)
                if len(buf) < 4 + size:
                    break
                frames.append(bytes(buf[4 : 4 + size]))
                del buf[: 4 + size]
            if sentinel and frames and frames[-1][:4] == struct.pack(">i", SENTINEL_CORR):
                break
        assert not buf or not closed, "the broker closed in the middle of a response frame"
        return Outcome(frames, closed)
    finally:
        sock.close()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header_v1(api_key: int, version: int, corr: int = 7, client_id: bytes = b"fz") -> bytes:
    return struct.pack(">hhih", api_key, version, corr, len(client_id)) + client_id


def answered_sentinel(outcome: Outcome) -> bool:
    if not outcome.frames:
        return False
    corr, response = decode_response(API_VERSIONS, 0, outcome.frames[-1])
    return corr == SENTINEL_CORR and response.error_code == ErrorCode.none


# Valid requests to cut up and mutate.
PRODUCE_FRAME = encode_request(PRODUCE, 8, RawClient.produce_body(TOPIC, make_batch(VALUES)), 3)
VALID_FRAMES = {
    "api_versions_v0": encode_request(API_VERSIONS, 0, {}, 1),
    "api_versions_v3": encode_request(API_VERSIONS, 3, {"client_software_name": "fz",
                                                        "client_software_version": "1"}, 2),
    "metadata_v8": encode_request(METADATA, 8, {
        "topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False}, 4),
    "metadata_v12": encode_request(METADATA, 12, {
        "topics": [{"name": TOPIC, "topic_id": None}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False}, 5),
    "produce_v8": PRODUCE_FRAME,
    "fetch_v11": encode_request(FETCH, 11, RawClient.fetch_body(TOPIC, 0), 6),
    "list_offsets_v5": encode_request(LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]}, 7),
}


# --- sanity of the harness --------------------------------------------------------------------


def test_valid_frames_are_answered(target):
    for name, data in VALID_FRAMES.items():
        if name == "produce_v8":
            continue
        outcome = probe(target, data)
        assert not outcome.closed, name
        assert len(outcome.frames) == 2 and answered_sentinel(outcome), name
    target.check_healthy()


# --- random bytes --------------------------------------------------------------------------


@FUZZ
@given(payload=st.binary(max_size=300))
def test_random_payload_in_a_correct_frame(target, payload):
    probe(target, frame(payload))
    target.check_healthy()


@FUZZ
@given(data=st.binary(min_size=1, max_size=300))
def test_random_bytes_without_framing(target, data):
    probe(target, data, sentinel=False, wait=0.05)
    target.check_healthy()


@FUZZ
@given(body=st.binary(max_size=200),
       api_key=st.integers(-(2**15), 2**15 - 1), version=st.integers(-(2**15), 2**15 - 1))
def test_random_body_behind_a_plausible_header(target, body, api_key, version):
    outcome = probe(target, frame(header_v1(api_key, version) + body))
    if api_key == API_VERSIONS and not 0 <= version <= 4:
        # The ApiVersions fallback answers, whatever the body, and keeps the connection.
        corr, response = decode_response(API_VERSIONS, 0, outcome.frames[0])
        assert (corr, response.error_code) == (7, ErrorCode.unsupported_version)
        assert answered_sentinel(outcome)
    target.check_healthy()


# --- unknown api keys and versions -----------------------------------------------------------


@pytest.mark.parametrize("api_key", [-1, 19_999, 999, 32767, -32768, 67, 1000])
def test_unknown_api_key_closes_without_answer(target, api_key):
    outcome = probe(target, frame(header_v1(api_key, 0)))
    assert outcome.closed and outcome.frames == []
    target.check_healthy()


@FUZZ
@given(api_key=st.sampled_from([PRODUCE, FETCH, LIST_OFFSETS, METADATA]),
       version=st.integers(-(2**15), 2**15 - 1))
def test_unsupported_versions_close_without_answer(target, api_key, version):
    supported = {PRODUCE: (3, 11), FETCH: (4, 16), LIST_OFFSETS: (1, 8), METADATA: (0, 12)}
    low, high = supported[api_key]
    if low <= version <= high:
        return
    outcome = probe(target, frame(header_v1(api_key, version) + b"\x00" * 16), wait=10.0)
    assert outcome.closed and outcome.frames == []
    target.check_healthy()


# --- truncation ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(VALID_FRAMES))
def test_truncated_frames_with_matching_size(target, name):
    """Every prefix of a valid payload, framed with its own (shorter) size: a complete frame
    that does not decode. The broker closes (or, for the few prefixes that still decode,
    answers); it never hangs."""
    payload = VALID_FRAMES[name][4:]
    for cut in range(len(payload)):
        outcome = probe(target, frame(payload[:cut]), wait=5.0)
        assert outcome.closed or answered_sentinel(outcome), (name, cut, outcome)
    target.check_healthy()


@pytest.mark.parametrize("name", sorted(VALID_FRAMES))
def test_frames_cut_short_then_closed(target, name):
    """Every prefix of a valid frame (size prefix included) and then the client goes away."""
    data = VALID_FRAMES[name]
    for cut in range(len(data)):
        probe(target, data[:cut], sentinel=False, wait=0)
    target.check_healthy()


# --- wrong sizes -------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [-1, -(2**31), MAX_REQUEST + 1, 2**31 - 1])
def test_size_outside_limits_closes_at_once(target, size):
    """Negative or above socket.request.max.bytes: closed on the size alone, the broker does
    not wait for (or allocate) the payload."""
    started = time.monotonic()
    outcome = probe(target, struct.pack(">i", size), sentinel=False, wait=5.0)
    assert outcome.closed and outcome.frames == []
    assert time.monotonic() - started < 4.0
    target.check_healthy()


def test_size_at_the_limit_is_accepted_as_a_frame(target):
    """Exactly socket.request.max.bytes is allowed: the broker waits for the payload."""
    outcome = probe(target, struct.pack(">i", MAX_REQUEST) + b"\x00" * 100, sentinel=False,
                    wait=0.5)
    assert not outcome.closed
    target.check_healthy()


@pytest.mark.parametrize("name", sorted(VALID_FRAMES))
@pytest.mark.parametrize("delta", [1, 3, 100, -1, -3])
def test_size_prefix_off_by_some(target, name, delta):
    data = VALID_FRAMES[name]
    (size,) = struct.unpack_from(">i", data)
    # A longer size makes the broker wait for bytes that never come (the sentinel is
    # swallowed by the frame): no need to wait long for that.
    outcome = probe(target, struct.pack(">i", size + delta) + data[4:],
                    wait=0.3 if delta > 0 else 5.0)
    if delta < 0:
        # The frame is cut short and its tail starts the next "frame": both are garbage.
        assert outcome.closed or answered_sentinel(outcome)
    target.check_healthy()


# --- huge counts and lengths ------------------------------------------------------------------


HUGE_ARRAYS = {
    # Metadata v8: topics array count.
    "metadata_topics": header_v1(METADATA, 8) + struct.pack(">i", 2**31 - 1) + b"\x00\x01a",
    # Produce v8: transactional id null, acks, timeout, then a huge topic_data count.
    "produce_topics": header_v1(PRODUCE, 8) + struct.pack(">hhii", -1, -1, 1000, 2**31 - 1),
    # Produce v8: one topic, a huge partition count.
    "produce_partitions": header_v1(PRODUCE, 8) + struct.pack(">hhii", -1, -1, 1000, 1)
    + struct.pack(">h", 4) + b"fuzz" + struct.pack(">i", 2**31 - 1),
    # Produce v8: one partition whose records claim 2 GiB.
    "produce_records_length": header_v1(PRODUCE, 8) + struct.pack(">hhii", -1, -1, 1000, 1)
    + struct.pack(">h", 4) + b"fuzz" + struct.pack(">iii", 1, 0, 2**31 - 1) + b"\x00" * 8,
    # Fetch v11: replica, wait, min, max, isolation, session, epoch, then topics count.
    "fetch_topics": header_v1(FETCH, 11) + struct.pack(">iiiibiii", -1, 0, 1, 1000, 0, 0, -1,
                                                       2**31 - 1),
    # ListOffsets v5: replica, isolation, topics count.
    "list_offsets_topics": header_v1(LIST_OFFSETS, 5) + struct.pack(">ibi", -1, 0, 2**31 - 1),
    # Metadata v12 (flexible, header v2 with empty tags): compact array count as a 5-byte
    # varint near 2**32.
    "metadata_compact": header_v1(METADATA, 12) + b"\x00" + b"\xff\xff\xff\xff\x0f",
    # Produce v9 (flexible): null transactional id, acks, timeout, then a compact topic_data
    # count near 2**32.
    "produce_compact": header_v1(PRODUCE, 9) + b"\x00\x00" + struct.pack(">hi", -1, 1000)
    + b"\xff\xff\xff\xff\x0f",
    # ApiVersions v3: compact string length ~2**28.
    "api_versions_compact_string": header_v1(API_VERSIONS, 3) + b"\x00" + b"\xff\xff\xff\x7f"
    + b"abc",
    # A negative (non-null) string length for the topic name.
    "metadata_negative_string": header_v1(METADATA, 8) + struct.pack(">ih", 1, -7),
}


@pytest.mark.parametrize("name", sorted(HUGE_ARRAYS))
def test_huge_counts_close_the_connection(target, name):
    started = time.monotonic()
    outcome = probe(target, frame(HUGE_ARRAYS[name]), wait=10.0)
    assert outcome.closed and outcome.frames == [], outcome
    assert time.monotonic() - started < 5.0
    target.check_healthy()


def test_negative_array_count_is_null_or_closed(target):
    """-1 is the null array (Metadata v1+: all topics); other negative counts are invalid."""
    for count in (-1, -2, -(2**31)):
        payload = header_v1(METADATA, 8) + struct.pack(">i", count) + b"\x00\x00\x00"
        outcome = probe(target, frame(payload))
        if count == -1:
            corr, response = decode_response(METADATA, 8, outcome.frames[0])
            assert {t.name for t in response.topics} == target.topics
        else:
            assert outcome.closed
    target.check_healthy()


# --- mutated produce frames -------------------------------------------------------------------


def check_mutated_produce(target: Target, data: bytes) -> None:
    outcome = probe(target, data)
    answered = outcome.frames[:-1] if answered_sentinel(outcome) else outcome.frames
    # Anything answered before the sentinel must be a well-formed response of the (possibly
    # mutated) api key and version in the frame's header.
    api_key, version = struct.unpack_from(">hh", data, 4)
    if api_key == API_VERSIONS and not 0 <= version <= 4:
        version = 0
    for response_frame in answered:
        corr, _ = decode_response(api_key, version, response_frame)
        assert corr == struct.unpack_from(">i", data, 8)[0]
    target.check_healthy()


def test_produce_frame_every_byte_flipped(target):
    """Each byte of a valid Produce frame XOR 0xFF, one at a time."""
    accepted = 0
    for pos in range(len(PRODUCE_FRAME)):
        mutated = bytearray(PRODUCE_FRAME)
        mutated[pos] ^= 0xFF
        before = target.leo
        check_mutated_produce(target, bytes(mutated))
        accepted += target.leo != before
    # Both paths were exercised: bytes outside the batch's CRC (correlation id, timeout, base
    # offset, leader epoch...) still make a valid produce, most others must not.
    assert 8 <= accepted <= len(PRODUCE_FRAME) // 2, accepted


@FUZZ
@given(data=st.data())
def test_produce_frame_random_byte_values(target, data):
    pos = data.draw(st.integers(4, len(PRODUCE_FRAME) - 1), label="position")
    value = data.draw(st.integers(0, 255), label="value")
    mutated = bytearray(PRODUCE_FRAME)
    mutated[pos] = value
    check_mutated_produce(target, bytes(mutated))


@FUZZ
@given(data=st.data())
def test_produce_frame_several_mutations(target, data):
    positions = data.draw(st.lists(st.integers(4, len(PRODUCE_FRAME) - 1), min_size=2,
                                   max_size=6, unique=True), label="positions")
    mutated = bytearray(PRODUCE_FRAME)
    for pos in positions:
        mutated[pos] = data.draw(st.integers(0, 255))
    check_mutated_produce(target, bytes(mutated))


def test_unmutated_produce_goes_through(target):
    """Control for the mutation tests: the original frame appends the three records."""
    before = target.leo
    outcome = probe(target, PRODUCE_FRAME)
    corr, response = decode_response(PRODUCE, 8, outcome.frames[0])
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
    target.check_healthy()
    assert target.leo == before + len(VALUES)


# --- abrupt disconnects -----------------------------------------------------------------------


def test_fifty_connections_dropped_mid_frame(target):
    """50 connections send part of a frame and vanish (half with a RST) while the observer
    keeps working; nothing leaks into the log."""
    sockets = []
    for i in range(50):
        sock = target.connect()
        data = VALID_FRAMES[sorted(VALID_FRAMES)[i % len(VALID_FRAMES)]]
        sock.sendall(data[: max(1, len(data) * (i + 1) // 60)])
        sockets.append(sock)
        if i % 10 == 0:
            target.check_healthy()
    for i, sock in enumerate(sockets):
        if i % 2:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    target.check_healthy()
    # And a connection that dies with a full request in flight (a long-poll fetch).
    sock = target.connect()
    sock.sendall(encode_request(FETCH, 11, RawClient.fetch_body(TOPIC, target.leo,
                                                                 max_wait_ms=2000), 9))
    time.sleep(0.1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    target.check_healthy()


def test_slowloris_does_not_block_others(target):
    """A client dribbling one frame a byte at a time does not hold up other connections."""
    slow = target.connect()
    data = VALID_FRAMES["metadata_v8"]
    try:
        for i in range(len(data) - 1):
            slow.sendall(data[i : i + 1])
            if i % 20 == 0:
                target.check_healthy()
        slow.sendall(data[-1:])
        slow.settimeout(5)
        (size,) = struct.unpack(">i", slow.recv(4, socket.MSG_WAITALL))
        assert size > 0
    finally:
        slow.close()
    target.check_healthy()


def test_observer_survived(target):
    """The long-lived observer connection was never dropped along the way."""
    try:
        assert target.observer.api_versions(3).error_code == ErrorCode.none
    except ConnectionClosed:  # pragma: no cover - reported as a failure
        pytest.fail("the observer connection was closed by the broker")
    assert os.kill(target.proc.pid, 0) is None
