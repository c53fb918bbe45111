"""One client connection: framing, in-order request processing, and response sending.

Kafka's rules (INDEX.md section 2): a frame is an int32 size and that many bytes; frames larger
than ``socket.request.max.bytes`` close the connection; responses go back in request order
(requests are processed one at a time per connection, later ones wait in a queue); a request
that cannot be decoded closes this connection and nothing else.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from samsa.errors import CloseConnection
from samsa.security.acl import ANONYMOUS_PRINCIPAL
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


Dispatch = Callable[[Any, "Connection"], Awaitable[list[Any] | None]]


class Connection(asyncio.BufferedProtocol):
    # Who the client is, as authorization reads it (handlers/context.RequestContext):
    # authentication sets it per connection; a PLAINTEXT one stays Kafka's anonymous principal.
    principal: str = ANONYMOUS_PRINCIPAL

    @property
    def host(self) -> str:
        """The client's address (``peer`` without its port), the host ACLs are about."""
        return self.peer.rsplit(":", 1)[0]

    def __init__(self, dispatch: Dispatch, max_request_bytes: int, on_close: Callable) -> None:
        self._dispatch = dispatch
        self._max_request_bytes = max_request_bytes
        self._on_close = on_close
        # Small frames arrive in a reusable buffer; a frame too large for it gets a buffer of
        # its own that the socket fills directly (no copy of a 1 MiB produce in Python).
        self._rbuf = bytearray(_READ_BUFFER)
        self._rview = memoryview(self._rbuf)
        self._start = self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._frames: collections.deque[bytes | memoryview] = collections.deque()
        self._queued_bytes = 0
        self._frame_ready = asyncio.Event()
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._reading_paused = False
        self._closing = False  # the transport is gone or going: nothing more is sent
        self._stopping = False  # graceful shutdown: finish the request in flight, take no more
        self._task: asyncio.Task | None = None
        self.transport: asyncio.Transport | None = None
        self.peer: str = "?"
        self.busy = False

    # --- asyncio.BufferedProtocol -----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._task = asyncio.get_running_loop().create_task(self._process())
        self._task.add_done_callback(lambda _task: self._on_close(self))

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
            if size < 0 or size > self._max_request_bytes:
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

    def _push(self, frame: bytes | memoryview) -> None:
        self._frames.append(frame)
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
                self._queued_bytes -= len(frame)
                if self._reading_paused and self._queued_bytes < _MAX_QUEUED_BYTES // 2:
                    self._reading_paused = False
                    self.transport.resume_reading()  # type: ignore[union-attr]
                self.busy = True
                try:
                    chunks = await self._dispatch(frame, self)
                    if chunks is not None and not self._closing:
                        await self._queue_output(chunks)
                finally:
                    self.busy = False
                if not self._frames or self._out_bytes >= _MAX_BUFFERED_OUTPUT:
                    await self._flush_output()
        except CloseConnection as exc:
            log.info("closing connection from %s: %s", self.peer, exc)
            self.close()
        except (ConnectionError, asyncio.CancelledError):
            self.close()  # the task ends here: a cancelled connection is finished
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
            self.close()

    async def _queue_output(self, chunks: list[Any]) -> None:
        """Buffer a response; a large file region is sent with sendfile right away."""
        for chunk in chunks:
            if isinstance(chunk, FileRegion):
                if chunk.length < SENDFILE_MIN_BYTES:
                    chunk = chunk.read()
                else:
                    await self._flush_output()
                    await asyncio.get_running_loop().sendfile(
                        self.transport, chunk.file, chunk.position, chunk.length, fallback=True
                    )
                    continue
            self._out.append(chunk)
            self._out_bytes += len(chunk)

    async def _flush_output(self) -> None:
        if self._out and not self._closing:
            self.transport.write(b"".join(self._out))  # type: ignore[union-attr]
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
        self._frames.clear()
        self._stopping = True
        self._frame_ready.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=5)
            except (TimeoutError, asyncio.CancelledError):
                self._task.cancel()
        self.close()
