"""Fuzz target: the group and transaction record decoders of the internal topics.

The input is a selector byte and a record key or value as it would be read back from
``__consumer_offsets`` or ``__transaction_state`` when a coordinator loads a partition.
Selector (modulo 5): 0 ``decode_key``, 1 ``decode_offset_value``, 2 ``decode_group_value``,
3 ``decode_txn_key``, 4 ``decode_txn_value``.

A decoder may refuse the bytes only with CorruptRecordError (the coordinators skip such a
record and load the rest). What it accepts must survive the round trip the coordinator makes
when it writes the state again: encoded in the version samsa writes, then decoded, it gives
the same value (the transaction's partitions compared as sets: the writer sorts them).

    python fuzz/fuzz_coordinator_records.py tests/fuzz_corpus/coordinator_records -runs=200000
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from samsa.coordinator.records import (
    GroupKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from samsa.coordinator.txn_records import (
    TxnValue,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from samsa.errors import CorruptRecordError

_MAX_STRING = 0x7FFF  # what the non-flexible versions samsa writes can hold


def _encode_key(key: Any) -> bytes:
    return encode_group_key(key) if isinstance(key, GroupKey) else encode_offset_key(key)


def _txn_partitions(value: TxnValue) -> TxnValue:
    return TxnValue(value.producer_id, value.producer_epoch, value.timeout_ms, value.status,
                    {t: sorted(ps) for t, ps in value.partitions.items()},
                    value.last_update_ms, value.start_ms)


_DECODERS: list[tuple[Callable[[bytes], Any], Callable[[Any], bytes], Callable[[Any], Any]]] = [
    (decode_key, _encode_key, lambda v: v),
    (decode_offset_value, encode_offset_value, lambda v: v),
    (decode_group_value, encode_group_value, lambda v: v),
    (decode_txn_key, encode_txn_key, lambda v: v),
    (decode_txn_value, encode_txn_value, _txn_partitions),
]


def _too_long_to_write(value: Any) -> bool:
    """A flexible version holds strings longer than the int16 lengths samsa writes."""
    if isinstance(value, str):
        return len(value.encode()) > _MAX_STRING
    if isinstance(value, (list, tuple)):
        return any(_too_long_to_write(v) for v in value)
    if isinstance(value, dict):
        return any(_too_long_to_write(k) or _too_long_to_write(v) for k, v in value.items())
    if hasattr(value, "__slots__"):
        return any(_too_long_to_write(getattr(value, s)) for s in value.__slots__)
    return False


def check(data: bytes) -> None:
    if not data:
        return
    decode, encode, normal = _DECODERS[data[0] % len(_DECODERS)]
    try:
        value = decode(data[1:])
    except CorruptRecordError:
        return
    if _too_long_to_write(value):
        return
    again = decode(encode(value))
    if normal(again) != normal(value):
        raise AssertionError(f"{value} was written and read back as {again}")


if __name__ == "__main__":
    from fuzzing import fuzz

    fuzz(check)
