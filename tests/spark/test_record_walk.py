"""The Spark tasks' walk over record lengths (samsa/spark/record_walk.py): compiled by numba and
in Python, both against the broker's own walk (samsa.records.batch.record_starts), on batches
the encoder writes and on damaged ones."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import numpy as np
import pytest

from samsa.errors import CorruptRecordError
from samsa.records import batch
from samsa.records.batch import HEADER_SIZE
from samsa.records.record import RecordInput, encode_batch
from samsa.spark import record_walk

PAD = bytes(16)  # as decode_batches pads the joined payloads

Walk = Callable[[bytes, Sequence[int], Sequence[int]], np.ndarray]

WALKS: dict[str, Walk] = {"compiled": record_walk.walk_compiled,
                          "python": record_walk._walk_in_python}


def test_numba_is_there() -> None:
    """numba is part of the spark extra: the tasks get the compiled walk."""
    assert record_walk._compiled() is not None


def records_of(rnd: random.Random, count: int) -> list[RecordInput]:
    """Values of every length class: empty, null, one-, two- and three-byte length varints."""
    sizes = [0, 1, 50, 63, 64, 200, 8000, 8200, 70_000]
    return [RecordInput(None if rnd.random() < 0.1 else rnd.randbytes(rnd.choice(sizes)),
                        rnd.randbytes(rnd.randrange(0, 20)) if rnd.random() < 0.5 else None)
            for _ in range(count)]


def joined(batches: list[bytes]) -> tuple[bytes, list[int], list[int]]:
    parts = [b[HEADER_SIZE:] for b in batches]
    counts = [int.from_bytes(b[57:61], "big") for b in batches]
    return b"".join(parts) + PAD, [len(p) for p in parts], counts


@pytest.mark.parametrize("walk", WALKS)
def test_the_walk_finds_every_record_as_the_broker_does(walk: str) -> None:
    rnd = random.Random(7)
    batches = [encode_batch(records_of(rnd, rnd.randrange(1, 40))) for _ in range(30)]
    payload, sizes, counts = joined(batches)
    expected: list[int] = []
    base = 0
    for b, size in zip(batches, sizes, strict=True):
        starts = batch.record_starts(b[HEADER_SIZE:], int.from_bytes(b[57:61], "big"))
        assert starts is not None
        expected += [base + s for s in starts[:-1]]
        base += size
    expected.append(base)
    assert WALKS[walk](payload, sizes, counts).tolist() == expected


@pytest.mark.parametrize("walk", WALKS)
def test_no_records_at_all(walk: str) -> None:
    assert WALKS[walk](PAD, [], []).tolist() == [0]


@pytest.mark.parametrize("walk", WALKS)
@pytest.mark.parametrize("damage", ["short", "long", "count", "fewer", "negative", "endless",
                                    "huge"])
def test_records_that_do_not_fill_their_batch_are_refused(walk: str, damage: str) -> None:
    records = [RecordInput(b"value-%d" % i, b"k") for i in range(5)]
    good = encode_batch(records)
    payload, sizes, counts = joined([good, good])
    data = bytearray(payload)
    first = 0  # the first record's length varint (one byte: its records are short)
    if damage == "short":
        data[first] -= 2
    elif damage == "long":
        data[first] += 2
    elif damage == "count":
        counts[0] += 1
    elif damage == "fewer":
        counts[1] -= 1
    elif damage == "negative":
        data[first] |= 1
    elif damage == "endless":  # a length varint that never ends
        data[first:first + 11] = b"\xff" * 11
    else:  # a length of 2**63 - 1 bytes: added to a position it would wrap to a negative one
        data[first:first + 10] = b"\xfe" + b"\xff" * 8 + b"\x01"
    with pytest.raises(CorruptRecordError):
        WALKS[walk](bytes(data), sizes, counts)
