"""Where each record of some record batches starts: the one step of the Spark tasks' bulk
decoding (``arrow_records``) that cannot be vectorised, since a record's length varint says
where the next one starts.

With numba (the ``spark`` extra installs it) the walk is compiled to machine code on first use
and cached on disk, about 5 ns a record; without it (a Python numba does not support yet) the
same walk runs in Python, about 200 ns a record. Both refuse the same records.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from samsa.errors import CorruptRecordError
from samsa.records.record import read_varint

# what the compiled walk answers instead of raising (it cannot raise with a message)
_PAST_THE_BATCH, _TOO_LONG, _NEGATIVE, _NOT_FILLED = -1, -2, -3, -4


def record_starts(payload: bytes, sizes: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """Where each record starts (its length varint) in ``payload``, the batches' records one
    after the other (``sizes[i]`` bytes holding ``counts[i]`` records), and where the last one
    ends. CorruptRecordError when a batch's records do not fill its bytes exactly."""
    if sum(sizes) > len(payload):
        raise ValueError(f"batches of {sum(sizes)} bytes in a payload of {len(payload)}")
    compiled = _compiled()
    if compiled is None:
        return _walk_in_python(payload, sizes, counts)
    out = np.empty(sum(counts) + 1, np.int64)
    found = compiled(np.frombuffer(payload, np.uint8), np.asarray(sizes, np.int64),
                     np.asarray(counts, np.int64), out)
    if found < 0:
        raise CorruptRecordError(_PROBLEMS[found])
    return out


_PROBLEMS = {
    _PAST_THE_BATCH: "record length runs past the end of the batch",
    _TOO_LONG: "record length varint longer than 10 bytes",
    _NEGATIVE: "negative record length",
    _NOT_FILLED: "a batch's records do not fill its bytes of records",
}


def _walk(a: np.ndarray, sizes: np.ndarray, counts: np.ndarray, out: np.ndarray) -> int:
    """The walk numba compiles: ``out`` gets the starts and the end; the number written, or
    one of the negative answers above."""
    pos = 0
    k = 0
    for j in range(sizes.shape[0]):
        stop = pos + sizes[j]
        for _ in range(counts[j]):
            out[k] = pos
            k += 1
            raw = np.uint64(0)
            shift = 0
            while True:
                if pos >= stop:
                    return _PAST_THE_BATCH
                b = np.uint64(a[pos])
                pos += 1
                raw |= (b & np.uint64(0x7F)) << np.uint64(shift)
                if b < 0x80:
                    break
                shift += 7
                if shift > 63:
                    return _TOO_LONG
            if raw & np.uint64(1):  # zig-zag: an odd value is negative
                return _NEGATIVE
            length = raw >> np.uint64(1)
            if length > np.uint64(stop - pos):  # (numba does not check the indexes)
                return _PAST_THE_BATCH
            pos += np.int64(length)
        if pos != stop:
            return _NOT_FILLED
    out[k] = pos
    return k + 1


@functools.cache
def _compiled() -> Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], int] | None:
    try:
        import numba
    except ImportError:
        return None
    walk: Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], int] = numba.njit(
        cache=True, nogil=True)(_walk)
    return walk


@functools.cache
def _length_steps() -> list[int]:
    """For the two bytes at a record's start (the first one low): how far the next record
    starts when they begin a one- or two-byte length varint (records up to 8 KiB), else 0 (a
    longer varint, or a negative length). 64 Ki entries, built on first use."""

    def step(b: int, c: int) -> int:
        if b < 0x80:
            raw, size = b, 1
        elif c < 0x80:
            raw, size = (b & 0x7F) | (c << 7), 2
        else:
            return 0
        return 0 if raw & 1 else size + (raw >> 1)

    return [step(x & 0xFF, x >> 8) for x in range(1 << 16)]


def _walk_in_python(payload: bytes, sizes: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """The same walk without numba (``payload`` has zero bytes after the last batch, so the
    two-byte look-up of a last one-byte length stays inside it)."""
    steps = _length_steps()
    out: list[int] = []
    add = out.append  # a list's append is cheaper than an array's (no argument parsing)
    pos = 0
    try:
        for size, count in zip(sizes, counts, strict=True):
            stop = pos + size
            for _ in range(count):
                if pos >= stop:
                    raise CorruptRecordError(_PROBLEMS[_PAST_THE_BATCH])
                add(pos)
                step = steps[payload[pos] | payload[pos + 1] << 8]
                if step:
                    pos += step
                else:  # a length of three bytes or more, or one to refuse
                    length, pos = read_varint(payload, pos)
                    if length < 0:
                        raise CorruptRecordError(_PROBLEMS[_NEGATIVE])
                    pos += length
            if pos != stop:  # too many bytes or too few
                raise CorruptRecordError(_PROBLEMS[_NOT_FILLED])
    except IndexError:
        raise CorruptRecordError(_PROBLEMS[_PAST_THE_BATCH]) from None
    add(pos)
    return np.fromiter(out, np.int64, len(out))
