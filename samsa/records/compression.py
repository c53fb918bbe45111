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


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = []
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise ValueError("truncated xerial snappy block length")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise ValueError("truncated xerial snappy block")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + size])))
        pos += size
    return b"".join(out)
