"""One client connection: framing, in-order request processing, and response sending.

Kafka's rules (INDEX.md section 2): a frame is an int32 size and that many bytes; frames larger
than ``socket.request.max.bytes`` close the connection; responses go back in request order
(requests are processed one at a time per connection, later ones wait in a queue); a request
that cannot be decoded closes this connection and nothing else.

Authentication belongs to the connection: on a TLS listener (SSL) nothing is read as a request
before the handshake is over, and ``principal`` is set from the client's certificate before
the first request is processed (PLAINTEXT: ``User:ANONYMOUS``). A failed handshake (plaintext
bytes, no certificate where one is required, an untrusted or expired one) or a certificate
name no ``ssl.principal.mapping.rules`` rule maps closes the connection with one log line.
On SASL_PLAINTEXT and SASL_SSL listeners the SASL exchange (``authenticator``,
``samsa.server.sasl``) is a state between the handshake and the first other request: it sees
every frame until the client is authenticated, and sets ``principal``; a failed exchange is
logged once and closes the connection after ``connection.failed.authentication.delay.ms``.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import re
import ssl
import struct
import time
from collections.abc import Awaitable, Callable
from typing import Any

from samsa.errors import CloseConnection
from samsa.metrics import RequestStats
from samsa.security.channel import ListenerSecurity
from samsa.security.listeners import EndPoint
from samsa.security.principal import ANONYMOUS, KafkaPrincipal, NoMatchingRule
from samsa.server.sasl import AuthenticationFailed, SaslServerAuthenticator
from samsa.server.tls import ServerTlsSession
from samsa.storage.log import FileRegion

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
# Below this a fetched region is read and written like any bytes: sendfile's fixed cost
# (waiting for the transport's buffer to drain, an extra syscall round) outweighs the copy.
SENDFILE_MIN_BYTES = 64 * 1024
# Stop reading from a client that has this many bytes of requests queued.
_MAX_QUEUED_BYTES = 8 * 1024 * 1024
_READ_BUFFER = 256 * 1024
_MIN_READ = 64 * 1024
# Responses to pipelined requests are written together, up to this many bytes.
_MAX_BUFFERED_OUTPUT = 1024 * 1024
# A TLS handshake not finished by then closes the connection.
TLS_HANDSHAKE_TIMEOUT_S = 30.0
_PLAINTEXT = ListenerSecurity(EndPoint("PLAINTEXT", "PLAINTEXT", "", 0))
_OPENSSL_LOCATION = re.compile(r" \(_ssl\.c:\d+\)$")


def handshake_failure(exc: BaseException | None) -> str:
    """Why a TLS handshake failed, in a few words (no traceback)."""
    if exc is None:
        return "the client closed the connection"
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"certificate verify failed: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return _OPENSSL_LOCATION.sub("", str(exc))
    if isinstance(exc, ConnectionAbortedError) and "handshake" in str(exc):
        return str(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


Dispatch = Callable[[Any, "Connection"], Awaitable[list[Any] | None]]


class Connection(asyncio.BufferedProtocol):
    def __init__(self, dispatch: Dispatch, max_request_bytes: int, on_close: Callable,
                 security: ListenerSecurity = _PLAINTEXT,
                 admit: Callable[[Connection], str | None] | None = None) -> None:
        self._dispatch = dispatch
        # the connection quotas: None to be served, else why the connection is refused
        self._admit = admit
        # when a request last arrived or a response went out (connections.max.idle.ms); from
        # its making, since the idle sweep can see it before asyncio calls connection_made
        self.last_active = time.monotonic()
        self.security = security
        # who the client is, once authenticated (the TLS handshake, if any, is over)
        self.principal: KafkaPrincipal = ANONYMOUS
        # file regions go out with sendfile, which a TLS transport cannot do
        self._zero_copy = security.ssl_context is None
        self._handshaking = False
        self._max_request_bytes = self._request_limit = max_request_bytes
        # the SASL exchange of a SASL listener's connection (set by the server)
        self.authenticator: SaslServerAuthenticator | None = None
        self._on_close = on_close
        # Small frames arrive in a reusable buffer; a frame too large for it gets a buffer of
        # its own that the socket fills directly (no copy of a 1 MiB produce in Python).
        self._rbuf = bytearray(_READ_BUFFER)
        self._rview = memoryview(self._rbuf)
        self._start = self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._frames: collections.deque[bytes | memoryview] = collections.deque()
        self._current: bytes | memoryview | None = None
        self._arrived: collections.deque[float] = collections.deque()  # each frame's arrival
        # what dispatch leaves for the request metrics, recorded once the response is sent:
        # (RequestStats, handling started, response ready, seconds waiting on others)
        self.timing: tuple[RequestStats, float, float, float] | None = None
        self._queued_bytes = 0
        self._frame_ready = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._reading_paused = False
        # client quotas (KIP-219): muted until then (time.monotonic), 0 when not throttled
        self._throttled_until = 0.0
        self._closing = False  # the transport is gone or going: nothing more is sent
        self._stopping = False  # graceful shutdown: finish the request in flight, take no more
        self._task: asyncio.Task | None = None
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self.host: str = "?"
        self.busy = False

    # --- asyncio.BufferedProtocol -----------------------------------------------------------

    @property
    def listener_name(self) -> str:
        return self.security.listener_name

    @property
    def security_protocol(self) -> str:
        return self.security.security_protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.host = peer[0] if peer else "?"
        loop = asyncio.get_running_loop()
        self.last_active = time.monotonic()
        refused = self._admit(self) if self._admit is not None else None
        if refused is not None:
            log.info("Rejected connection from %s on listener %s: %s", self.host,
                     self.listener_name, refused)
            self._closing = True
            transport.abort()
            self._on_close(self)
            return
        if self.security.ssl_context is not None:
            # nothing is read before the handshake starts (start_tls reads from then on)
            transport.pause_reading()
            self._handshaking = True
            self._task = loop.create_task(self._handshake())
        else:
            self.principal = self.security.plaintext_principal()
            self._task = loop.create_task(self._process())
        self._task.add_done_callback(lambda _task: self._on_close(self))

    async def _handshake(self) -> None:
        """TLS, then the principal from the client's certificate, then requests."""
        raw = self.transport
        assert raw is not None and self.security.ssl_context is not None
        failure: BaseException | None = None
        tls = self.transport = ServerTlsSession(raw, self, self.security.ssl_context)
        try:
            await tls.handshake(TLS_HANDSHAKE_TIMEOUT_S)
        except (OSError, EOFError) as exc:  # ssl.SSLError and TimeoutError are OSErrors
            failure = exc
        finally:
            self._handshaking = False
        if failure is not None or self._closing:
            log.info("Failed authentication with %s (SSL handshake failed on listener %s: %s)",
                     self.peer, self.listener_name, handshake_failure(failure))
            self.close()
            return
        ssl_object = tls.get_extra_info("ssl_object")
        try:
            self.principal = self.security.tls_principal(
                ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None)
        except NoMatchingRule as exc:
            log.info("Failed authentication with %s (listener %s: %s)", self.peer,
                     self.listener_name, exc)
            self.close()
            return
        log.debug("%s authenticated on listener %s as %s (%s)", self.peer, self.listener_name,
                  self.principal, ssl_object.version() if ssl_object is not None else "?")
        await self._process()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled :]
        if self._start and len(self._rbuf) - self._end < _MIN_READ:
            # Little room left after a partial frame: move it to the front.
            pending = bytes(self._rview[self._start : self._end])
            self._rview[: len(pending)] = pending
            self._start, self._end = 0, len(pending)
        return self._rview[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled == len(self._big):
                self._push(memoryview(self._big).toreadonly())
                self._big = None
            return
        self._end += nbytes
        view, start, end = self._rview, self._start, self._end
        while end - start >= 4:
            (size,) = _SIZE.unpack_from(view, start)
            if size < 0 or size > self._request_limit:
                if self.authenticator is not None and self.authenticator.authenticating:
                    self._oversized_token(size)
                    return
                log.warning(
                    "closing connection from %s: request size %d is outside 0..%d "
                    "(socket.request.max.bytes)", self.peer, size, self._max_request_bytes,
                )
                self.close()
                return
            have = end - start - 4
            if have >= size:
                self._push(bytes(view[start + 4 : start + 4 + size]))
                start += 4 + size
            elif size > _READ_BUFFER // 2:  # a large frame: the rest goes straight into it
                self._big = bytearray(size)
                self._big[:have] = view[start + 4 : end]
                self._big_filled = have
                start = end
                break
            else:
                break
        if start == end:
            start = end = 0
        self._start, self._end = start, end

    def limit_requests(self, limit: int | None) -> None:
        """Frames above ``limit`` bytes are refused (None: ``socket.request.max.bytes``)."""
        self._request_limit = (self._max_request_bytes if limit is None
                               else min(limit, self._max_request_bytes))

    def _oversized_token(self, size: int) -> None:
        """A frame above ``sasl.server.max.receive.size`` before authentication: Kafka's
        "invalid receive size", a failed authentication (closed after the delay)."""
        assert self.authenticator is not None
        log.info("Failed authentication with %s (listener %s: Failing SASL authentication due "
                 "to invalid receive size: %d bytes, more than %d "
                 "(sasl.server.max.receive.size))", self.peer, self.listener_name, size,
                 self._request_limit)
        self._frames.clear()
        self._arrived.clear()
        self._closing = True  # nothing more is read or answered
        self._frame_ready.set()
        if self.transport is not None:
            self.transport.pause_reading()
        delay = self.authenticator.sasl.failed_delay_ms / 1000
        asyncio.get_running_loop().call_later(delay, self._close_transport)

    def _close_transport(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def _push(self, frame: bytes | memoryview) -> None:
        self._frames.append(frame)
        self._arrived.append(self.last_active)
        self._queued_bytes += len(frame)
        self._frame_ready.set()
        if self._queued_bytes > _MAX_QUEUED_BYTES and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._frame_ready.set()
        self._can_write.set()
        if self._task is not None and self.busy:
            self._task.cancel()  # e.g. a long-poll fetch for a client that is gone

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    # --- processing ---------------------------------------------------------------------------

    async def _process(self) -> None:
        try:
            while not self._closing and not self._stopping:
                if not self._frames:
                    self._frame_ready.clear()
                    await self._frame_ready.wait()
                    continue
                frame = self._frames.popleft()
                self._current = frame
                received = self._arrived.popleft()
                self._queued_bytes -= len(frame)
                if self._reading_paused and self._queued_bytes < _MAX_QUEUED_BYTES // 2:
                    self._reading_paused = False
                    self.transport.resume_reading()  # type: ignore[union-attr]
                self.busy = True
                try:
                    auth = self.authenticator
                    if auth is not None and auth.intercepts(frame):
                        chunks = await auth.receive(frame)
                    else:
                        chunks = await self._dispatch(frame, self)
                    if chunks is None or self._closing:
                        pass
                    elif len(chunks) == 1 and type(chunks[0]) is bytes:  # the usual answer
                        self._out.append(chunks[0])
                        self._out_bytes += len(chunks[0])
                    else:
                        await self._queue_output(chunks)
                finally:
                    self.busy = False
                if (self._throttled_until or not self._frames
                        or self._out_bytes >= _MAX_BUFFERED_OUTPUT):
                    await self._flush_output()
                if self.timing is not None:
                    stats, started, handled, remote_s = self.timing
                    stats.record(received, started, handled, remote_s, time.monotonic())
                    self.timing = None
                if self._throttled_until:
                    await self._mute()
        except CloseConnection as exc:
            log.info("closing connection from %s: %s", self.peer, exc)
            self.close()
        except AuthenticationFailed as exc:
            await self._authentication_failed(exc)
        except (ConnectionError, asyncio.CancelledError):
            self.close()  # the task ends here: a cancelled connection is finished
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
            self.close()

    def throttle(self, ms: int) -> None:
        """A client quota was violated: once the response is out, nothing more is read from
        this connection or answered for ``ms`` (Kafka mutes the channel for the throttle
        time, so that a client that ignores ``throttle_time_ms`` is held too)."""
        self._throttled_until = max(self._throttled_until, time.monotonic() + ms / 1000)

    async def _mute(self) -> None:
        """The response goes out now; then the connection is muted until the throttle time
        is over (requests already received wait, unread ones stay in the socket)."""
        await self._flush_output()
        transport = self.transport
        if transport is not None and not self._reading_paused:
            transport.pause_reading()
        self.busy = True  # a client gone meanwhile cancels the wait (connection_lost)
        try:
            while not self._closing and (
                    remaining := self._throttled_until - time.monotonic()) > 0:
                await asyncio.sleep(remaining)
        finally:
            self.busy = False
            self._throttled_until = 0.0
        if transport is not None and not self._reading_paused and not self._closing:
            transport.resume_reading()

    async def _authentication_failed(self, failure: AuthenticationFailed) -> None:
        """One log line; after the delay (the event loop goes on) the answer, then close."""
        log.info("Failed authentication with %s (%s)", self.peer, failure.reason)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        self._frames.clear()
        self._arrived.clear()
        try:
            if failure.delayed and self.authenticator is not None:
                await asyncio.sleep(self.authenticator.sasl.failed_delay_ms / 1000)
            if failure.response and not self._closing:
                await self._queue_output(failure.response)
                await self._flush_output()
        except (ConnectionError, asyncio.CancelledError):
            pass
        self.close()

    async def _queue_output(self, chunks: list[Any]) -> None:
        """Buffer a response; a large file region is sent with sendfile right away."""
        for chunk in chunks:
            if isinstance(chunk, FileRegion):
                if chunk.length < SENDFILE_MIN_BYTES or not self._zero_copy:
                    chunk = chunk.read()  # over TLS: read, then encrypted by the transport
                else:
                    await self._flush_output()
                    sent = self._sendfile_now(chunk)
                    if sent < chunk.length:
                        await asyncio.get_running_loop().sendfile(
                            self.transport, chunk.file, chunk.position + sent,
                            chunk.length - sent, fallback=True)
                    continue
            self._out.append(chunk)
            self._out_bytes += len(chunk)

    def _sendfile_now(self, region: FileRegion) -> int:
        """Send what the socket takes of a file region at once, when nothing is queued before
        it: the bytes sent. The rest goes through loop.sendfile, whose fixed cost (pausing
        reading, waiting for the buffer, a writer callback) a follower's or consumer's fetch
        then pays only when the socket's buffer is full."""
        transport = self.transport
        if transport is None or self._closing or transport.get_write_buffer_size():
            return 0
        sock = transport.get_extra_info("socket")
        if sock is None:
            return 0
        out, source = sock.fileno(), region.file.fileno()
        sent = 0
        try:
            while sent < region.length:
                n = os.sendfile(out, source, region.position + sent, region.length - sent)
                if n == 0:  # the file ends early: loop.sendfile reports it
                    break
                sent += n
        except (BrokenPipeError, ConnectionResetError):
            raise  # the client is gone: _process closes the connection
        except OSError:  # a full socket buffer, or anything else: loop.sendfile takes the rest
            pass
        return sent

    async def _flush_output(self) -> None:
        self.last_active = time.monotonic()
        if self._out and not self._closing:
            if self._zero_copy:
                self.transport.write(b"".join(self._out))  # type: ignore[union-attr]
            else:  # the TLS transport encrypts each chunk: joining them first is a copy more
                self.transport.writelines(self._out)  # type: ignore[union-attr]
        self._out.clear()
        self._out_bytes = 0
        if not self._can_write.is_set():
            await self._can_write.wait()

    def close(self) -> None:
        self._closing = True
        self._frame_ready.set()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    async def drain_and_close(self) -> None:
        """Graceful shutdown: stop reading, finish the request in flight, then close."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        if self._handshaking and self._task is not None:
            self._task.cancel()  # no request of this client started yet
        self._frames.clear()
        self._arrived.clear()
        self._stopping = True
        self._frame_ready.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=5)
            except (TimeoutError, asyncio.CancelledError):
                current = self._current
                if current is not None and len(current) >= 8 and self.busy:
                    key, version, correlation = struct.unpack_from(">hhi", current)
                    log.warning("shutting down: request %d v%d (correlation %d) from %s did not "
                                "finish in 5 s; closing its connection", key, version,
                                correlation, self.peer)
                self._task.cancel()
        self.close()
