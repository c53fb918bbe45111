"""The four codecs of Kafka's record batches, as Kafka frames them.

gzip is a gzip stream; snappy is snappy-java's "xerial" framing (raw blocks are read too);
lz4 is the LZ4 frame format (independent 64 KiB blocks, which Kafka's Java reader needs); zstd
is a zstd frame. The broker stores batches as sent and decompresses only to look inside them:
a produced batch's records are counted (as Kafka's LogValidator iterates them), and tools,
timestamps and compaction read them. A topic whose ``compression.type`` names a codec has the
batches of other codecs recompressed on append (``recompress_batch``).
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Iterator

import cramjam

from samsa.config import (
    GZIP_DEFAULT_LEVEL,
    LZ4_DEFAULT_LEVEL,
    ZSTD_DEFAULT_LEVEL,
    LogConfig,
)
from samsa.errors import CorruptRecordError, UnsupportedCompressionError
from samsa.records.batch import (
    ATTRIBUTES,
    BATCH_LENGTH,
    CRC,
    HEADER_SIZE,
    LOG_OVERHEAD,
    Attr,
    BatchHeader,
    Compression,
    crc_of,
)

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")


def compress(codec: Compression, data: bytes | memoryview, level: int | None = None) -> bytes:
    """``data`` in ``codec``'s framing, at ``level`` (gzip, lz4, zstd: Kafka's
    compression.<codec>.level; None: Kafka's default level)."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        if level is None or level == GZIP_DEFAULT_LEVEL:
            level = zlib.Z_DEFAULT_COMPRESSION
        return gzip.compress(data, compresslevel=level)
    if codec == Compression.SNAPPY:
        parts = [_XERIAL_HEADER]
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            parts.append(_INT32.pack(len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == Compression.LZ4:
        # Independent blocks: Kafka's Java reader refuses a frame of linked ones ("Dependent
        # block stream is unsupported"), which is lz4's default. Kafka compresses its default
        # level with lz4's fast compressor, others with the high-compression one at that level.
        fast = level is None or level == LZ4_DEFAULT_LEVEL
        frame = cramjam.lz4.Compressor(level=None if fast else level, content_checksum=False,
                                       block_linked=False)
        frame.compress(bytes(data))
        return bytes(frame.finish())
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(data, ZSTD_DEFAULT_LEVEL if level is None else level))
    raise UnsupportedCompressionError(f"unknown compression codec {int(codec)}")


# compression.type -> the codec batches are stored with ("producer": none forced)
_TOPIC_CODECS = {
    "uncompressed": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}


def topic_compression(config: LogConfig) -> tuple[Compression, int | None] | None:
    """The codec and level a log's ``compression.type`` stores batches with (Kafka's
    LogConfig.compression); None for ``producer``: every batch keeps its own codec."""
    codec = _TOPIC_CODECS.get(config.compression_type)
    if codec is None:
        return None
    if codec == Compression.GZIP:
        return codec, config.compression_gzip_level
    if codec == Compression.LZ4:
        return codec, config.compression_lz4_level
    if codec == Compression.ZSTD:
        return codec, config.compression_zstd_level
    return codec, None


def recompress_batch(batch: bytes | memoryview, header: BatchHeader, codec: Compression,
                     level: int | None = None) -> bytearray:
    """The batch ``batch`` (whose parsed header is ``header``, validated already) with its
    records in ``codec``: the records' bytes unchanged (keys, values, headers, offset and
    timestamp deltas), the header's fields but the codec bits and the length kept (offsets,
    timestamps, producer id, epoch and sequence, transactional and control flags), a new
    CRC. What Kafka's LogValidator does for a topic whose compression.type differs from the
    producer's codec, minus its renumbering of inner offsets (a v2 client's are 0..n-1)."""
    view = memoryview(batch)
    body: bytes | memoryview = view[HEADER_SIZE : header.size]
    if header.compression != Compression.NONE:
        body = decompress_bounded(header.compression, body, decompressed_limit(len(body)))
    payload = compress(codec, body, level)
    out = bytearray(HEADER_SIZE + len(payload))
    out[:HEADER_SIZE] = view[:HEADER_SIZE]
    out[HEADER_SIZE:] = payload
    _INT32.pack_into(out, BATCH_LENGTH, len(out) - LOG_OVERHEAD)
    _INT16.pack_into(out, ATTRIBUTES, (header.attributes & ~Attr.CODEC_MASK) | int(codec))
    _UINT32.pack_into(out, CRC, crc_of(out, 0, len(out)))
    return out


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
