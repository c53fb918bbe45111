"""Keys and values of __consumer_offsets against Kafka's schemas (OffsetCommitKey/Value,
GroupMetadataKey/Value), with the expected bytes written out by hand from the schemas."""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.coordinator.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)
from samsa.errors import CorruptRecordError


def i16(n: int) -> bytes:
    return struct.pack(">h", n)


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def i64(n: int) -> bytes:
    return struct.pack(">q", n)


def s(text: str | None) -> bytes:
    """Non-flexible (nullable) string: int16 length, UTF-8."""
    if text is None:
        return i16(-1)
    data = text.encode()
    return i16(len(data)) + data


def b(data: bytes) -> bytes:
    """Non-flexible bytes: int32 length."""
    return i32(len(data)) + data


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def cs(text: str | None) -> bytes:
    """Compact (nullable) string: unsigned varint N+1, 0 for null."""
    if text is None:
        return uvarint(0)
    data = text.encode()
    return uvarint(len(data) + 1) + data


def cb(data: bytes) -> bytes:
    return uvarint(len(data) + 1) + data


NO_TAGS = uvarint(0)
UNKNOWN_TAGS = uvarint(2) + uvarint(0) + uvarint(3) + b"xyz" + uvarint(7) + uvarint(0)

MEMBER = MemberValue(
    member_id="consumer-1-abc",
    group_instance_id="instance-1",
    client_id="consumer-1",
    client_host="/127.0.0.1",
    rebalance_timeout_ms=300000,
    session_timeout_ms=45000,
    subscription=b"\x00\x01sub",
    assignment=b"\x00\x01asg",
)
GROUP = GroupValue(
    protocol_type="consumer",
    generation=7,
    protocol="range",
    leader="consumer-1-abc",
    current_state_timestamp=1700000000000,
    members=[MEMBER],
)
OFFSET = OffsetValue(offset=42, leader_epoch=5, metadata="meta", commit_timestamp=1700000000123)


# -- keys ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key",
    [OffsetKey("g", "t", 0), OffsetKey("", "", -1), OffsetKey("grüppe 😀", "topic.x", 2**31 - 1)],
)
def test_offset_key_round_trip(key: OffsetKey) -> None:
    assert decode_key(encode_offset_key(key)) == key


@pytest.mark.parametrize("key", [GroupKey("my-group"), GroupKey(""), GroupKey("中文")])
def test_group_key_round_trip(key: GroupKey) -> None:
    assert decode_key(encode_group_key(key)) == key


def test_offset_key_golden() -> None:
    expected = i16(1) + s("my-group") + s("my-topic") + i32(3)
    assert encode_offset_key(OffsetKey("my-group", "my-topic", 3)) == expected


def test_offset_key_version_0_reads_like_version_1() -> None:
    data = i16(0) + s("g") + s("t") + i32(9)
    assert decode_key(data) == OffsetKey("g", "t", 9)


def test_group_key_golden() -> None:
    assert encode_group_key(GroupKey("my-group")) == i16(2) + s("my-group")


# -- OffsetCommitValue ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        OFFSET,
        OffsetValue(0, -1, "", 0),
        OffsetValue(2**63 - 1, 2**31 - 1, "x" * 1000 + "é", -(2**63)),
    ],
)
def test_offset_value_round_trip(value: OffsetValue) -> None:
    assert decode_offset_value(encode_offset_value(value)) == value


def test_offset_value_v3_golden() -> None:
    expected = i16(3) + i64(42) + i32(5) + s("meta") + i64(1700000000123)
    assert encode_offset_value(OFFSET) == expected


def test_offset_value_with_expire_timestamp_is_written_as_v1() -> None:
    """As Kafka: v1 carries the expire timestamp and has no leader epoch."""
    value = OffsetValue(42, 5, "meta", 100, expire_timestamp=200)
    data = encode_offset_value(value)
    assert data == i16(1) + i64(42) + s("meta") + i64(100) + i64(200)
    assert decode_offset_value(data) == OffsetValue(42, -1, "meta", 100, 200)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (i16(0) + i64(10) + s("m") + i64(99), OffsetValue(10, -1, "m", 99)),
        (i16(1) + i64(10) + s("m") + i64(99) + i64(199), OffsetValue(10, -1, "m", 99, 199)),
        (i16(2) + i64(10) + s("m") + i64(99), OffsetValue(10, -1, "m", 99)),
        (i16(3) + i64(10) + i32(4) + s("m") + i64(99), OffsetValue(10, 4, "m", 99)),
        (i16(4) + i64(10) + i32(4) + cs("m") + i64(99) + NO_TAGS, OffsetValue(10, 4, "m", 99)),
        (i16(4) + i64(10) + i32(4) + cs("") + i64(99) + UNKNOWN_TAGS, OffsetValue(10, 4, "", 99)),
    ],
    ids=["v0", "v1", "v2", "v3", "v4", "v4-unknown-tags"],
)
def test_offset_value_every_version(data: bytes, expected: OffsetValue) -> None:
    assert decode_offset_value(data) == expected


# -- GroupMetadataValue --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        GROUP,
        GroupValue("consumer", 0, None, None, -1, []),
        GroupValue(
            "connect",
            2**31 - 1,
            "sessioned",
            "m2",
            0,
            [
                MEMBER,
                MemberValue("m2", None, "", "", 0, 1, b"", b""),
                MemberValue("m3", "", "c😀", "h", -1, -1, bytes(range(256)), b"\x00"),
            ],
        ),
    ],
)
def test_group_value_round_trip(value: GroupValue) -> None:
    assert decode_group_value(encode_group_value(value)) == value


def test_group_value_v3_golden() -> None:
    expected = (
        i16(3)
        + s("consumer")
        + i32(7)
        + s("range")
        + s("consumer-1-abc")
        + i64(1700000000000)
        + i32(1)
        + s("consumer-1-abc")
        + s("instance-1")
        + s("consumer-1")
        + s("/127.0.0.1")
        + i32(300000)
        + i32(45000)
        + b(b"\x00\x01sub")
        + b(b"\x00\x01asg")
    )
    assert encode_group_value(GROUP) == expected


def test_group_value_v3_golden_nulls() -> None:
    value = GroupValue(
        "consumer", 1, None, None, 5, [MemberValue("m", None, "c", "h", 1, 2, b"", b"")]
    )
    expected = (
        i16(3) + s("consumer") + i32(1) + i16(-1) + i16(-1) + i64(5) + i32(1)
        + s("m") + i16(-1) + s("c") + s("h") + i32(1) + i32(2) + i32(0) + i32(0)
    )  # fmt: skip
    assert encode_group_value(value) == expected


def _member_v(version: int) -> bytes:
    """MEMBER as the schema lays it out in ``version``."""
    out = s("consumer-1-abc")
    if version >= 3:
        out += s("instance-1")
    out += s("consumer-1") + s("/127.0.0.1")
    if version >= 1:
        out += i32(300000)
    return out + i32(45000) + b(b"\x00\x01sub") + b(b"\x00\x01asg")


def _group_v(version: int) -> bytes:
    out = i16(version) + s("consumer") + i32(7) + s("range") + s("consumer-1-abc")
    if version >= 2:
        out += i64(1700000000000)
    return out + i32(1) + _member_v(version)


def test_group_value_v0() -> None:
    """v0 has no rebalance timeout (Kafka takes the session timeout), no state timestamp and
    no group instance id."""
    member = MemberValue(
        "consumer-1-abc", None, "consumer-1", "/127.0.0.1", 45000, 45000, b"\x00\x01sub",
        b"\x00\x01asg",
    )  # fmt: skip
    expected = GroupValue("consumer", 7, "range", "consumer-1-abc", -1, [member])
    assert decode_group_value(_group_v(0)) == expected


def test_group_value_v1() -> None:
    member = MemberValue(
        "consumer-1-abc", None, "consumer-1", "/127.0.0.1", 300000, 45000, b"\x00\x01sub",
        b"\x00\x01asg",
    )  # fmt: skip
    expected = GroupValue("consumer", 7, "range", "consumer-1-abc", -1, [member])
    assert decode_group_value(_group_v(1)) == expected


def test_group_value_v2() -> None:
    member = MemberValue(
        "consumer-1-abc", None, "consumer-1", "/127.0.0.1", 300000, 45000, b"\x00\x01sub",
        b"\x00\x01asg",
    )  # fmt: skip
    expected = GroupValue("consumer", 7, "range", "consumer-1-abc", 1700000000000, [member])
    assert decode_group_value(_group_v(2)) == expected


def test_group_value_v3_by_hand() -> None:
    assert decode_group_value(_group_v(3)) == GROUP


@pytest.mark.parametrize("tags", [NO_TAGS, UNKNOWN_TAGS], ids=["no-tags", "unknown-tags"])
def test_group_value_v4(tags: bytes) -> None:
    member = (
        cs("consumer-1-abc") + cs("instance-1") + cs("consumer-1") + cs("/127.0.0.1")
        + i32(300000) + i32(45000) + cb(b"\x00\x01sub") + cb(b"\x00\x01asg") + tags
    )  # fmt: skip
    other = cs("m2") + cs(None) + cs("") + cs("") + i32(0) + i32(1) + cb(b"") + cb(b"") + tags
    data = (
        i16(4) + cs("consumer") + i32(7) + cs("range") + cs("consumer-1-abc")
        + i64(1700000000000) + uvarint(3) + member + other + tags
    )  # fmt: skip
    expected = GroupValue(
        "consumer",
        7,
        "range",
        "consumer-1-abc",
        1700000000000,
        [MEMBER, MemberValue("m2", None, "", "", 0, 1, b"", b"")],
    )
    assert decode_group_value(data) == expected


def test_group_value_v4_null_protocol_and_leader() -> None:
    data = i16(4) + cs("consumer") + i32(0) + cs(None) + cs(None) + i64(-1) + uvarint(1) + NO_TAGS
    assert decode_group_value(data) == GroupValue("consumer", 0, None, None, -1, [])


# -- tombstones ----------------------------------------------------------------------------------


def test_tombstones_decode_to_none() -> None:
    assert decode_offset_value(None) is None
    assert decode_group_value(None) is None


# -- corrupt data --------------------------------------------------------------------------------

Decoder = Callable[[bytes], object]

VALID: list[tuple[Decoder, bytes]] = [
    (decode_key, encode_offset_key(OffsetKey("group", "topic", 1))),
    (decode_key, encode_group_key(GroupKey("group"))),
    (decode_offset_value, encode_offset_value(OFFSET)),
    (decode_offset_value, encode_offset_value(OffsetValue(1, -1, "m", 2, 3))),
    (decode_offset_value, i16(4) + i64(10) + i32(4) + cs("m") + i64(99) + UNKNOWN_TAGS),
    (decode_group_value, encode_group_value(GROUP)),
    (decode_group_value, _group_v(0)),
]


@pytest.mark.parametrize(("decode", "data"), VALID)
def test_every_truncation_is_corrupt(decode: Decoder, data: bytes) -> None:
    for end in range(len(data)):
        with pytest.raises(CorruptRecordError, match="truncated"):
            decode(data[:end])


@pytest.mark.parametrize(("decode", "data"), VALID)
def test_trailing_bytes_are_corrupt(decode: Decoder, data: bytes) -> None:
    with pytest.raises(CorruptRecordError, match="left over"):
        decode(data + b"\x00")


@pytest.mark.parametrize(
    ("decode", "data", "message"),
    [
        (decode_key, i16(3) + s("g"), "unknown version 3"),
        (decode_key, i16(-1) + s("g"), "unknown version -1"),
        (decode_offset_value, i16(5) + i64(1) + i32(0) + cs("") + i64(0) + NO_TAGS, "version 5"),
        (decode_offset_value, i16(-1), "unknown version -1"),
        (decode_group_value, i16(5), "unknown version 5"),
        (decode_key, i16(2) + i16(-1), "null in non-nullable group"),
        (decode_key, i16(2) + i16(-2), "negative length -2"),
        (decode_key, i16(2) + i16(1) + b"\xff", "invalid UTF-8"),
        (decode_offset_value, i16(3) + i64(1) + i32(0) + i16(-1) + i64(0), "non-nullable"),
        (decode_offset_value, i16(4) + i64(1) + i32(0) + cs(None) + i64(0) + NO_TAGS, "null"),
        (decode_offset_value, i16(4) + i64(1) + i32(0) + b"\xff" * 6, "varint longer"),
        (decode_group_value, i16(3) + s("c") + i32(0) + s(None) + s(None) + i64(0) + i32(-1),
         "null in non-nullable members"),
        (decode_group_value, i16(4) + cs("c") + i32(0) + cs(None) + cs(None) + i64(0) + uvarint(0),
         "null in non-nullable members"),
        (decode_group_value, i16(1) + s("c") + i32(0) + s(None) + s(None) + i32(1)
         + s("m") + s("c") + s("h") + i32(1) + i32(2) + i32(-1) + i32(0),
         "null in non-nullable subscription"),
        (decode_group_value, i16(3) + s("c") + i32(0) + s(None) + s(None) + i64(0) + i32(2**31 - 1),
         "truncated"),
    ],
)  # fmt: skip
def test_malformed_data_is_corrupt(decode: Decoder, data: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        decode(data)


@given(st.binary(max_size=64), st.integers(0, 5))
def test_arbitrary_bytes_never_raise_anything_else(tail: bytes, version: int) -> None:
    for decode in (decode_key, decode_offset_value, decode_group_value):
        try:
            decode(i16(version) + tail)
        except CorruptRecordError:
            pass


# -- partition_for -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "java_hash"),
    [  # String.hashCode() printed by a JVM (OpenJDK javac + java)
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("test-group", 627841412),
        ("my-group", -1906497762),
        ("console-consumer-12345", 158455506),
        ("connect-cluster", 1440343063),
        ("polygenelubricants", -(2**31)),  # Utils.abs(MIN_VALUE) is 0, not negative
        ("Aa", 2112),
        ("BB", 2112),
        ("é", 233),
        ("grüppe", -1233264812),
        ("😀", 1772899),  # one code point, two UTF-16 units: 0xD83D * 31 + 0xDE00
        ("grp-😀-中文", -1485308228),
    ],
)
def test_partition_for_matches_java(group: str, java_hash: int) -> None:
    """Kafka's Utils.abs: Math.abs, and 0 for Integer.MIN_VALUE (not hash & 0x7fffffff)."""
    expected_abs = 0 if java_hash == -(2**31) else abs(java_hash)
    for partitions in (1, 3, 50, 1000):
        assert partition_for(group, partitions) == expected_abs % partitions


@pytest.mark.parametrize(
    ("group", "partition"),
    [("", 0), ("a", 47), ("hello", 22), ("test-group", 12), ("my-group", 12),
     ("polygenelubricants", 0), ("😀", 49), ("grp-😀-中文", 28)],
)  # fmt: skip
def test_partition_for_default_50(group: str, partition: int) -> None:
    """Kafka's GroupMetadataManager.partitionFor: Utils.abs(hashCode()) % 50."""
    assert partition_for(group, 50) == partition


def test_partition_for_refuses_no_partitions() -> None:
    with pytest.raises(ValueError):
        partition_for("g", 0)
