"""The embedded broker's TLS: an asyncio stream pair wrapped in ``ssl.SSLObject`` over memory BIOs.

asyncio's own TLS transport closes the socket at once when a server-side handshake fails,
dropping the alert OpenSSL wrote (``certificate_required``, ``unknown_ca`` ...), so a client sees
only an end of stream.  Kafka's SslTransportLayer flushes the alert before it closes, and clients
rely on it to say why (no client certificate, an untrusted one).  Doing the handshake here sends
it as Kafka does.  After the handshake the object reads and writes like the streams it wraps
(``readexactly``, ``read``, ``write``, ``drain``, ``close``, ``get_extra_info``)."""
from __future__ import annotations

import asyncio
import logging
import ssl

log = logging.getLogger(__name__)
_CHUNK = 1 << 16


class TlsStream:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, obj: ssl.SSLObject,
                 incoming: ssl.MemoryBIO, outgoing: ssl.MemoryBIO):
        self._reader, self._writer = reader, writer
        self._obj, self._in, self._out = obj, incoming, outgoing
        self._buf = bytearray()
        self._eof = False

    @classmethod
    async def accept(cls, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ctx: ssl.SSLContext,
                     timeout: float = 30.0) -> "TlsStream | None":
        """Server handshake; None when it failed (the alert has been sent, the socket closed)."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = ctx.wrap_bio(incoming, outgoing, server_side=True)
        stream = cls(reader, writer, obj, incoming, outgoing)
        try:
            await asyncio.wait_for(stream._handshake(), timeout)
            return stream
        except ssl.SSLError as exc:
            log.info("TLS handshake with %s failed: %s", writer.get_extra_info("peername"),
                     exc.reason or exc)
        except (asyncio.TimeoutError, ConnectionError, EOFError) as exc:
            log.debug("TLS handshake with %s ended: %r", writer.get_extra_info("peername"), exc)
        try:
            await stream._flush()          # the alert, as Kafka's SslTransportLayer sends it
        except ConnectionError:
            pass
        writer.close()
        return None

    async def _handshake(self) -> None:
        while True:
            try:
                self._obj.do_handshake()
                await self._flush()        # TLS 1.3 session tickets, the server's Finished
                return
            except ssl.SSLWantReadError:
                await self._flush()
                await self._fill()

    async def _flush(self) -> None:
        data = self._out.read()
        if data:
            self._writer.write(data)
            await self._writer.drain()

    async def _fill(self) -> None:
        data = await self._reader.read(_CHUNK)
        if not data:
            self._in.write_eof()
            raise EOFError("connection closed by the client")
        self._in.write(data)

    async def _more(self) -> bool:
        """Decrypt what is buffered or comes next into ``_buf``; False at the end of the stream."""
        while True:
            try:
                chunk = self._obj.read(_CHUNK)
            except ssl.SSLWantReadError:
                await self._flush()
                try:
                    await self._fill()
                except EOFError:
                    return False
                continue
            except ssl.SSLZeroReturnError:
                return False
            if not chunk:
                return False
            self._buf += chunk
            return True

    async def readexactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            if not await self._more():
                partial = bytes(self._buf)
                self._buf.clear()
                raise asyncio.IncompleteReadError(partial, n)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    async def read(self, n: int = -1) -> bytes:
        if not self._buf and not await self._more():
            return b""
        k = len(self._buf) if n < 0 else min(n, len(self._buf))
        out = bytes(self._buf[:k])
        del self._buf[:k]
        return out

    def write(self, data: bytes) -> None:
        self._obj.write(data)
        self._writer.write(self._out.read())

    async def drain(self) -> None:
        await self._writer.drain()

    def get_extra_info(self, name: str, default=None):
        if name == "ssl_object":
            return self._obj
        if name == "peercert":
            return self._obj.getpeercert()
        return self._writer.get_extra_info(name, default)

    def close(self) -> None:
        self._writer.close()

    async def wait_closed(self) -> None:
        await self._writer.wait_closed()
