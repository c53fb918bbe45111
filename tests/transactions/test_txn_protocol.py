"""Transactions at the protocol level: raw Kafka frames (kio entities at explicit versions) sent
to a samsa broker over TCP, checking Kafka's error codes for bad input and for requests made in
the wrong transaction state (KIP-98, KIP-360, KIP-447, KIP-664).

Every test has a broker of its own; every socket read has a timeout and every retry loop a
deadline. Batch headers, control record keys and DescribeTransactions responses are decoded
here with ``struct`` (Kafka's layouts); samsa's encode_batch / decode_records only build and
split records.
"""

from __future__ import annotations

import dataclasses
import struct
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka_frames import FrameClient, encode_request
from kio.schema.errors import ErrorCode

import samsa
from samsa.records.record import RecordInput, decode_records, encode_batch

pytestmark = pytest.mark.timeout(60)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH = 0, 1, 2, 3, 8, 9
FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP, API_VERSIONS, CREATE_TOPICS = 10, 11, 14, 18, 19
INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66

WAIT_S = 10.0
OFFSETS_PARTITIONS = 5  # __consumer_offsets partitions of the test brokers
OFFSETS_TOPIC = "__consumer_offsets"
# Record timestamps: recent, so that a marker (stamped now) does not roll the segment by time.
BASE_TS = time.time_ns() // 1_000_000
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST = -1

NONE = ErrorCode.none
FENCED = ErrorCode.producer_fenced
BAD_EPOCH = ErrorCode.invalid_producer_epoch
BAD_MAPPING = ErrorCode.invalid_producer_id_mapping
BAD_STATE = ErrorCode.invalid_txn_state

# The first version of each API that knows PRODUCER_FENCED; older ones get INVALID_PRODUCER_EPOCH.
FENCED_BY_VERSION = {
    INIT_PRODUCER_ID: [(3, BAD_EPOCH), (4, FENCED)],
    ADD_PARTITIONS: [(0, BAD_EPOCH), (1, BAD_EPOCH), (2, FENCED), (3, FENCED)],
    ADD_OFFSETS: [(0, BAD_EPOCH), (1, BAD_EPOCH), (2, FENCED), (3, FENCED)],
    END_TXN: [(0, BAD_EPOCH), (1, BAD_EPOCH), (2, FENCED), (3, FENCED)],
}

TP = tuple[str, int]
_SIZE = struct.Struct(">i")
# RecordBatch v2 header: base offset, length, leader epoch, magic, crc, attributes,
# last offset delta, base timestamp, max timestamp, producer id, producer epoch, base sequence,
# record count.
_BATCH = struct.Struct(">qiibIhiqqqhii")
_TRANSACTIONAL, _CONTROL = 0x10, 0x20
ABORT, COMMIT = 0, 1  # control record types


def java_hash(key: str) -> int:
    """String.hashCode() of an ASCII string, as a signed int32."""
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_partition_for(key: str, partitions: int) -> int:
    """Kafka's coordinator partition of a group or transactional id:
    Utils.abs(key.hashCode()) % partitions, where Utils.abs(n) is
    (n == Integer.MIN_VALUE) ? 0 : Math.abs(n) (clients/.../common/utils/Utils.java)."""
    h = java_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# --- record batches ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Txn:
    """A transactional id with the producer id and epoch a request claims."""

    txn_id: str
    pid: int
    epoch: int

    def at(self, epoch: int) -> Txn:
        return dataclasses.replace(self, epoch=epoch)


@dataclasses.dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    control: bool
    keys: tuple[bytes | None, ...]
    values: tuple[bytes | None, ...]

    @property
    def control_type(self) -> int:
        """ABORT or COMMIT: the type in a control record's key (int16 version, int16 type)."""
        assert self.control and len(self.keys) == 1, self
        key = self.keys[0]
        assert key is not None and len(key) == 4, key
        version, kind = struct.unpack(">hh", key)
        assert version == 0, key
        return kind


def batches(data: bytes | None) -> list[Batch]:
    """The whole batches in a fetched region (a partial tail batch is dropped)."""
    out: list[Batch] = []
    data = bytes(data or b"")
    pos = 0
    while pos + _BATCH.size <= len(data):
        (base, length, _epoch, magic, _crc, attrs, delta, _ts, _max_ts, pid, pepoch, seq,
         _count) = _BATCH.unpack_from(data, pos)
        end = pos + 12 + length
        if end > len(data):
            break
        assert magic == 2, f"magic {magic} at offset {base}"
        records = list(decode_records(data[pos:end]))
        out.append(Batch(base, base + delta, pid, pepoch, seq, bool(attrs & _TRANSACTIONAL),
                         bool(attrs & _CONTROL), tuple(r.key for r in records),
                         tuple(r.value for r in records)))
        pos = end
    return out


def data_batch(values: Sequence[bytes], txn: Txn | None = None, seq: int = 0,
               transactional: bool = True, control: bool = False) -> bytes:
    """A producer's batch: plain without ``txn``; else with its producer id and epoch."""
    records = [RecordInput(v) for v in values]
    if txn is None:
        return encode_batch(records, timestamp=BASE_TS)
    return encode_batch(records, timestamp=BASE_TS, producer_id=txn.pid,
                        producer_epoch=txn.epoch, base_sequence=seq,
                        transactional=transactional, control=control)


# --- DescribeTransactions v0 responses -----------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TxnDescription:
    error_code: ErrorCode
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: tuple[tuple[str, tuple[int, ...]], ...]


class _Reader:
    """Kafka's flexible-version primitives over one frame; running past its end fails."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def count(self) -> int:
        """A compact array's length (0 on the wire is null, refused here)."""
        n = self.uvarint() - 1
        assert 0 <= n <= len(self.data) - self.pos, f"bad count {n} at {self.pos}"
        return n

    def string(self) -> str:
        n = self.count()
        text = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return text

    def no_tags(self) -> None:
        assert self.uvarint() == 0, "unexpected tagged fields"


def decode_describe_transactions(frame: bytes) -> tuple[int, list[TxnDescription]]:
    """(correlation id, states) of a DescribeTransactions v0 response (header v1)."""
    r = _Reader(frame)
    corr = r.take(">i")
    r.no_tags()
    r.take(">i")  # throttle time
    states = []
    for _ in range(r.count()):
        code, txn_id, state = ErrorCode(r.take(">h")), r.string(), r.string()
        timeout, start, pid, epoch = r.take(">i"), r.take(">q"), r.take(">q"), r.take(">h")
        topics = []
        for _ in range(r.count()):
            topic = r.string()
            topics.append((topic, tuple(r.take(">i") for _ in range(r.count()))))
            r.no_tags()
        r.no_tags()
        states.append(TxnDescription(code, txn_id, state, timeout, start, pid, epoch,
                                     tuple(topics)))
    r.no_tags()
    assert r.pos == len(frame), f"{len(frame) - r.pos} bytes left"
    return corr, states


# --- the raw client ------------------------------------------------------------------------------


class Raw(FrameClient):
    """FrameClient with the requests these tests send."""

    def __init__(self, port: int, timeout: float = WAIT_S) -> None:
        super().__init__(("127.0.0.1", port), timeout)

    # topics and data

    def create_topic(self, name: str, partitions: int = 1) -> None:
        body = {"topics": [{"name": name, "num_partitions": partitions,
                            "replication_factor": 1, "assignments": [], "configs": []}],
                "timeout": 10_000, "validate_only": False}
        result = self.request(CREATE_TOPICS, 5, body).topics[0]
        assert result.error_code == NONE, result

    def topic_exists(self, name: str) -> bool:
        response = self.request(METADATA, 8, {
            "topics": [{"name": name}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})
        return response.topics[0].error_code == NONE

    def produce(self, topic: str, partition: int, records: bytes, txn_id: str | None = None,
                version: int = 9) -> Any:
        """The partition response of a one-partition produce (acks=-1)."""
        response = self.request(PRODUCE, version, {
            "transactional_id": txn_id, "acks": -1, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": records}]}]})
        return response.responses[0].partition_responses[0]

    def fetch(self, topic: str, partition: int = 0, offset: int = 0,
              isolation: int = READ_UNCOMMITTED, version: int = 11) -> Any:
        """The partition data of a one-partition fetch that does not wait."""
        response = self.request(FETCH, version, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 16 << 20,
            "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "topic_id": None, "partitions": [{
                "partition": partition, "current_leader_epoch": -1, "fetch_offset": offset,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 16 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        if version >= 7:
            assert response.error_code == NONE, response
        data = response.responses[0].partitions[0]
        assert data.error_code == NONE, data
        return data

    def log(self, topic: str, partition: int = 0) -> list[Batch]:
        """Every batch of a partition up to its high watermark (read_uncommitted; a fetch may
        stop at a segment's end, so fetch again from there)."""
        out: list[Batch] = []
        offset, deadline = 0, time.monotonic() + WAIT_S
        while True:
            data = self.fetch(topic, partition, offset)
            out += batches(data.records)
            offset = out[-1].last_offset + 1 if out else 0
            if offset >= data.high_watermark:
                return out
            assert time.monotonic() < deadline, f"no batches past offset {offset}"

    def list_offset(self, topic: str, partition: int = 0, isolation: int = READ_UNCOMMITTED,
                    version: int = 5) -> int:
        response = self.request(LIST_OFFSETS, version, {
            "replica_id": -1, "isolation_level": isolation, "topics": [{
                "name": topic, "partitions": [{"partition_index": partition,
                                               "current_leader_epoch": -1,
                                               "timestamp": LATEST}]}]})
        result = response.topics[0].partitions[0]
        assert result.error_code == NONE, result
        return result.offset

    # transactions

    def init_pid(self, txn_id: str | None, timeout_ms: int = 60_000, *, version: int = 4,
                 pid: int = -1, epoch: int = -1) -> Any:
        return self.request(INIT_PRODUCER_ID, version, {
            "transactional_id": txn_id, "transaction_timeout": timeout_ms,
            "producer_id": pid, "producer_epoch": epoch})

    def begin(self, txn_id: str, timeout_ms: int = 60_000) -> Txn:
        """InitProducerId for ``txn_id`` (no expected epoch): the producer's identity."""
        response = self.init_pid(txn_id, timeout_ms)
        assert response.error_code == NONE, response
        return Txn(txn_id, response.producer_id, response.producer_epoch)

    def init_retrying(self, txn_id: str, timeout_ms: int = 60_000) -> Any:
        """InitProducerId as a Kafka client sends it: retried while the coordinator answers
        CONCURRENT_TRANSACTIONS (it is aborting the previous producer's transaction)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            response = self.init_pid(txn_id, timeout_ms)
            if response.error_code != ErrorCode.concurrent_transactions:
                return response
            assert time.monotonic() < deadline, "InitProducerId kept CONCURRENT_TRANSACTIONS"
            time.sleep(0.05)

    def add_partitions(self, txn: Txn, parts: dict[str, Sequence[int]], version: int = 3
                       ) -> dict[TP, ErrorCode]:
        response = self.request(ADD_PARTITIONS, version, {
            "v3_and_below_transactional_id": txn.txn_id,
            "v3_and_below_producer_id": txn.pid, "v3_and_below_producer_epoch": txn.epoch,
            "v3_and_below_topics": [{"name": t, "partitions": list(ps)}
                                    for t, ps in parts.items()]})
        codes = {(t.name, p.partition_index): p.partition_error_code
                 for t in response.results_by_topic_v3_and_below
                 for p in t.results_by_partition}
        assert sorted(codes) == sorted((t, p) for t, ps in parts.items() for p in ps), codes
        return codes

    def add_offsets(self, txn: Txn, group: str, version: int = 3) -> ErrorCode:
        return self.request(ADD_OFFSETS, version, {
            "transactional_id": txn.txn_id, "producer_id": txn.pid,
            "producer_epoch": txn.epoch, "group_id": group}).error_code

    def end_txn(self, txn: Txn, commit: bool, version: int = 3) -> ErrorCode:
        return self.request(END_TXN, version, {
            "transactional_id": txn.txn_id, "producer_id": txn.pid,
            "producer_epoch": txn.epoch, "committed": commit}).error_code

    def txn_offset_commit(self, txn: Txn, group: str, offsets: dict[TP, int], *,
                          version: int = 3, member_id: str = "", generation: int = -1
                          ) -> dict[TP, ErrorCode]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": offset,
                "committed_leader_epoch": -1, "committed_metadata": "txn"})
        response = self.request(TXN_OFFSET_COMMIT, version, {
            "transactional_id": txn.txn_id, "group_id": group, "producer_id": txn.pid,
            "producer_epoch": txn.epoch, "generation_id": generation, "member_id": member_id,
            "group_instance_id": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        codes = {(t.name, p.partition_index): p.error_code
                 for t in response.topics for p in t.partitions}
        assert sorted(codes) == sorted(offsets), codes
        return codes

    def describe_txns(self, *txn_ids: str) -> list[TxnDescription]:
        """DescribeTransactions v0, its response decoded here: kio cannot read the start time
        -1 that Kafka sends for a transaction not started."""
        corr = next(self._corr)
        self.send_bytes(encode_request(DESCRIBE_TXNS, 0, {"transactional_ids": list(txn_ids)},
                                       corr))
        got, states = decode_describe_transactions(self.recv_frame())
        assert got == corr, f"correlation id {got}, expected {corr}"
        assert [s.transactional_id for s in states] == list(txn_ids), states
        return states

    def describe_txn(self, txn_id: str) -> TxnDescription:
        (state,) = self.describe_txns(txn_id)
        assert state.error_code == NONE, state
        return state

    def list_txns(self, states: Sequence[str] = (), pids: Sequence[int] = (), *,
                  version: int = 0, duration_ms: int = -1) -> Any:
        response = self.request(LIST_TXNS, version, {
            "state_filters": list(states), "producer_id_filters": list(pids),
            "duration_filter": duration_ms})
        assert response.error_code == NONE, response
        return response

    def describe_producers(self, topic: str, partitions: Sequence[int]) -> dict[int, Any]:
        response = self.request(DESCRIBE_PRODUCERS, 0, {"topics": [
            {"name": topic, "partition_indexes": list(partitions)}]})
        (result,) = response.topics
        assert result.name == topic
        return {p.partition_index: p for p in result.partitions}

    # groups and offsets

    def commit_offsets(self, group: str, offsets: dict[TP, int]) -> None:
        """A plain OffsetCommit (no generation, as a standalone consumer does)."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": offset,
                "committed_leader_epoch": -1, "committed_metadata": ""})
        response = self.request(OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None, "retention_time": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]})
        codes = [p.error_code for t in response.topics for p in t.partitions]
        assert codes == [NONE] * len(offsets), response

    def offset_fetch(self, group: str, topic: str, partitions: Sequence[int], *,
                     stable: bool, version: int = 8) -> dict[int, tuple[ErrorCode, int]]:
        """{partition: (error code, committed offset)} from OffsetFetch v7 or v8+."""
        wanted = [{"name": topic, "partition_indexes": list(partitions)}]
        if version >= 8:
            response = self.request(OFFSET_FETCH, version, {
                "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                            "topics": wanted}], "require_stable": stable})
            (entry,) = response.groups
        else:
            entry = self.request(OFFSET_FETCH, version, {
                "group_id": group, "topics": wanted, "require_stable": stable})
        assert entry.error_code == NONE, entry
        return {p.partition_index: (p.error_code, p.committed_offset)
                for t in entry.topics for p in t.partitions}

    def form_group(self, group: str) -> tuple[str, int]:
        """A Stable one-member classic group: (member id, generation)."""
        join = {"group_id": group, "session_timeout": 30_000, "rebalance_timeout": 10_000,
                "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}]}
        first = self.request(JOIN_GROUP, 5, join)
        assert first.error_code == ErrorCode.member_id_required, first
        joined = self.request(JOIN_GROUP, 5, dict(join, member_id=first.member_id))
        assert joined.error_code == NONE, joined
        assert joined.leader == joined.member_id
        synced = self.request(SYNC_GROUP, 3, {
            "group_id": group, "generation_id": joined.generation_id,
            "member_id": joined.member_id, "group_instance_id": None,
            "assignments": [{"member_id": joined.member_id, "assignment": b"a"}]})
        assert synced.error_code == NONE, synced
        return joined.member_id, joined.generation_id


# --- fixtures ------------------------------------------------------------------------------------


def start_broker(data_dir: Path, **keys: Any) -> samsa.Broker:
    return samsa.Broker(data_dir, offsets_topic_num_partitions=OFFSETS_PARTITIONS,
                        transaction_state_log_num_partitions=3,
                        group_initial_rebalance_delay_ms=0, **keys)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with start_broker(tmp_path / "data") as b:
        yield b


@pytest.fixture
def client(broker: samsa.Broker) -> Iterator[Raw]:
    with Raw(broker.port) as c:
        yield c


def one_txn_in(client: Raw, txn_id: str, topic: str, partition: int = 0,
               values: Sequence[bytes] = (b"v",)) -> Txn:
    """A new producer for ``txn_id`` with an open transaction holding ``values`` on
    ``topic``-``partition``."""
    txn = client.begin(txn_id)
    assert client.add_partitions(txn, {topic: [partition]}) == {(topic, partition): NONE}
    assert client.produce(topic, partition, data_batch(values, txn), txn_id).error_code == NONE
    return txn


# --- ApiVersions ---------------------------------------------------------------------------------


def test_transaction_apis_are_advertised(client: Raw) -> None:
    """ApiVersions lists every transaction API with the versions samsa implements."""
    response = client.request(API_VERSIONS, 3, {"client_software_name": "raw",
                                                "client_software_version": "1.0"})
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert {key: ranges.get(key) for key in (22, 24, 25, 26, 28, 61, 65, 66)} == {
        22: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 3), 28: (0, 3), 61: (0, 0), 65: (0, 0),
        66: (0, 1),
    }


# --- InitProducerId ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_init_producer_id_empty_transactional_id_is_invalid_request(client: Raw,
                                                                     version: int) -> None:
    """An empty transactional id is INVALID_REQUEST (null means idempotent, "" is refused)."""
    response = client.init_pid("", version=version)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        ErrorCode.invalid_request, -1, -1)


@pytest.mark.parametrize("version", [0, 4])
@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_init_producer_id_timeout_out_of_range(client: Raw, version: int,
                                               timeout_ms: int) -> None:
    """transaction.timeout.ms must be in (0, transaction.max.timeout.ms]; a refused request
    creates no state for the id, and the maximum itself is accepted."""
    response = client.init_pid("t", timeout_ms, version=version)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        ErrorCode.invalid_transaction_timeout, -1, -1)
    (state,) = client.describe_txns("t")
    assert state.error_code == ErrorCode.transactional_id_not_found
    assert client.init_pid("t", 900_000, version=version).error_code == NONE


def test_init_producer_id_timeout_bounded_by_broker_config(tmp_path: Path) -> None:
    """transaction.max.timeout.ms set on the broker is the bound that applies."""
    with start_broker(tmp_path / "d", transaction_max_timeout_ms=5000) as b, Raw(b.port) as c:
        assert c.init_pid("t", 5001).error_code == ErrorCode.invalid_transaction_timeout
        assert c.init_pid("t", 5000).error_code == NONE
        assert c.describe_txn("t").transaction_timeout_ms == 5000


def test_init_producer_id_new_id_then_again(client: Raw) -> None:
    """A new id gets a producer id at epoch 0; InitProducerId again keeps the producer id and
    bumps the epoch; another id or an idempotent producer gets a different producer id."""
    first = client.init_pid("a")
    assert first.error_code == NONE and first.producer_id >= 0 and first.producer_epoch == 0
    again = client.init_pid("a")
    assert (again.error_code, again.producer_id, again.producer_epoch) == (
        NONE, first.producer_id, 1)
    other = client.init_pid("b")
    assert other.error_code == NONE and other.producer_epoch == 0
    idempotent = client.init_pid(None)
    assert idempotent.error_code == NONE and idempotent.producer_epoch == 0
    assert len({first.producer_id, other.producer_id, idempotent.producer_id}) == 3


@pytest.mark.parametrize("version, fenced", FENCED_BY_VERSION[INIT_PRODUCER_ID])
def test_init_producer_id_with_expected_epoch(client: Raw, version: int,
                                              fenced: ErrorCode) -> None:
    """KIP-360: with the current (producer id, epoch) the epoch is bumped; a retry of a bump
    that succeeded gets the same answer; an older epoch is fenced and changes nothing."""
    txn = client.begin("x")
    bumped = client.init_pid("x", version=version, pid=txn.pid, epoch=0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (NONE, txn.pid, 1)
    retry = client.init_pid("x", version=version, pid=txn.pid, epoch=0)
    assert (retry.error_code, retry.producer_id, retry.producer_epoch) == (NONE, txn.pid, 1)
    again = client.init_pid("x", version=version, pid=txn.pid, epoch=1)
    assert (again.error_code, again.producer_id, again.producer_epoch) == (NONE, txn.pid, 2)
    stale = client.init_pid("x", version=version, pid=txn.pid, epoch=0)
    assert (stale.error_code, stale.producer_id, stale.producer_epoch) == (fenced, -1, -1)
    state = client.describe_txn("x")
    assert (state.producer_id, state.producer_epoch) == (txn.pid, 2)


@pytest.mark.parametrize("version, fenced", FENCED_BY_VERSION[INIT_PRODUCER_ID])
def test_init_producer_id_with_wrong_producer_id(client: Raw, version: int,
                                                 fenced: ErrorCode) -> None:
    """An expected producer id that is not the id's is fenced."""
    txn = client.begin("x")
    wrong = client.init_pid("x", version=version, pid=txn.pid + 1000, epoch=txn.epoch)
    assert (wrong.error_code, wrong.producer_id, wrong.producer_epoch) == (fenced, -1, -1)
    state = client.describe_txn("x")
    assert (state.producer_id, state.producer_epoch) == (txn.pid, 0)


def test_init_producer_id_aborts_the_ongoing_transaction(client: Raw) -> None:
    """A new incarnation of the producer aborts the open transaction: abort markers with the
    epoch bumped once go to its partitions, the new producer gets epoch + 2, and the old one is
    fenced on Produce and EndTxn."""
    client.create_topic("t", 2)
    txn = client.begin("fence")
    assert client.add_partitions(txn, {"t": [0, 1]}) == {("t", 0): NONE, ("t", 1): NONE}
    assert client.produce("t", 0, data_batch([b"a", b"b"], txn), "fence").error_code == NONE
    assert client.produce("t", 1, data_batch([b"c"], txn), "fence").error_code == NONE

    response = client.init_retrying("fence")
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        NONE, txn.pid, 2)
    for partition, marker_offset in ((0, 2), (1, 1)):
        log = client.log("t", partition)
        markers = [b for b in log if b.control]
        assert len(markers) == 1, log
        (marker,) = markers
        assert (marker.base_offset, marker.producer_id, marker.producer_epoch,
                marker.transactional, marker.control_type) == (
            marker_offset, txn.pid, 1, True, ABORT)
    committed_view = client.fetch("t", 0, isolation=READ_COMMITTED)
    assert [(a.producer_id, a.first_offset) for a in committed_view.aborted_transactions] == [
        (txn.pid, 0)]
    assert committed_view.last_stable_offset == committed_view.high_watermark == 3

    state = client.describe_txn("fence")
    assert (state.transaction_state, state.producer_epoch, state.topics) == (
        "Empty", 2, ())
    stale = client.produce("t", 0, data_batch([b"late"], txn, seq=2), "fence")
    assert stale.error_code == BAD_EPOCH
    assert client.end_txn(txn, commit=True) == FENCED
    assert client.list_offset("t", 0) == 3


# --- AddPartitionsToTxn --------------------------------------------------------------------------


def test_add_partitions_unknown_id_or_wrong_producer_id(client: Raw) -> None:
    """An unknown transactional id, or a producer id that is not the id's, is
    INVALID_PRODUCER_ID_MAPPING for every partition, and adds nothing."""
    client.create_topic("t", 2)
    assert client.add_partitions(Txn("nobody", 1234, 0), {"t": [0, 1]}) == {
        ("t", 0): BAD_MAPPING, ("t", 1): BAD_MAPPING}
    txn = client.begin("a")
    assert client.add_partitions(Txn("a", txn.pid + 1, 0), {"t": [0, 1]}) == {
        ("t", 0): BAD_MAPPING, ("t", 1): BAD_MAPPING}
    state = client.describe_txn("a")
    assert (state.transaction_state, state.topics) == ("Empty", ())


@pytest.mark.parametrize("version, fenced", FENCED_BY_VERSION[ADD_PARTITIONS])
def test_add_partitions_stale_epoch(client: Raw, version: int, fenced: ErrorCode) -> None:
    """A producer epoch older than the id's is fenced for every partition; the current epoch
    at the same version is accepted."""
    client.create_topic("t", 2)
    old = client.begin("a")
    new = client.begin("a")
    assert new.epoch == old.epoch + 1
    assert client.add_partitions(old, {"t": [0, 1]}, version) == {
        ("t", 0): fenced, ("t", 1): fenced}
    assert client.describe_txn("a").transaction_state == "Empty"
    assert client.add_partitions(new, {"t": [0, 1]}, version) == {
        ("t", 0): NONE, ("t", 1): NONE}
    assert client.describe_txn("a").transaction_state == "Ongoing"


def test_add_partitions_unknown_partition_fails_the_whole_request(client: Raw) -> None:
    """A partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION, the others
    OPERATION_NOT_ATTEMPTED; nothing is added and no topic is created."""
    client.create_topic("t", 1)
    txn = client.begin("a")
    assert client.add_partitions(txn, {"t": [0, 3], "missing": [0]}) == {
        ("t", 0): ErrorCode.operation_not_attempted,
        ("t", 3): ErrorCode.unknown_topic_or_partition,
        ("missing", 0): ErrorCode.unknown_topic_or_partition,
    }
    state = client.describe_txn("a")
    assert (state.transaction_state, state.topics) == ("Empty", ())
    assert not client.topic_exists("missing")


# --- AddOffsetsToTxn -----------------------------------------------------------------------------


def test_add_offsets_unknown_id_or_wrong_producer_id(client: Raw) -> None:
    """AddOffsetsToTxn checks the id and producer id as AddPartitionsToTxn does."""
    assert client.add_offsets(Txn("nobody", 1234, 0), "g") == BAD_MAPPING
    txn = client.begin("a")
    assert client.add_offsets(Txn("a", txn.pid + 1, 0), "g") == BAD_MAPPING
    state = client.describe_txn("a")
    assert (state.transaction_state, state.topics) == ("Empty", ())


@pytest.mark.parametrize("version, fenced", FENCED_BY_VERSION[ADD_OFFSETS])
def test_add_offsets_stale_epoch(client: Raw, version: int, fenced: ErrorCode) -> None:
    """A stale epoch is fenced; the current one adds the group's offsets partition."""
    old = client.begin("a")
    new = client.begin("a")
    assert client.add_offsets(old, "g", version) == fenced
    assert client.describe_txn("a").transaction_state == "Empty"
    assert client.add_offsets(new, "g", version) == NONE


@pytest.mark.parametrize("group", ["group-7", "my-group"])
def test_add_offsets_adds_the_groups_offsets_partition(client: Raw, group: str) -> None:
    """The partition added is the group's __consumer_offsets partition, by Kafka's mapping
    (the hash code of "my-group" is negative: Utils.abs, not a mask of the sign bit)."""
    assert java_hash(group) > 0 if group == "group-7" else java_hash(group) < 0
    txn = client.begin("a")
    assert client.add_offsets(txn, group) == NONE
    state = client.describe_txn("a")
    assert state.transaction_state == "Ongoing"
    assert [(t, list(ps)) for t, ps in state.topics] == [
        (OFFSETS_TOPIC, [java_partition_for(group, OFFSETS_PARTITIONS)])]


# --- EndTxn --------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_without_partitions_is_invalid_txn_state(client: Raw, commit: bool) -> None:
    """EndTxn in the Empty state (nothing added) is INVALID_TXN_STATE and changes nothing."""
    txn = client.begin("a")
    assert client.end_txn(txn, commit) == BAD_STATE
    state = client.describe_txn("a")
    assert (state.transaction_state, state.producer_epoch) == ("Empty", 0)


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_retry_and_opposite_outcome(client: Raw, commit: bool) -> None:
    """After an EndTxn, a retry of the same outcome is NONE and writes no second marker; the
    opposite outcome is INVALID_TXN_STATE."""
    client.create_topic("t")
    txn = one_txn_in(client, "a", "t")
    assert client.end_txn(txn, commit) == NONE
    done = "CompleteCommit" if commit else "CompleteAbort"
    assert client.describe_txn("a").transaction_state == done
    assert client.end_txn(txn, commit) == NONE
    assert client.end_txn(txn, not commit) == BAD_STATE
    assert client.describe_txn("a").transaction_state == done
    markers = [b for b in client.log("t") if b.control]
    assert [(m.base_offset, m.control_type) for m in markers] == [
        (1, COMMIT if commit else ABORT)]


@pytest.mark.parametrize("version, fenced", FENCED_BY_VERSION[END_TXN])
def test_end_txn_stale_epoch(client: Raw, version: int, fenced: ErrorCode) -> None:
    """EndTxn with an older epoch is fenced and leaves the transaction open."""
    client.create_topic("t")
    old = client.begin("a")
    new = client.begin("a")
    assert client.add_partitions(new, {"t": [0]}) == {("t", 0): NONE}
    assert client.end_txn(old, True, version) == fenced
    assert client.describe_txn("a").transaction_state == "Ongoing"
    assert client.end_txn(new, True, version) == NONE
    assert client.describe_txn("a").transaction_state == "CompleteCommit"


def test_end_txn_unknown_id_or_wrong_producer_id(client: Raw) -> None:
    """EndTxn for an unknown id or another producer id is INVALID_PRODUCER_ID_MAPPING."""
    client.create_topic("t")
    assert client.end_txn(Txn("nobody", 1234, 0), True) == BAD_MAPPING
    txn = client.begin("a")
    assert client.add_partitions(txn, {"t": [0]}) == {("t", 0): NONE}
    assert client.end_txn(Txn("a", txn.pid + 1, 0), True) == BAD_MAPPING
    assert client.end_txn(Txn("a", txn.pid + 1, 0), False) == BAD_MAPPING
    assert client.describe_txn("a").transaction_state == "Ongoing"


# --- Produce -------------------------------------------------------------------------------------


def test_produce_to_a_partition_not_in_the_transaction(client: Raw) -> None:
    """A transactional batch for a partition the transaction did not add is
    INVALID_TXN_STATE (before any AddPartitionsToTxn too) and is not written."""
    client.create_topic("t", 2)
    txn = client.begin("a")
    assert client.produce("t", 0, data_batch([b"x"], txn), "a").error_code == BAD_STATE
    assert client.add_partitions(txn, {"t": [0]}) == {("t", 0): NONE}
    assert client.produce("t", 1, data_batch([b"x"], txn), "a").error_code == BAD_STATE
    assert client.list_offset("t", 1) == 0
    assert client.produce("t", 0, data_batch([b"x"], txn), "a").error_code == NONE
    assert client.list_offset("t", 0) == 1


def test_produce_with_a_stale_epoch(client: Raw) -> None:
    """A transactional batch with an epoch older than the id's is INVALID_PRODUCER_EPOCH."""
    client.create_topic("t")
    old = client.begin("a")
    new = client.begin("a")
    assert client.add_partitions(new, {"t": [0]}) == {("t", 0): NONE}
    assert client.produce("t", 0, data_batch([b"x"], old), "a").error_code == BAD_EPOCH
    assert client.list_offset("t") == 0
    assert client.produce("t", 0, data_batch([b"x"], new), "a").error_code == NONE


def test_transactional_batch_without_transactional_id(client: Raw) -> None:
    """A Produce with transactional records but no transactional id is refused as Kafka's
    KafkaApis.handleProduceRequest does (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
    partition), and nothing is written."""
    client.create_topic("t")
    txn = client.begin("a")
    assert client.add_partitions(txn, {"t": [0]}) == {("t", 0): NONE}
    result = client.produce("t", 0, data_batch([b"x"], txn), txn_id=None)
    assert result.error_code == ErrorCode.transactional_id_authorization_failed
    assert client.list_offset("t") == 0


@pytest.mark.parametrize("with_txn_id", [False, True])
def test_idempotent_batch_while_the_transaction_is_open(client: Raw, with_txn_id: bool) -> None:
    """A non-transactional batch from a producer whose transaction is open on the partition
    is INVALID_TXN_STATE (Kafka's ProducerAppendInfo), and is not written."""
    client.create_topic("t")
    txn = one_txn_in(client, "a", "t", values=[b"1", b"2"])
    plain = data_batch([b"3"], txn, seq=2, transactional=False)
    result = client.produce("t", 0, plain, "a" if with_txn_id else None)
    assert result.error_code == BAD_STATE
    assert client.list_offset("t") == 2


def test_control_batch_from_a_client_is_invalid_record(client: Raw) -> None:
    """Clients may not write control batches, even inside their own transaction."""
    client.create_topic("t")
    txn = client.begin("a")
    assert client.add_partitions(txn, {"t": [0]}) == {("t", 0): NONE}
    marker = encode_batch([RecordInput(b"\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00\x01")],
                          timestamp=BASE_TS, producer_id=txn.pid, producer_epoch=txn.epoch,
                          transactional=True, control=True)
    assert client.produce("t", 0, marker, "a").error_code == ErrorCode.invalid_record
    assert client.list_offset("t") == 0


# --- TxnOffsetCommit and OffsetFetch -------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_txn_offset_commit_before_add_offsets(client: Raw, version: int) -> None:
    """TxnOffsetCommit before AddOffsetsToTxn (Empty, or Ongoing with data partitions only)
    is INVALID_TXN_STATE per partition, and stores nothing."""
    client.create_topic("t", 2)
    txn = client.begin("a")
    offsets = {("t", 0): 5, ("t", 1): 6}
    assert client.txn_offset_commit(txn, "g", offsets, version=version) == dict.fromkeys(
        offsets, BAD_STATE)
    assert client.add_partitions(txn, {"t": [0]}) == {("t", 0): NONE}
    assert client.txn_offset_commit(txn, "g", offsets, version=version) == dict.fromkeys(
        offsets, BAD_STATE)
    assert client.end_txn(txn, True) == NONE
    assert client.offset_fetch("g", "t", [0, 1], stable=True) == {0: (NONE, -1), 1: (NONE, -1)}


def test_txn_offset_commit_stale_epoch(client: Raw) -> None:
    """After the producer is fenced, its TxnOffsetCommit is INVALID_PRODUCER_EPOCH, and the
    offsets of its aborted transaction never become visible."""
    client.create_topic("t")
    old = client.begin("a")
    assert client.add_offsets(old, "g") == NONE
    assert client.txn_offset_commit(old, "g", {("t", 0): 7}) == {("t", 0): NONE}
    new = client.init_retrying("a")
    assert (new.error_code, new.producer_epoch) == (NONE, 2)
    assert client.txn_offset_commit(old, "g", {("t", 0): 8}) == {("t", 0): BAD_EPOCH}
    assert client.offset_fetch("g", "t", [0], stable=True) == {0: (NONE, -1)}


def test_txn_offset_commit_checks_member_and_generation(client: Raw) -> None:
    """KIP-447: with a member id and generation, an unknown member is UNKNOWN_MEMBER_ID and a
    wrong generation ILLEGAL_GENERATION; the right ones commit on EndTxn."""
    client.create_topic("t")
    member, generation = client.form_group("g")
    txn = client.begin("a")
    assert client.add_offsets(txn, "g") == NONE
    tp = ("t", 0)
    assert client.txn_offset_commit(txn, "g", {tp: 3}, member_id="nobody",
                                    generation=generation) == {tp: ErrorCode.unknown_member_id}
    assert client.txn_offset_commit(txn, "g", {tp: 3}, member_id=member,
                                    generation=generation + 1) == {
        tp: ErrorCode.illegal_generation}
    assert client.offset_fetch("g", "t", [0], stable=True) == {0: (NONE, -1)}
    assert client.txn_offset_commit(txn, "g", {tp: 3}, member_id=member,
                                    generation=generation) == {tp: NONE}
    assert client.end_txn(txn, True) == NONE
    assert client.offset_fetch("g", "t", [0], stable=True) == {0: (NONE, 3)}


@pytest.mark.parametrize("version", [7, 8])
def test_offset_fetch_require_stable_until_end_txn(client: Raw, version: int) -> None:
    """A pending transactional offset is UNSTABLE_OFFSET_COMMIT for require_stable fetches
    (the old offset for others) until EndTxn; a commit makes it visible, an abort keeps the
    old one."""
    client.create_topic("t", 2)
    client.commit_offsets("g", {("t", 0): 2, ("t", 1): 3})
    txn = client.begin("a")
    assert client.add_offsets(txn, "g") == NONE
    assert client.txn_offset_commit(txn, "g", {("t", 0): 10}) == {("t", 0): NONE}

    def fetch(stable: bool) -> dict[int, tuple[ErrorCode, int]]:
        return client.offset_fetch("g", "t", [0, 1], stable=stable, version=version)

    assert fetch(stable=True) == {0: (ErrorCode.unstable_offset_commit, -1), 1: (NONE, 3)}
    assert fetch(stable=False) == {0: (NONE, 2), 1: (NONE, 3)}
    assert client.end_txn(txn, True) == NONE
    assert fetch(stable=True) == {0: (NONE, 10), 1: (NONE, 3)}

    assert client.add_offsets(txn, "g") == NONE
    assert client.txn_offset_commit(txn, "g", {("t", 0): 20, ("t", 1): 21}) == {
        ("t", 0): NONE, ("t", 1): NONE}
    assert fetch(stable=True) == {0: (ErrorCode.unstable_offset_commit, -1),
                                  1: (ErrorCode.unstable_offset_commit, -1)}
    assert client.end_txn(txn, False) == NONE
    assert fetch(stable=True) == {0: (NONE, 10), 1: (NONE, 3)}


# --- Fetch and ListOffsets -----------------------------------------------------------------------


@pytest.mark.parametrize("version", [4, 11, 12])
def test_read_committed_fetch_stops_at_the_last_stable_offset(client: Raw, version: int) -> None:
    """While a transaction is open, read_committed sees records only below its first offset
    (the LSO) while read_uncommitted reads to the high watermark; after the abort,
    read_committed gets the aborted transaction's (producer id, first offset)."""
    client.create_topic("t")
    assert client.produce("t", 0, data_batch([b"before"])).error_code == NONE  # offset 0
    txn = one_txn_in(client, "a", "t", values=[b"t1", b"t2"])  # offsets 1-2
    assert client.produce("t", 0, data_batch([b"after"])).error_code == NONE  # offset 3

    committed = client.fetch("t", isolation=READ_COMMITTED, version=version)
    assert (committed.high_watermark, committed.last_stable_offset) == (4, 1)
    got = batches(committed.records)
    assert [b.values for b in got] == [(b"before",)]
    assert committed.aborted_transactions is not None
    assert list(committed.aborted_transactions) == []
    uncommitted = client.fetch("t", isolation=READ_UNCOMMITTED, version=version)
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (4, 1)
    assert [b.values for b in batches(uncommitted.records)] == [
        (b"before",), (b"t1", b"t2"), (b"after",)]
    assert uncommitted.aborted_transactions is None
    assert client.list_offset("t", isolation=READ_COMMITTED) == 1
    assert client.list_offset("t", isolation=READ_UNCOMMITTED) == 4
    assert client.list_offset("t", isolation=READ_COMMITTED, version=2) == 1

    assert client.end_txn(txn, False) == NONE  # the abort marker is offset 4
    committed = client.fetch("t", isolation=READ_COMMITTED, version=version)
    assert (committed.high_watermark, committed.last_stable_offset) == (5, 5)
    assert [(a.producer_id, a.first_offset) for a in committed.aborted_transactions] == [
        (txn.pid, 1)]
    assert batches(committed.records)[-1].control
    assert batches(committed.records)[-1].last_offset == 4
    assert client.fetch("t", isolation=READ_UNCOMMITTED, version=version
                        ).aborted_transactions is None
    assert client.list_offset("t", isolation=READ_COMMITTED) == 5


def test_aborted_transactions_overlapping_the_fetch_only(client: Raw) -> None:
    """aborted_transactions lists the aborted transactions a read_committed fetch from the
    given offset can meet, not committed ones nor those ending before it."""
    client.create_topic("t")
    a = one_txn_in(client, "a", "t", values=[b"a1", b"a2"])  # offsets 0-1
    assert client.end_txn(a, False) == NONE  # marker 2
    b = one_txn_in(client, "b", "t", values=[b"b1", b"b2"])  # offsets 3-4
    assert client.end_txn(b, True) == NONE  # marker 5
    assert client.add_partitions(a, {"t": [0]}) == {("t", 0): NONE}
    assert client.produce("t", 0, data_batch([b"a3"], a, seq=2), "a").error_code == NONE  # 6
    assert client.end_txn(a, False) == NONE  # marker 7

    def aborted(offset: int) -> list[tuple[int, int]]:
        data = client.fetch("t", offset=offset, isolation=READ_COMMITTED)
        assert (data.high_watermark, data.last_stable_offset) == (8, 8)
        return sorted((t.producer_id, t.first_offset) for t in data.aborted_transactions)

    assert aborted(0) == [(a.pid, 0), (a.pid, 6)]
    assert aborted(3) == [(a.pid, 6)]
    assert b.pid != a.pid


# --- DescribeTransactions / ListTransactions / DescribeProducers ---------------------------------


def test_describe_transactions_through_the_states(client: Raw) -> None:
    """DescribeTransactions: TRANSACTIONAL_ID_NOT_FOUND for an unknown id; Kafka's state names,
    the partitions of an Ongoing transaction, the timeout and the producer id and epoch."""
    client.create_topic("t", 2)
    (unknown,) = client.describe_txns("nobody")
    assert unknown.error_code == ErrorCode.transactional_id_not_found

    txn = client.begin("d", timeout_ms=45_000)
    state = client.describe_txn("d")
    assert (state.transaction_state, state.transaction_timeout_ms, state.producer_id,
            state.producer_epoch, state.topics) == ("Empty", 45_000, txn.pid, 0, ())

    assert state.transaction_start_time_ms == -1
    before = time.time_ns() // 1_000_000
    assert client.add_partitions(txn, {"t": [1, 0]}) == {("t", 0): NONE, ("t", 1): NONE}
    after = time.time_ns() // 1_000_000
    state = client.describe_txn("d")
    assert state.transaction_state == "Ongoing"
    assert before <= state.transaction_start_time_ms <= after
    assert [(t, sorted(ps)) for t, ps in state.topics] == [("t", [0, 1])]

    assert client.end_txn(txn, True) == NONE
    state = client.describe_txn("d")
    assert (state.transaction_state, state.topics) == ("CompleteCommit", ())

    assert client.add_partitions(txn, {"t": [1]}) == {("t", 1): NONE}
    assert [(t, list(ps)) for t, ps in client.describe_txn("d").topics] == [
        ("t", [1])]
    assert client.end_txn(txn, False) == NONE
    assert client.describe_txn("d").transaction_state == "CompleteAbort"

    both = client.describe_txns("nobody", "d")
    assert [s.error_code for s in both] == [ErrorCode.transactional_id_not_found, NONE]
    assert (both[1].producer_id, both[1].producer_epoch) == (txn.pid, 0)


def test_list_transactions_filters(client: Raw) -> None:
    """ListTransactions filters by state and by producer id; state names it does not know are
    reported in unknown_state_filters."""
    client.create_topic("t")
    a = client.begin("list-a")
    assert client.add_partitions(a, {"t": [0]}) == {("t", 0): NONE}
    b = client.begin("list-b")

    def listed(response: Any) -> dict[str, tuple[int, str]]:
        return {s.transactional_id: (s.producer_id, s.transaction_state)
                for s in response.transaction_states}

    everything = client.list_txns()
    assert listed(everything) == {"list-a": (a.pid, "Ongoing"), "list-b": (b.pid, "Empty")}
    assert list(everything.unknown_state_filters) == []
    assert listed(client.list_txns(["Ongoing"])) == {"list-a": (a.pid, "Ongoing")}
    assert listed(client.list_txns(["Empty"])) == {"list-b": (b.pid, "Empty")}
    assert listed(client.list_txns(pids=[b.pid])) == {"list-b": (b.pid, "Empty")}
    assert listed(client.list_txns(["Ongoing"], [b.pid])) == {}
    mixed = client.list_txns(["Ongoing", "Bogus"])
    assert listed(mixed) == {"list-a": (a.pid, "Ongoing")}
    assert list(mixed.unknown_state_filters) == ["Bogus"]
    assert "list-a" in listed(client.list_txns(version=1, duration_ms=-1))
    assert "list-a" not in listed(client.list_txns(version=1, duration_ms=3_600_000))


def test_describe_producers_shows_the_open_transaction(client: Raw) -> None:
    """DescribeProducers: the producer of an open transaction with current_txn_start_offset at
    its first offset, -1 once committed; an unknown partition is UNKNOWN_TOPIC_OR_PARTITION."""
    client.create_topic("t")
    assert client.produce("t", 0, data_batch([b"plain"])).error_code == NONE  # offset 0
    txn = one_txn_in(client, "a", "t", values=[b"1", b"2", b"3"])  # offsets 1-3

    result = client.describe_producers("t", [0])[0]
    assert result.error_code == NONE
    assert [(p.producer_id, p.producer_epoch, p.last_sequence, p.last_timestamp,
             p.current_txn_start_offset) for p in result.active_producers] == [
        (txn.pid, 0, 2, BASE_TS, 1)]

    assert client.end_txn(txn, True) == NONE
    result = client.describe_producers("t", [0])[0]
    assert [(p.producer_id, p.producer_epoch, p.current_txn_start_offset)
            for p in result.active_producers] == [(txn.pid, 0, -1)]

    assert client.describe_producers("t", [5])[5].error_code == (
        ErrorCode.unknown_topic_or_partition)
    assert client.describe_producers("missing", [0])[0].error_code == (
        ErrorCode.unknown_topic_or_partition)


# --- FindCoordinator -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_find_coordinator_for_transactional_ids(client: Raw, broker: samsa.Broker,
                                                version: int) -> None:
    """FindCoordinator key_type 1 (transaction) names this broker."""
    node_id = client.request(METADATA, 8, {
        "topics": [], "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False}).brokers[0].node_id
    if version < 4:
        response = client.request(FIND_COORDINATOR, version, {"key": "a", "key_type": 1})
        found = [(response.error_code, response.node_id, response.host, response.port)]
    else:
        response = client.request(FIND_COORDINATOR, version, {
            "key_type": 1, "coordinator_keys": ["a", "b"]})
        assert [c.key for c in response.coordinators] == ["a", "b"]
        found = [(c.error_code, c.node_id, c.host, c.port) for c in response.coordinators]
    assert found == [(NONE, node_id, "127.0.0.1", broker.port)] * len(found)


def test_find_coordinator_unknown_key_type_is_invalid_request(client: Raw) -> None:
    """A coordinator type Kafka does not know is INVALID_REQUEST (CoordinatorType.forId)."""
    response = client.request(FIND_COORDINATOR, 3, {"key": "a", "key_type": 7})
    assert response.error_code == ErrorCode.invalid_request


# --- malformed frames ----------------------------------------------------------------------------


TRUNCATED = [
    (INIT_PRODUCER_ID, 1, {"transactional_id": "abc", "transaction_timeout": 1000}),
    (INIT_PRODUCER_ID, 4, {"transactional_id": "abc", "transaction_timeout": 1000,
                           "producer_id": -1, "producer_epoch": -1}),
    (ADD_PARTITIONS, 1, {"v3_and_below_transactional_id": "abc", "v3_and_below_producer_id": 1,
                         "v3_and_below_producer_epoch": 0,
                         "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}]}),
    (ADD_PARTITIONS, 3, {"v3_and_below_transactional_id": "abc", "v3_and_below_producer_id": 1,
                         "v3_and_below_producer_epoch": 0,
                         "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}]}),
    (ADD_OFFSETS, 3, {"transactional_id": "abc", "producer_id": 1, "producer_epoch": 0,
                      "group_id": "g"}),
    (END_TXN, 1, {"transactional_id": "abc", "producer_id": 1, "producer_epoch": 0,
                  "committed": True}),
    (END_TXN, 3, {"transactional_id": "abc", "producer_id": 1, "producer_epoch": 0,
                  "committed": True}),
    (TXN_OFFSET_COMMIT, 3, {"transactional_id": "abc", "group_id": "g", "producer_id": 1,
                            "producer_epoch": 0, "generation_id": -1, "member_id": "",
                            "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                                {"partition_index": 0, "committed_offset": 1,
                                 "committed_leader_epoch": -1,
                                 "committed_metadata": ""}]}]}),
    (DESCRIBE_TXNS, 0, {"transactional_ids": ["abc"]}),
    (LIST_TXNS, 1, {"state_filters": ["Ongoing"], "producer_id_filters": [1],
                    "duration_filter": -1}),
    (DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "t", "partition_indexes": [0]}]}),
]

# Requests whose frame ends with an empty array: its count is patched to a huge value.
_TXN_BODY = {"transactional_id": "abc", "group_id": "g", "producer_id": 1, "producer_epoch": 0,
             "generation_id": -1, "member_id": "", "group_instance_id": None, "topics": []}
_ADD_BODY = {"v3_and_below_transactional_id": "abc", "v3_and_below_producer_id": 1,
             "v3_and_below_producer_epoch": 0, "v3_and_below_topics": []}
HUGE_ARRAYS = [
    (ADD_PARTITIONS, 1, _ADD_BODY, False),
    (ADD_PARTITIONS, 3, _ADD_BODY, True),
    (TXN_OFFSET_COMMIT, 1, _TXN_BODY, False),
    (TXN_OFFSET_COMMIT, 3, _TXN_BODY, True),
    (DESCRIBE_TXNS, 0, {"transactional_ids": []}, True),
    (LIST_TXNS, 0, {"state_filters": [], "producer_id_filters": []}, True),
    (DESCRIBE_PRODUCERS, 0, {"topics": []}, True),
]
_HUGE_INT32 = b"\x7f\xff\xff\xff"
_HUGE_UVARINT = b"\xff\xff\xff\xff\x07"  # 2**31 - 1: a compact array of 2**31 - 2 elements


def _reframe(payload: bytes) -> bytes:
    return _SIZE.pack(len(payload)) + payload


def _check_broker_serves(port: int, txn_id: str) -> None:
    """A new connection gets answers, and the coordinator still bumps epochs."""
    with Raw(port) as fresh:
        first = fresh.init_pid(txn_id)
        second = fresh.init_pid(txn_id)
        assert (first.error_code, second.error_code) == (NONE, NONE)
        assert (second.producer_id, second.producer_epoch) == (first.producer_id, 1)


@pytest.mark.parametrize("api_key, version, body", TRUNCATED,
                         ids=[f"{k}v{v}" for k, v, _ in TRUNCATED])
def test_truncated_request_closes_only_its_connection(broker: samsa.Broker, client: Raw,
                                                      api_key: int, version: int,
                                                      body: dict[str, Any]) -> None:
    """A body cut short (size prefix consistent with it) closes that connection, as Kafka does
    for a request it cannot parse; other connections and new ones are served."""
    whole = encode_request(api_key, version, body, 7)
    with Raw(broker.port) as victim:
        victim.send_bytes(_reframe(whole[4:-3]))
        assert victim.is_closed_by_peer()
    assert client.init_pid("still-here").error_code == NONE
    _check_broker_serves(broker.port, "after-truncated")


@pytest.mark.parametrize("api_key, version, body, flexible", HUGE_ARRAYS,
                         ids=[f"{k}v{v}" for k, v, _, _ in HUGE_ARRAYS])
def test_huge_array_count_closes_only_its_connection(broker: samsa.Broker, client: Raw,
                                                     api_key: int, version: int,
                                                     body: dict[str, Any],
                                                     flexible: bool) -> None:
    """An array claiming 2**31 - 1 (or - 2) elements in a few bytes closes that connection
    without the broker trying to build it; the broker goes on serving."""
    whole = encode_request(api_key, version, body, 7)
    if flexible:  # empty compact array (count 0 + 1) then the request's empty tagged fields
        assert whole.endswith(b"\x01\x00"), whole
        patched = whole[4:-2] + _HUGE_UVARINT + b"\x00"
    else:
        assert whole.endswith(b"\x00\x00\x00\x00"), whole
        patched = whole[4:-4] + _HUGE_INT32
    with Raw(broker.port) as victim:
        started = time.monotonic()
        victim.send_bytes(_reframe(patched))
        assert victim.is_closed_by_peer()
        assert time.monotonic() - started < 5
    assert client.init_pid("still-here").error_code == NONE
    _check_broker_serves(broker.port, "after-huge")


def test_huge_nested_array_and_null_array_close_the_connection(broker: samsa.Broker,
                                                                client: Raw) -> None:
    """A huge partition count inside a topic (AddPartitionsToTxn v3), and a null (-1) count
    for a non-nullable array (v1), are unparseable: each closes its connection."""
    nested = encode_request(ADD_PARTITIONS, 3, dict(_ADD_BODY, v3_and_below_topics=[
        {"name": "t", "partitions": []}]), 7)
    # ... partitions: empty compact array, topic tagged fields, request tagged fields
    assert nested.endswith(b"\x01\x00\x00"), nested
    null = encode_request(ADD_PARTITIONS, 1, _ADD_BODY, 8)
    assert null.endswith(b"\x00\x00\x00\x00"), null
    for payload in (nested[4:-3] + _HUGE_UVARINT + b"\x00\x00",
                    null[4:-4] + b"\xff\xff\xff\xff"):
        with Raw(broker.port) as victim:
            victim.send_bytes(_reframe(payload))
            assert victim.is_closed_by_peer()
    assert client.init_pid("still-here").error_code == NONE
    _check_broker_serves(broker.port, "after-nested")
