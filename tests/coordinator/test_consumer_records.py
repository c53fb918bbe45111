"""The consumer group records (KIP-848) in Kafka's formats: the bytes below were written by
Kafka 4.4.0's own generated classes (kafka-group-coordinator-4.4.0.jar,
org.apache.kafka.coordinator.group.generated.*: each key as its int16 record type and the key
message at version 0, each value as its version and the value message), and samsa must write
the same bytes and read them back, tagged fields included."""

from __future__ import annotations

import uuid

import pytest

from samsa.coordinator.consumer_records import (
    ClassicMemberMetadata,
    ConsumerKey,
    CurrentAssignmentValue,
    GroupEpochValue,
    MemberSubscriptionValue,
    PartitionMetadataValue,
    RegexValue,
    TargetAssignmentEpochValue,
    TargetAssignmentMemberValue,
    decode_consumer_key,
    decode_consumer_value,
    encode_consumer_key,
    encode_consumer_value,
)
from samsa.errors import CorruptRecordError

T1 = uuid.UUID("01020304-0506-0708-1112-131415161718")
T2 = uuid.UUID(int=((2**64 - 2) << 64) | 42)  # Uuid(-2L, 42L)

KEYS = [
    (ConsumerKey(3, "grp"), "00030003677270"),
    (ConsumerKey(5, "grp", "m1"), "0005000367727000026d31"),
    (ConsumerKey(6, "grp"), "00060003677270"),
    (ConsumerKey(7, "grp", "m1"), "0007000367727000026d31"),
    (ConsumerKey(8, "grp", "m1"), "0008000367727000026d31"),
    (ConsumerKey(16, "grp", "t.*"), "001000036772700003742e2a"),
]

VALUES = [
    (3, GroupEpochValue(7, -123456789), "000000000007010008fffffffff8a432eb"),
    (3, GroupEpochValue(7), "00000000000700"),
    (5, MemberSubscriptionValue("inst", None, "cid", "/127.0.0.1", ("a", "bb"), None, 300000,
                                "uniform"),
     "000005696e737400046369640b2f3132372e302e302e3103026103626200000493e008756e69666f726d00"),
    (5, MemberSubscriptionValue("", "", "cid", "h", (), "t.*", -1, "",
                                ClassicMemberMetadata(45000, (("range", b"\x01\x02"),))),
     "000001010463696402680104742e2affffffff01010011010000afc8020672616e67650301020000"),
    (6, TargetAssignmentEpochValue(9, 1700000000000), "0000000000090100080000018bcfe56800"),
    (7, TargetAssignmentMemberValue({T1: frozenset({0, 2})}),
     "000002010203040506070811121314151617180300000000000000020000"),
    (8, CurrentAssignmentValue(10, 9, 1, {T1: frozenset({1, 3})}, {T2: frozenset({5})}),
     "00000000000a000000090102010203040506070811121314151617180300000001000000030002ffffffff"
     "fffffffe000000000000002a02000000050000"),
    (16, RegexValue(("t1", "t2"), 5, 1700000000001),
     "00000303743103743200000000000000050000018bcfe5680100"),
]


@pytest.mark.parametrize(("key", "hex_bytes"), KEYS)
def test_keys_are_kafkas_bytes(key: ConsumerKey, hex_bytes: str) -> None:
    assert encode_consumer_key(key).hex() == hex_bytes
    assert decode_consumer_key(bytes.fromhex(hex_bytes)) == key


@pytest.mark.parametrize(("kind", "value", "hex_bytes"), VALUES)
def test_values_are_kafkas_bytes(kind: int, value: object, hex_bytes: str) -> None:
    assert encode_consumer_value(value).hex() == hex_bytes  # type: ignore[arg-type]
    assert decode_consumer_value(kind, bytes.fromhex(hex_bytes)) == value


def test_kafka_44s_assignment_epochs_are_read() -> None:
    """Kafka 4.4 tags each assigned topic with its partitions' assignment epochs."""
    data = bytes.fromhex("00000000000a0000000900020102030405060708111213141516171803000000010000"
                         "000301000903000000040000000a0100")
    value = decode_consumer_value(8, data)
    assert isinstance(value, CurrentAssignmentValue)
    assert value.assigned == {T1: frozenset({1, 3})}
    assert value.pending_revocation == {}
    assert value.assignment_epochs == {(T1, 1): 4, (T1, 3): 10}


def test_partition_metadata_of_kafka_4_0_is_read() -> None:
    value = bytes.fromhex("0000") + bytes([2]) + T1.bytes + bytes([2]) + b"t" + \
        (3).to_bytes(4, "big") + bytes([1, 0, 0])
    decoded = decode_consumer_value(4, value)
    assert decoded == PartitionMetadataValue(((T1, "t", 3),))


def test_a_tombstone_is_none() -> None:
    assert decode_consumer_value(8, None) is None


@pytest.mark.parametrize("data", [
    "0000",  # no fields
    "0001000000070000",  # version 1
    "00000000000700ff",  # bytes after the record
    "000000000007",  # no tagged fields section
])
def test_broken_values_are_corrupt_records(data: str) -> None:
    with pytest.raises(CorruptRecordError):
        decode_consumer_value(3, bytes.fromhex(data))


def test_broken_keys_are_corrupt_records() -> None:
    for data in ("0003", "000300", "0063000367727000", "0005000367727000"):
        with pytest.raises(CorruptRecordError):
            decode_consumer_key(bytes.fromhex(data))
