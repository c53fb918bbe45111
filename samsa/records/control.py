"""Transaction markers: the control batches that commit or abort a transaction on a partition.

A control batch has the control and transactional attribute bits, the producer's id and epoch,
no sequence, and one record: key ``version int16 (0) | type int16`` (0 ABORT, 1 COMMIT) and
value ``version int16 (0) | coordinator epoch int32`` (INDEX.md section 5.4).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from samsa.errors import CorruptRecordError
from samsa.records.record import RecordInput, decode_records, encode_batch

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class Marker(NamedTuple):
    commit: bool
    coordinator_epoch: int


def encode_marker(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp: int
) -> bytes:
    record = RecordInput(_VALUE.pack(0, coordinator_epoch), _KEY.pack(0, COMMIT if commit else
                                                                       ABORT))
    return encode_batch([record], timestamp=timestamp, producer_id=producer_id,
                        producer_epoch=producer_epoch, transactional=True, control=True)


def read_marker(batch: bytes | memoryview) -> Marker | None:
    """The marker in a control batch; None for other control record types (KRaft's)."""
    for record in decode_records(batch):
        if record.key is None or len(record.key) < _KEY.size:
            raise CorruptRecordError("control record without a valid key")
        _, kind = _KEY.unpack_from(record.key)
        if kind not in (ABORT, COMMIT):
            return None
        epoch = -1
        if record.value is not None and len(record.value) >= _VALUE.size:
            epoch = _VALUE.unpack_from(record.value)[1]
        return Marker(kind == COMMIT, epoch)
    raise CorruptRecordError("control batch without a record")
