"""Shared helpers for the storage tests: batch building and an injectable clock."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest

from samsa.records.batch import Compression, iter_headers
from samsa.records.record import Record, RecordInput, decode_records, encode_batch

# A fixed "now" for the fake clock, well away from zero so that timestamps below it are valid.
BASE_TIME_MS = 1_700_000_000_000


class FakeClock:
    """A clock for ``Log(clock=...)``: returns ``now`` (ms) until told to move."""

    def __init__(self, now: int = BASE_TIME_MS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now

    def set(self, now: int) -> None:
        self.now = now


def make_batch(
    values: Iterable[bytes | None] | int = 1,
    *,
    keys: Sequence[bytes | None] | None = None,
    timestamps: Sequence[int] | None = None,
    timestamp: int = BASE_TIME_MS,
    compression: Compression = Compression.NONE,
    base_offset: int = 0,
    leader_epoch: int = -1,
    **kwargs,
) -> bytes:
    """One v2 batch. ``values`` is a list of values or a record count (values ``b"v<i>"``);
    ``timestamps`` gives each record its own timestamp, else all get ``timestamp``."""
    if isinstance(values, int):
        values = [b"v%d" % i for i in range(values)]
    values = list(values)
    records = [
        RecordInput(
            value,
            key=keys[i] if keys is not None else None,
            timestamp=timestamps[i] if timestamps is not None else None,
        )
        for i, value in enumerate(values)
    ]
    return encode_batch(
        records,
        base_offset=base_offset,
        timestamp=timestamp,
        compression_type=compression,
        leader_epoch=leader_epoch,
        **kwargs,
    )


def batch_of_size(size: int, *, timestamp: int = BASE_TIME_MS, **kwargs) -> bytes:
    """A one-record uncompressed batch of exactly ``size`` bytes (``size`` >= 70)."""
    overhead = len(make_batch([b""], timestamp=timestamp, **kwargs))
    pad = size - overhead
    if pad < 0:
        raise ValueError(f"a batch cannot be smaller than {overhead} bytes")
    # The record length varint grows by a byte at 64 and 8192 bytes of record; adjust for it.
    for value_len in range(pad, max(pad - 4, -1), -1):
        batch = make_batch([b"x" * value_len], timestamp=timestamp, **kwargs)
        if len(batch) == size:
            return batch
    raise ValueError(f"cannot build a batch of exactly {size} bytes")


def split_batches(data: bytes) -> list[bytes]:
    """The whole batches in ``data``; asserts nothing is left over."""
    out, end = [], 0
    for pos, header in iter_headers(data):
        assert pos == end, f"gap or overlap at position {pos}"
        out.append(data[pos : pos + header.size])
        end = pos + header.size
    assert end == len(data), f"{len(data) - end} trailing bytes after the last whole batch"
    return out


def decode_all(data: bytes) -> list[Record]:
    """Every record in a run of whole batches."""
    return [record for batch in split_batches(data) for record in decode_records(batch)]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
