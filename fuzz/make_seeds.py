"""Seed corpora for the fuzz targets: small valid inputs the fuzzer mutates from.

    python fuzz/make_seeds.py [OUT]        # OUT defaults to tests/fuzz_corpus

writes ``OUT/<target>/seed-<name>`` for every target:

* ``requests``: a request frame (the bytes after the size prefix) of every API the broker
  advertises, at its lowest and highest version, with every field zero or empty; and real
  requests on topic ``t`` (Produce with a batch, Fetch, Metadata, ListOffsets, a group's
  JoinGroup / SyncGroup / Heartbeat / OffsetCommit / OffsetFetch, a transaction's
  InitProducerId / AddPartitionsToTxn / EndTxn, CreateTopics, DescribeConfigs, ...).
* ``records``: a mode byte (see fuzz_records.py) and the records of a produce: a plain batch,
  one of each codec, idempotent and transactional batches, two batches, keyless records.
* ``compression``: a batch of each codec (see fuzz_compression.py).
* ``coordinator_records``: a selector byte (see fuzz_coordinator_records.py) and a real
  ``__consumer_offsets`` key or value (every version, flexible v4 included) or
  ``__transaction_state`` key or value (v0 and the flexible v1).

The kept corpus (tests/fuzz_corpus) is these seeds plus what fuzzing added, merged with
``-merge=1``; run this again after changing a format, then merge.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import gzip
import struct
import sys
import types
import typing
import uuid
from pathlib import Path
from typing import Any

from kio.index import load_request_schema
from kio.serial import entity_writer

from samsa.coordinator.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)
from samsa.coordinator.txn_records import TxnValue, encode_txn_key, encode_txn_value
from samsa.handlers import load_handlers
from samsa.handlers.registry import APIS
from samsa.protocol.codec import encode_message
from samsa.records import compression
from samsa.records.batch import Compression
from samsa.records.control import encode_marker
from samsa.records.record import RecordInput, encode_batch

ROOT = Path(__file__).resolve().parent.parent
NOW = 1_700_000_000_000

# -- request frames ------------------------------------------------------------------------------

_ZERO: dict[str, Any] = {
    "int8": 0, "int16": 0, "uint16": 0, "int32": 0, "uint32": 0, "int64": 0, "float64": 0.0,
    "bool": False, "string": "", "bytes": b"", "records": None, "error_code": 0,
    "uuid": uuid.UUID(int=0), "timedelta_i32": datetime.timedelta(0),
    "timedelta_i64": datetime.timedelta(0),
    "datetime_i64": datetime.datetime.fromtimestamp(0, tz=datetime.UTC),
}


def _nested(tp: Any) -> tuple[Any, bool, bool]:
    """(entity class or None, is a sequence, is nullable) of a field's type."""
    nullable = False
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(tp))
        tp = args[0] if len(args) == 1 else tp
    many = typing.get_origin(tp) is tuple
    element = typing.get_args(tp)[0] if many else tp
    return (element if dataclasses.is_dataclass(element) else None), many, nullable


def entity(cls: Any, data: dict[str, Any] | None = None) -> Any:
    """A kio entity from a dict of (some of) its fields; the rest zero, empty or default.
    Nested dicts become nested entities, ints become timedeltas where kio wants them."""
    data = data or {}
    unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise TypeError(f"{cls.__qualname__} has no field {', '.join(sorted(unknown))}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        nested, many, nullable = _nested(f.type)
        kafka_type = f.metadata.get("kafka_type", "")
        if f.name in data:
            value = data[f.name]
            if nested is not None and many and value is not None:
                value = tuple(entity(nested, v) for v in value)
            elif nested is not None and isinstance(value, dict):
                value = entity(nested, value)
            elif isinstance(value, list):
                value = tuple(value)
            elif kafka_type.startswith("timedelta") and isinstance(value, int):
                value = datetime.timedelta(milliseconds=value)
        elif f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        elif many:
            value = ()
        elif nested is not None:
            value = None if nullable else entity(nested)
        else:
            value = None if nullable else _ZERO[kafka_type]
        kwargs[f.name] = value
    return cls(**kwargs)


def request_frame(key: int, version: int, body: dict[str, Any] | None = None,
                  correlation_id: int = 7) -> bytes:
    schema = load_request_schema(key, version)
    header_schema = schema.__header_schema__
    chunks: list[bytes] = []

    class Out:
        write = staticmethod(lambda b: chunks.append(bytes(b)))

    entity_writer(header_schema)(Out, header_schema(
        request_api_key=key, request_api_version=version, correlation_id=correlation_id,
        client_id="fuzz"))
    return b"".join(chunks) + encode_message(entity(schema, body))


def _batch(n: int = 2, **kwargs: Any) -> bytes:
    records = [RecordInput(b"value-%d" % i, b"key-%d" % i, headers=[("h", b"x")])
               for i in range(n)]
    return encode_batch(records, timestamp=NOW, **kwargs)


def request_seeds() -> dict[str, bytes]:
    load_handlers()
    seeds: dict[str, bytes] = {}
    for api in sorted(APIS.values(), key=lambda a: a.key):
        for version in sorted({api.min_version, api.max_version}):
            seeds[f"{api.name}-v{version}-empty"] = request_frame(api.key, version)
    # ApiVersions beyond what the broker knows: answered v0 UNSUPPORTED_VERSION (KIP-511)
    seeds["ApiVersions-v9-unknown"] = struct.pack(">hhi", 18, 9, 7) + b"\x00\x04fuzz\x00\x00"
    t = "t"
    group = {"group_id": "g", "generation_id": 1, "member_id": "m"}
    real: list[tuple[str, int, int, dict[str, Any]]] = [
        ("Produce", 0, 3, {"acks": 1, "timeout": 1000, "topic_data": [
            {"name": t, "partition_data": [{"index": 0, "records": _batch()}]}]}),
        ("Produce", 0, 9, {"acks": -1, "timeout": 1000, "topic_data": [
            {"name": t, "partition_data": [
                {"index": 0, "records": _batch(compression_type=Compression.GZIP)},
                {"index": 1, "records": _batch(3, producer_id=1000, producer_epoch=0,
                                               base_sequence=0)}]}]}),
        ("Produce", 0, 11, {"transactional_id": "tx", "acks": -1, "timeout": 1000,
                            "topic_data": [{"name": t, "partition_data": [
                                {"index": 0, "records": _batch(
                                    1, producer_id=1000, producer_epoch=0, base_sequence=0,
                                    transactional=True)}]}]}),
        ("Fetch", 1, 4, {"replica_id": -1, "max_wait": 0, "min_bytes": 1,
                         "max_bytes": 1 << 20, "isolation_level": 1, "topics": [
                             {"topic": t, "partitions": [
                                 {"partition": 0, "fetch_offset": 0,
                                  "partition_max_bytes": 1 << 20}]}]}),
        ("Fetch", 1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 1,
                          "max_bytes": 1 << 20, "session_epoch": -1, "topics": [
                              {"topic": t, "partitions": [
                                  {"partition": 1, "fetch_offset": 0, "log_start_offset": -1,
                                   "current_leader_epoch": -1,
                                   "partition_max_bytes": 1 << 20}]}],
                          "forgotten_topics_data": [], "rack_id": ""}),
        ("Metadata", 3, 1, {"topics": [{"name": t}]}),
        ("Metadata", 3, 12, {"topics": [{"name": t}, {"name": "missing"}],
                             "allow_auto_topic_creation": False}),
        ("ListOffsets", 2, 1, {"replica_id": -1, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "timestamp": -1}]}]}),
        ("ListOffsets", 2, 8, {"replica_id": -1, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "timestamp": NOW,
                                        "current_leader_epoch": -1},
                                       {"partition_index": 1, "timestamp": -3}]}]}),
        ("OffsetForLeaderEpoch", 23, 4, {"replica_id": -1, "topics": [
            {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                         "leader_epoch": 0}]}]}),
        ("DeleteRecords", 21, 2, {"timeout": 1000, "topics": [
            {"name": t, "partitions": [{"partition_index": 1, "offset": 1}]}]}),
        ("FindCoordinator", 10, 3, {"key": "g", "key_type": 0}),
        ("FindCoordinator", 10, 6, {"key_type": 1, "coordinator_keys": ["tx"]}),
        ("JoinGroup", 11, 5, {"group_id": "g", "session_timeout": 10000,
                              "rebalance_timeout": 10000, "member_id": "",
                              "protocol_type": "consumer", "protocols": [
                                  {"name": "range", "metadata": b"\x00\x01\x00\x00\x00\x01"
                                                                b"\x00\x01t\xff\xff\xff\xff"}]}),
        ("JoinGroup", 11, 9, {"group_id": "g", "session_timeout": 10000,
                              "rebalance_timeout": 10000, "member_id": "m",
                              "group_instance_id": "i", "protocol_type": "consumer",
                              "protocols": [{"name": "range", "metadata": b""}]}),
        ("SyncGroup", 14, 5, {**group, "protocol_type": "consumer", "protocol_name": "range",
                              "assignments": [{"member_id": "m", "assignment": b"\x00"}]}),
        ("Heartbeat", 12, 4, dict(group)),
        ("LeaveGroup", 13, 5, {"group_id": "g", "members": [{"member_id": "m"}]}),
        ("OffsetCommit", 8, 2, {"group_id": "g", "generation_id_or_member_epoch": 1,
                                "member_id": "m", "retention_time": -1, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "committed_offset": 1,
                                        "committed_metadata": "md"}]}]}),
        ("OffsetCommit", 8, 9, {"group_id": "g", "generation_id_or_member_epoch": -1,
                                "member_id": "", "topics": [
                                    {"name": t, "partitions": [
                                        {"partition_index": 1, "committed_offset": 5,
                                         "committed_leader_epoch": -1}]}]}),
        ("OffsetFetch", 9, 7, {"group_id": "g", "topics": [
            {"name": t, "partition_indexes": [0, 1]}], "require_stable": True}),
        ("OffsetFetch", 9, 9, {"groups": [{"group_id": "g", "topics": None}]}),
        ("OffsetDelete", 47, 0, {"group_id": "g", "topics": [
            {"name": t, "partitions": [{"partition_index": 0}]}]}),
        ("DescribeGroups", 15, 5, {"groups": ["g"], "include_authorized_operations": True}),
        ("DeleteGroups", 42, 2, {"groups_names": ["g"]}),
        ("InitProducerId", 22, 4, {"transactional_id": "tx", "transaction_timeout": 60000,
                                   "producer_id": -1, "producer_epoch": -1}),
        ("AddPartitionsToTxn", 24, 3, {"v3_and_below_transactional_id": "tx",
                                       "v3_and_below_producer_id": 1000,
                                       "v3_and_below_producer_epoch": 0,
                                       "v3_and_below_topics": [
                                           {"name": t, "partitions": [0, 1]}]}),
        ("AddOffsetsToTxn", 25, 3, {"transactional_id": "tx", "producer_id": 1000,
                                    "producer_epoch": 0, "group_id": "g"}),
        ("TxnOffsetCommit", 28, 3, {"transactional_id": "tx", "group_id": "g",
                                    "producer_id": 1000, "producer_epoch": 0,
                                    "generation_id": -1, "member_id": "", "topics": [
                                        {"name": t, "partitions": [
                                            {"partition_index": 0, "committed_offset": 3,
                                             "committed_leader_epoch": -1}]}]}),
        ("EndTxn", 26, 3, {"transactional_id": "tx", "producer_id": 1000,
                           "producer_epoch": 0, "committed": True}),
        ("WriteTxnMarkers", 27, 1, {"markers": [
            {"producer_id": 1000, "producer_epoch": 0, "transaction_result": False,
             "topics": [{"name": t, "partition_indexes": [0]}],
             "coordinator_epoch": 0}]}),
        ("DescribeTransactions", 65, 0, {"transactional_ids": ["tx"]}),
        ("ListTransactions", 66, 1, {"state_filters": ["Ongoing"], "producer_id_filters": [],
                                     "duration_filter": -1}),
        ("DescribeProducers", 61, 0, {"topics": [{"name": t, "partition_indexes": [0, 1]}]}),
        ("CreateTopics", 19, 7, {"timeout": 1000, "topics": [
            {"name": "u", "num_partitions": 1, "replication_factor": 1, "configs": [
                {"name": "cleanup.policy", "value": "compact"}]}]}),
        ("CreateTopics", 19, 2, {"timeout": 1000, "validate_only": True, "topics": [
            {"name": "v", "num_partitions": -1, "replication_factor": -1}]}),
        ("CreatePartitions", 37, 3, {"timeout": 1000, "topics": [
            {"name": "u", "count": 2, "assignments": None}]}),
        ("DeleteTopics", 20, 6, {"timeout": 1000, "topics": [{"name": "u"}]}),
        ("DescribeConfigs", 32, 4, {"resources": [
            {"resource_type": 2, "resource_name": t, "configuration_keys": None},
            {"resource_type": 4, "resource_name": "0",
             "configuration_keys": ["log.retention.ms"]}]}),
        ("AlterConfigs", 33, 2, {"resources": [
            {"resource_type": 2, "resource_name": t, "configs": [
                {"name": "retention.ms", "value": "86400000"}]}]}),
        ("IncrementalAlterConfigs", 44, 1, {"resources": [
            {"resource_type": 2, "resource_name": t, "configs": [
                {"name": "max.message.bytes", "config_operation": 0, "value": "100000"}]}]}),
        ("ElectLeaders", 43, 2, {"election_type": 0, "topic_partitions": [
            {"topic": t, "partitions": [0]}], "timeout": 1000}),
        ("ListPartitionReassignments", 46, 0, {"timeout": 1000, "topics": None}),
        ("DescribeCluster", 60, 1, {"endpoint_type": 1}),
    ]
    for name, key, version, body in real:
        seeds[f"{name}-v{version}"] = request_frame(key, version, body)
    return seeds


# -- records ------------------------------------------------------------------------------------


def record_seeds() -> dict[str, bytes]:
    """Mode byte 0 (leader append, fix CRCs) + the records of a produce."""
    keyless = encode_batch([RecordInput(b"v")], timestamp=NOW)
    seeds = {
        "plain": _batch(),
        "idempotent": _batch(2, producer_id=7, producer_epoch=0, base_sequence=0),
        "transactional": _batch(1, producer_id=8, producer_epoch=0, base_sequence=0,
                                transactional=True),
        "two-batches": _batch(1) + _batch(3),
        "keyless": keyless,
        "marker": encode_marker(8, 0, True, 0, NOW),
    }
    for codec in Compression:
        if codec != Compression.NONE:
            seeds[codec.name.lower()] = _batch(3, compression_type=codec)
    out = {f"{name}": b"\x00" + data for name, data in seeds.items()}
    out["compact-keyless"] = b"\x01" + keyless  # mode 1: a compacted log
    out["follower-two-batches"] = b"\x04" + _batch(1) + _batch(2, base_offset=1)
    return out


def compression_seeds() -> dict[str, bytes]:
    """Whole batches, one per codec, empty and with headers."""
    seeds = {}
    for codec in Compression:
        seeds[codec.name.lower()] = _batch(3, compression_type=codec)
    seeds["none-null-key"] = encode_batch([RecordInput(None)], timestamp=NOW)
    seeds["zstd-big"] = encode_batch([RecordInput(b"x" * 4000, b"k")], timestamp=NOW,
                                     compression_type=Compression.ZSTD)
    seeds["marker"] = encode_marker(8, 0, False, 3, NOW)
    return seeds


# -- coordinator records ----------------------------------------------------------------------


def _flexible_offset_value() -> bytes:
    """OffsetCommitValue v4 (compact strings, tagged fields), as Kafka 3.x+ may write."""
    return (struct.pack(">hqi", 4, 42, 3) + b"\x03md" + struct.pack(">q", NOW)
            + b"\x01\x00\x02zz")  # one tagged field (tag 0, 2 bytes)


def _flexible_group_value() -> bytes:
    member = (b"\x02m" + b"\x00" + b"\x02c" + b"\x02h" + struct.pack(">ii", 300, 100)
              + b"\x02s" + b"\x02a" + b"\x00")
    return (struct.pack(">h", 4) + b"\x09consumer" + struct.pack(">i", 5) + b"\x06range"
            + b"\x02m" + struct.pack(">q", NOW) + b"\x02" + member + b"\x00")


def _flexible_txn_value() -> bytes:
    """TransactionLogValue v1 (compact arrays, tagged fields)."""
    return (struct.pack(">hqhib", 1, 1000, 2, 60000, 1) + b"\x02" + b"\x02t" + b"\x03"
            + struct.pack(">ii", 0, 1) + b"\x00" + struct.pack(">qq", NOW, NOW) + b"\x00")


def coordinator_record_seeds() -> dict[str, bytes]:
    member = MemberValue("m", "i", "c", "/127.0.0.1", 300000, 10000, b"sub", b"assign")
    group = GroupValue("consumer", 5, "range", "m", NOW, [member])
    seeds = {
        "offset-key": (0, encode_offset_key(OffsetKey("g", "t", 3))),
        "offset-key-v0": (0, struct.pack(">h", 0) + encode_offset_key(OffsetKey("g", "t", 0))[2:]),
        "group-key": (0, encode_group_key(GroupKey("g"))),
        "offset-value-v3": (1, encode_offset_value(OffsetValue(42, 3, "md", NOW))),
        "offset-value-v1": (1, encode_offset_value(OffsetValue(42, -1, "", NOW, NOW + 1))),
        "offset-value-v0": (1, struct.pack(">hq", 0, 42) + b"\x00\x02md" + struct.pack(">q", NOW)),
        "offset-value-v4": (1, _flexible_offset_value()),
        "group-value-v3": (2, encode_group_value(group)),
        "group-value-v4": (2, _flexible_group_value()),
        "txn-key": (3, encode_txn_key("tx")),
        "txn-value-v0": (4, encode_txn_value(TxnValue(1000, 2, 60000, 1, {"t": [0, 1]}, NOW,
                                                      NOW))),
        "txn-value-v1": (4, _flexible_txn_value()),
    }
    # v0 group values have no currentStateTimestamp and no groupInstanceId: strip them
    v0 = encode_group_value(GroupValue("consumer", 1, None, None, -1, []))
    seeds["group-value-v0"] = (2, struct.pack(">h", 0) + v0[2:-12] + v0[-4:])
    return {name: bytes([selector]) + data for name, (selector, data) in seeds.items()}


TARGETS = {
    "requests": request_seeds,
    "records": record_seeds,
    "compression": compression_seeds,
    "coordinator_records": coordinator_record_seeds,
}


class _ReproducibleGzip:
    """gzip with a zero mtime (as Kafka's Java producer writes it), so the seeds are the same
    bytes on every run of this script."""

    compress = staticmethod(functools.partial(gzip.compress, mtime=0))
    decompress = staticmethod(gzip.decompress)


def write(out: Path) -> int:
    compression.gzip = _ReproducibleGzip  # type: ignore[assignment]
    written = 0
    for target, make in TARGETS.items():
        directory = out / target
        directory.mkdir(parents=True, exist_ok=True)
        for name, data in make().items():
            path = directory / f"seed-{name}"
            if not path.exists() or path.read_bytes() != data:
                path.write_bytes(data)
                written += 1
    return written


if __name__ == "__main__":
    target_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "fuzz_corpus"
    print(f"{write(target_dir)} seed files written under {target_dir}")
