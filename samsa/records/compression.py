"""The four codecs of Kafka's record batches, as Kafka frames them.

gzip is a gzip stream; snappy is snappy-java's "xerial" framing (raw blocks are read too);
lz4 is the LZ4 frame format; zstd is a zstd frame. The broker stores batches as sent and
decompresses only to look inside them: a produced batch's records are counted (as Kafka's
LogValidator iterates them), and tools, timestamps and compaction read them.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator

import cramjam

from samsa.errors import CorruptRecordError, UnsupportedCompressionError
from samsa.records.batch import Compression

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def compress(codec: Compression, data: bytes) -> bytes:
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return gzip.compress(data, compresslevel=6)
    if codec == Compression.SNAPPY:
        parts = [_XERIAL_HEADER]
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnsupportedCompressionError(f"unknown compression codec {int(codec)}")


def decompress(codec: Compression, data: bytes | memoryview) -> bytes:
    try:
        if codec == Compression.NONE:
            return bytes(data)
        if codec == Compression.GZIP:
            return gzip.decompress(bytes(data))
        if codec == Compression.SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == Compression.LZ4:
            return bytes(cramjam.lz4.decompress(bytes(data)))
        if codec == Compression.ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except (OSError, ValueError, EOFError, zlib.error, cramjam.DecompressionError) as exc:
        raise CorruptRecordError(f"cannot decompress {codec.name} records: {exc}") from None
    raise UnsupportedCompressionError(f"unknown compression codec {int(codec)}")


# A produced batch is decompressed whole to count its records (Kafka streams it instead): a
# "decompression bomb" must not make the broker allocate whatever it claims. Past this many
# bytes, and past MAX_RATIO times its compressed size, a batch is refused.
MAX_DECOMPRESSED_FLOOR = 64 * 1024 * 1024
MAX_RATIO = 64


def decompressed_limit(compressed_size: int) -> int:
    return max(MAX_DECOMPRESSED_FLOOR, MAX_RATIO * compressed_size)


def decompress_bounded(codec: Compression, data: bytes | memoryview,
                       limit: int) -> bytes | memoryview:
    """``decompress``, refusing (CorruptRecordError) a payload that would decompress to more
    than ``limit`` bytes without ever holding more than about that much."""
    try:
        if codec == Compression.GZIP:
            return _gzip_bounded(bytes(data), limit)
        if codec == Compression.SNAPPY:
            return _snappy_bounded(bytes(data), limit)
        if codec in (Compression.LZ4, Compression.ZSTD):
            module = cramjam.lz4 if codec == Compression.LZ4 else cramjam.zstd
            size = min(limit, max(64 * 1024, 8 * len(data)))
            while True:  # the size is unknown up front: a buffer that grows to the limit
                out = bytearray(size)
                try:
                    return memoryview(out)[: module.decompress_into(bytes(data), out)]
                except cramjam.DecompressionError as exc:
                    if "whole buffer" not in str(exc):
                        raise
                    if size >= limit:
                        raise _too_large(codec, limit) from None
                    size = min(limit, size * 4)
    except (OSError, ValueError, EOFError, zlib.error, cramjam.DecompressionError) as exc:
        raise CorruptRecordError(f"cannot decompress {codec.name} records: {exc}") from None
    return decompress(codec, data)


def _too_large(codec: Compression, limit: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{codec.name} records decompress to more than {limit} bytes: refused")


def _gzip_bounded(data: bytes, limit: int) -> bytes:
    out: list[bytes] = []
    left = limit
    while data:  # one gzip member after another, as gzip.decompress reads them
        stream = zlib.decompressobj(16 + zlib.MAX_WBITS)
        out.append(stream.decompress(data, left + 1))
        left -= len(out[-1])
        if left < 0 or stream.unconsumed_tail:
            raise _too_large(Compression.GZIP, limit)
        if not stream.eof:
            raise EOFError("truncated gzip stream")
        data = stream.unused_data.lstrip(b"\0")
    return b"".join(out)


def _snappy_bounded(data: bytes, limit: int) -> bytes:
    blocks = [data] if not data.startswith(_XERIAL_MAGIC) else list(_xerial_blocks(data))
    if sum(cramjam.snappy.decompress_raw_len(b) for b in blocks) > limit:
        raise _too_large(Compression.SNAPPY, limit)
    return b"".join(bytes(cramjam.snappy.decompress_raw(b)) for b in blocks)


def _xerial_blocks(data: bytes) -> Iterator[bytes]:
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError("truncated xerial snappy block length")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise ValueError("truncated xerial snappy block")
        yield data[pos : pos + size]
        pos += size


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    return b"".join(bytes(cramjam.snappy.decompress_raw(b)) for b in _xerial_blocks(data))
