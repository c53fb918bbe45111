"""The floor under a Python broker's request: an asyncio server that does nothing but frame.

It reads size-prefixed frames as samsa's connection does (a BufferedProtocol, one receive buffer),
answers each with the same pre-encoded Produce v9 response carrying the request's correlation
id, and writes the answers of one read together (samsa's coalescing). No decoding, no log, no
handler: what is left is CPython's and the kernel's share of a request (the event loop, one
receive and one send per batch of pipelined requests). ``request_capacity.py --floor`` measures
it beside samsa with the same loaders, so samsa's CPU per request reads against what any asyncio
broker must spend.

    .venv/bin/python bench/asyncio_floor.py PORT
"""

from __future__ import annotations

import asyncio
import signal
import struct
import sys

from samsa.protocol.fast import produce_response

_CORRELATION = struct.Struct(">i")


def _response_body() -> bytes:
    """What samsa answers a one-message Produce v9 (its own encoder, built once here)."""
    return produce_response(9, {"responses": [{"name": "capacity", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 0, "log_append_time": -1,
         "log_start_offset": 0, "record_errors": [], "error_message": None}]}],
        "throttle_time_ms": 0})


class FloorProtocol(asyncio.BufferedProtocol):
    def __init__(self, body: bytes) -> None:
        self._buf = bytearray(1 << 20)
        self._view = memoryview(self._buf)
        self._end = 0
        self._body = body  # the header (correlation id, one empty tagged-field byte) goes first
        self._size = struct.pack(">i", 4 + 1 + len(body))

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes
        view, pos, end = self._view, 0, self._end
        out = []
        while end - pos >= 4:
            (size,) = _CORRELATION.unpack_from(view, pos)
            if end - pos - 4 < size:
                break
            correlation = bytes(view[pos + 8:pos + 12])
            out.append(self._size + correlation + b"\x00" + self._body)
            pos += 4 + size
        rest = end - pos
        if pos:
            self._view[:rest] = self._view[pos:end]
        self._end = rest
        if out:
            self.transport.write(b"".join(out))  # type: ignore[attr-defined]


async def serve(port: int) -> None:
    body = _response_body()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: FloorProtocol(body), "127.0.0.1", port)
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, stop.set)
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
