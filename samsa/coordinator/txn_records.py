"""Kafka's record key and value in ``__transaction_state``, in Kafka's own formats.

Key (TransactionLogKey v0): ``version int16 (0) | transactional id string``. Value
(TransactionLogValue v0)::

    version int16 (0) | producer id int64 | producer epoch int16 | timeout ms int32 |
    status int8 | partitions (nullable array: [topic string, [partition int32]]) |
    last update timestamp int64 | start timestamp int64

A null value is a tombstone (the transactional id expired). We write v0 and read v0 and the
flexible v1 (compact lengths, tagged fields, which hold the KIP-360/890 extras we ignore).
The record's partition is ``partition_for(transactional id)``, as for groups.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from samsa.coordinator.records import Reader, _Writer

KEY_VERSION = 0
VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    status: int
    partitions: dict[str, list[int]]
    last_update_ms: int
    start_ms: int


def encode_txn_key(transactional_id: str) -> bytes:
    w = _Writer(KEY_VERSION)
    w.string(transactional_id)
    return bytes(w.buf)


def decode_txn_key(data: bytes) -> str:
    r = Reader(bytes(data), "__transaction_state key")
    version = r.int16("version")
    if version != KEY_VERSION:
        raise r.fail(f"unknown key version {version}")
    txn_id = r.string("transactional id")
    r.end()
    return txn_id


def encode_txn_value(v: TxnValue) -> bytes:
    w = _Writer(VALUE_VERSION)
    w.int64(v.producer_id)
    w.buf += struct.pack(">hib", v.producer_epoch, v.timeout_ms, v.status)
    w.int32(len(v.partitions))
    for topic, partitions in sorted(v.partitions.items()):
        w.string(topic)
        w.int32(len(partitions))
        for p in sorted(partitions):
            w.int32(p)
    w.int64(v.last_update_ms)
    w.int64(v.start_ms)
    return bytes(w.buf)


def decode_txn_value(data: bytes | None) -> TxnValue | None:
    if data is None:
        return None
    r = Reader(bytes(data), "__transaction_state value")
    version = r.int16("version")
    if version not in (0, 1):
        raise r.fail(f"unknown value version {version} (known: 0-1)")
    r.flexible = version >= 1
    producer_id = r.int64("producer id")
    epoch = r.int16("producer epoch")
    timeout_ms = r.int32("timeout")
    status = r.int8("status")  # Kafka's int8 is signed: 255 would not be written back
    partitions: dict[str, list[int]] = {}
    count = r.length("partitions", 4)
    for _ in range(max(count, 0)):
        topic = r.string("topic")
        partitions[topic] = [r.int32("partition") for _ in range(r.array_len("partition ids"))]
        r.tags("partitions")
    last_update = r.int64("last update timestamp")
    start = r.int64("start timestamp")
    r.end()
    return TxnValue(producer_id, epoch, timeout_ms, status, partitions, last_update, start)
