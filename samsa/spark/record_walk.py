"""Where each record of some record batches starts: the one step of the Spark tasks' bulk
decoding (``arrow_records``) that cannot be vectorised, since a record's length varint says
where the next one starts.

With numba (the ``spark`` extra installs it) the walk is compiled to machine code on first use
and cached on disk, about 5 ns a record; without it (a Python numba does not support yet) the
broker's own walk (``samsa.records.batch.record_starts``) runs in Python, about 200 ns a
record. Both refuse the same records.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from samsa.errors import CorruptRecordError
from samsa.records.batch import MIN_RECORD_BODY
from samsa.records.batch import record_starts as batch_record_starts

# what the compiled walk answers instead of raising (it cannot raise with a message)
_PAST_THE_BATCH, _TOO_LONG, _TOO_SHORT, _NOT_FILLED = -1, -2, -3, -4


def record_starts(payload: bytes, sizes: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """Where each record starts (its length varint) in ``payload``, the batches' records one
    after the other (``sizes[i]`` bytes holding ``counts[i]`` records), and where the last one
    ends. CorruptRecordError when a batch's records do not fill its bytes exactly."""
    if sum(sizes) > len(payload):
        raise ValueError(f"batches of {sum(sizes)} bytes in a payload of {len(payload)}")
    if _compiled() is None:
        return _walk_in_python(payload, sizes, counts)
    return walk_compiled(payload, sizes, counts)


_PROBLEMS = {
    _PAST_THE_BATCH: "record length runs past the end of the batch",
    _TOO_LONG: "record length varint longer than 10 bytes",
    _TOO_SHORT: "record length negative or shorter than the smallest record",
    _NOT_FILLED: "a batch's records do not fill its bytes of records",
}


def walk_compiled(payload: bytes, sizes: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """:func:`record_starts` by the compiled walk (numba must be installed)."""
    walk = _compiled()
    assert walk is not None, "numba is not installed"
    out = np.empty(sum(counts) + 1, np.int64)
    found = walk(np.frombuffer(payload, np.uint8), np.asarray(sizes, np.int64),
                 np.asarray(counts, np.int64), out)
    if found < 0:
        raise CorruptRecordError(_PROBLEMS[found])
    assert found == len(out)
    return out


def _walk(a: np.ndarray, sizes: np.ndarray, counts: np.ndarray, out: np.ndarray) -> int:
    """The walk numba compiles: ``out`` gets the starts and the end; the number written, or
    one of the negative answers above. It refuses what ``samsa.records.batch.record_starts``
    refuses."""
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
            length = raw >> np.uint64(1)
            # zig-zag: an odd value is negative
            if raw & np.uint64(1) or length < np.uint64(MIN_RECORD_BODY):
                return _TOO_SHORT
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


def _walk_in_python(payload: bytes, sizes: Sequence[int], counts: Sequence[int]) -> np.ndarray:
    """The same walk without numba: the broker's own walk over each batch's records."""
    view = memoryview(payload)
    parts: list[np.ndarray] = []
    pos = 0
    for size, count in zip(sizes, counts, strict=True):
        starts = batch_record_starts(view[pos:pos + size], count)
        if starts is None:
            raise CorruptRecordError(f"the batch's {count} records do not fill its {size} "
                                     "bytes of records")
        parts.append(np.asarray(starts[:-1], np.int64) + pos)
        pos += size
    parts.append(np.array([pos], np.int64))
    return np.concatenate(parts)
