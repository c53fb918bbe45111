"""A server-side TLS session between a socket transport and a connection's protocol.

Instead of asyncio's ``loop.start_tls``: every TLS record that has arrived is decrypted in one
loop over OpenSSL's memory BIOs straight into the protocol's request buffer, the protocol is
told once, and a response's chunks are encrypted into one socket write. Measured against
``start_tls`` (bench/tls_cost.py, README): 6-11% less broker CPU a message for requests sent as
whole records, the same for librdkafka's record per message, where OpenSSL's per-record work
is the cost. It is the protocol of the socket transport and the transport of the connection's
(buffered) protocol, so the connection does not know whether TLS is beneath it."""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

log = logging.getLogger(__name__)

# What arrives from the socket is copied from here into OpenSSL's incoming memory BIO.
_RAW_BUFFER = 256 * 1024
# Chunks of a response up to this many bytes together are encrypted as one piece (fewer,
# fuller records for the client to decrypt); larger responses chunk by chunk (no join copy).
_JOIN_BELOW = 64 * 1024


class ServerTlsSession(asyncio.BufferedProtocol, asyncio.Transport):
    """TLS over ``raw`` for ``app``, a buffered protocol already connected to ``raw``.

    ``await handshake(timeout)`` drives the handshake (an ``ssl.SSLError`` for a failed one,
    ``TimeoutError``, or ``ConnectionError`` when the client leaves); from then on ``app``
    reads plaintext through ``get_buffer`` / ``buffer_updated`` and writes through this
    transport. ``raw`` must be paused when the session is made; the session resumes it."""

    def __init__(self, raw: asyncio.Transport, app: asyncio.BufferedProtocol,
                 context: ssl.SSLContext) -> None:
        super().__init__()
        self._raw = raw
        self._app = app
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        # CPython's SSLObject is a Python wrapper over the C object (_ssl._SSLSocket); its
        # read() is a Python call more per record, so the session calls the C object itself
        # where there is one (it has the same read/write/do_handshake/shutdown).
        self._tls: Any = getattr(self._ssl, "_sslobj", self._ssl)
        self._raw_view = memoryview(bytearray(_RAW_BUFFER))
        self._handshake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # a handshake that fails after its waiter timed out is not an unretrieved exception
        self._handshake.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._paused = False  # the app paused reading
        self._closed = False
        raw.set_protocol(self)
        raw.resume_reading()

    async def handshake(self, timeout: float) -> None:
        await asyncio.wait_for(asyncio.shield(self._handshake), timeout)

    # --- the socket's protocol ----------------------------------------------------------------

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._raw_view

    def buffer_updated(self, nbytes: int) -> None:
        self._incoming.write(self._raw_view[:nbytes])
        if self._handshake.done():
            self._deliver()
        else:
            self._do_handshake()

    def eof_received(self) -> bool:
        self._incoming.write_eof()
        if not self._handshake.done():
            self._handshake.set_exception(ConnectionResetError("the client closed the "
                                                               "connection in the handshake"))
        return False  # the socket transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        if not self._handshake.done():
            self._handshake.set_exception(exc or ConnectionResetError(
                "the connection closed in the handshake"))
        self._app.connection_lost(exc)

    def pause_writing(self) -> None:
        self._app.pause_writing()

    def resume_writing(self) -> None:
        self._app.resume_writing()

    # --- TLS ------------------------------------------------------------------------------------

    def _do_handshake(self) -> None:
        try:
            self._tls.do_handshake()
        except ssl.SSLWantReadError:
            self._send_pending()
            return
        except (ssl.SSLError, OSError) as exc:
            self._send_pending()  # the alert, so that the client sees why
            self._handshake.set_exception(exc)
            return
        self._send_pending()  # the server's last flight and TLS 1.3 session tickets
        self._handshake.set_result(None)
        self._deliver()  # requests that came with the client's last flight

    def _deliver(self) -> None:
        """Decrypt what has arrived into the app's buffer: every record in one loop."""
        tls, app = self._tls, self._app
        closed_by_client = False
        try:
            while not self._paused and not self._closed:
                buffer = app.get_buffer(-1)
                wanted, filled = len(buffer), 0
                try:
                    while filled < wanted:
                        n = tls.read(wanted - filled, buffer[filled:] if filled else buffer)
                        if not n:  # no data raises SSLWantReadError: 0 is the close_notify
                            closed_by_client = True
                            break
                        filled += n
                finally:
                    if filled:
                        app.buffer_updated(filled)
                if filled < wanted:
                    break
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            closed_by_client = True
        except ssl.SSLError as exc:
            log.info("closing a TLS connection from %s: %s",
                     self._raw.get_extra_info("peername"), exc)
            self.abort()
            return
        if closed_by_client:
            self.close()  # our close_notify answers the client's (asyncio's client waits for it)
            return
        self._send_pending()  # e.g. an answer to a TLS 1.3 key update

    def _send_pending(self) -> None:
        if self._outgoing.pending:
            data = self._outgoing.read()
            if not self._raw.is_closing():
                self._raw.write(data)

    # --- the app's transport -------------------------------------------------------------------

    def write(self, data: Any) -> None:
        self._encrypt((data,))

    def writelines(self, list_of_data: Any) -> None:
        chunks = list(list_of_data)
        if sum(len(chunk) for chunk in chunks) <= _JOIN_BELOW:
            chunks = [b"".join(chunks)]
        self._encrypt(chunks)

    def _encrypt(self, chunks: Any) -> None:
        """Encrypt ``chunks`` and send what that made in one socket write."""
        if self._closed:
            return
        try:
            for chunk in chunks:
                if chunk:
                    self._tls.write(chunk)
        except ssl.SSLError as exc:
            log.info("closing a TLS connection: %s", exc)
            self.abort()
            return
        self._send_pending()

    def can_write_eof(self) -> bool:
        return False

    def is_closing(self) -> bool:
        return self._closed or self._raw.is_closing()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._handshake.done() and not self._raw.is_closing():
            try:
                self._tls.shutdown()  # close_notify; the client's answer is not waited for
            except (ssl.SSLError, ValueError):
                pass
            self._send_pending()
        self._raw.close()

    def abort(self) -> None:
        self._closed = True
        self._raw.abort()

    def pause_reading(self) -> None:
        if not self._paused:
            self._paused = True
            self._raw.pause_reading()

    def resume_reading(self) -> None:
        if self._paused:
            self._paused = False
            self._raw.resume_reading()
            if self._handshake.done() and not self._handshake.exception():
                self._deliver()  # plaintext left in the session when reading paused

    def is_reading(self) -> bool:
        return not self._paused and self._raw.is_reading()

    def get_write_buffer_size(self) -> int:
        return self._raw.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._raw.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._raw.set_write_buffer_limits(high, low)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._app

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        assert isinstance(protocol, asyncio.BufferedProtocol)
        self._app = protocol

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self._ssl
        if name == "sslcontext":
            return self._ssl.context
        if name == "peercert":
            return self._ssl.getpeercert()
        if name == "cipher":
            return self._ssl.cipher()
        return self._raw.get_extra_info(name, default)
