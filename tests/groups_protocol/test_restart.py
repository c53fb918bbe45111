"""Group state across broker restarts: committed offsets and Stable groups come back from
``__consumer_offsets`` after a clean stop and after SIGKILL, the records are Kafka's formats, and
offsets.retention.minutes expires the offsets of empty groups (with tombstones)."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import samsa
from samsa.records.batch import iter_headers
from samsa.records.record import decode_records

from .conftest import (
    OFFSETS_TOPIC,
    Client,
    ErrorCode,
    Member,
    Reader,
    described,
    form_group,
    java_partition_for,
    subscription,
    wait_for,
)

pytestmark = pytest.mark.timeout(60)

E = ErrorCode
KEYS: dict[str, Any] = {"group_min_session_timeout_ms": 100}
SAMSA = str(Path(sys.executable).parent / "samsa")
SUB_T = [("range", subscription("t"))]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def on_loop(broker: samsa.Broker, fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on the broker's event loop thread (the coordinator is not thread-safe)."""
    async def call() -> Any:
        return fn()

    assert broker._loop is not None
    return asyncio.run_coroutine_threadsafe(call(), broker._loop).result(10)


def offsets_of(c: Client, group: str) -> dict[tuple[str, int], tuple[int, str, int]]:
    return {tp: (p.committed_offset, p.metadata, p.committed_leader_epoch)
            for tp, p in c.fetch_offsets(group, None, version=9).items()}


def records_of(c: Client, partition: int) -> list[tuple[bytes, bytes | None, int]]:
    """(key, value, timestamp) of every record in a __consumer_offsets partition, fetched over
    the wire."""
    data = c.fetch_records(OFFSETS_TOPIC, partition)
    out = []
    if not data:
        return out
    data = bytes(data)
    for pos, header in iter_headers(data):
        for record in decode_records(data[pos : pos + header.size]):
            out.append((bytes(record.key), None if record.value is None else bytes(record.value),
                        record.timestamp))
    return out


# --- Kafka's record schemas, decoded here from the bytes (not with samsa's decoder) -----------


def decode_key(key: bytes) -> tuple[Any, ...]:
    r = Reader(key)
    version = r.take(">h")
    if version in (0, 1):  # OffsetCommitKey: group, topic, partition
        decoded: tuple[Any, ...] = ("offset", version, r.string(), r.string(), r.take(">i"))
    else:  # GroupMetadataKey v2: group
        decoded = ("group", version, r.string())
    assert r.done(), key
    return decoded


def decode_offset_value_v3(value: bytes) -> dict[str, Any]:
    r = Reader(value)
    assert r.take(">h") == 3
    out = {"offset": r.take(">q"), "leaderEpoch": r.take(">i"), "metadata": r.string(),
           "commitTimestamp": r.take(">q")}
    assert r.done()
    return out


def decode_group_value_v3(value: bytes) -> dict[str, Any]:
    r = Reader(value)
    assert r.take(">h") == 3
    out: dict[str, Any] = {"protocolType": r.string(), "generation": r.take(">i"),
                           "protocol": r.string(), "leader": r.string(),
                           "currentStateTimestamp": r.take(">q"), "members": []}
    for _ in range(r.take(">i")):
        out["members"].append({
            "memberId": r.string(), "groupInstanceId": r.string(), "clientId": r.string(),
            "clientHost": r.string(), "rebalanceTimeout": r.take(">i"),
            "sessionTimeout": r.take(">i"), "subscription": r.blob(), "assignment": r.blob(),
        })
    assert r.done()
    return out


# --- the samsa server process ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(data: Path, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [SAMSA, "server", "--override", f"log.dirs={data}",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", "group.min.session.timeout.ms=100",
         "--override", "group.initial.rebalance.delay.ms=0"],
        stdout=subprocess.DEVNULL, stderr=log.open("ab"),
    )

    def ready() -> bool:
        assert proc.poll() is None, f"samsa server exited: {log.read_text()}"
        try:
            with Client(port, timeout=2) as c:
                c.request(18, 0, {})  # ApiVersions
            return True
        except OSError:
            return False

    try:
        wait_for(ready, timeout=30, what="samsa server")
    except AssertionError:
        proc.kill()
        proc.wait(10)
        raise
    return proc


# --- clean restart ----------------------------------------------------------------------------


def test_clean_restart_keeps_offsets_and_the_stable_group(tmp_path):
    data = tmp_path / "data"
    with (
        samsa.Broker(data, **KEYS) as b,
        Client(b.port, "back") as c1,
        Client(b.port, "gone") as c2,
    ):
        c1.create_topic("t", 2)
        back, gone = form_group([c1, c2], "g", session_ms=1500, protocols=[SUB_T, SUB_T])
        assert back.client.commit("g", {("t", 0): (42, "meta", 3), ("t", 1): 43},
                                  generation=back.generation, member_id=back.member_id
                                  ) == {("t", 0): E.none, ("t", 1): E.none}
        assert c1.commit("solo", {("t", 1): (9, "standalone", -1)}) == {("t", 1): E.none}
        before = described(c1, "g")
    generation = back.generation

    with samsa.Broker(data, **KEYS) as b:
        start = time.monotonic()
        with Client(b.port, "back") as c:
            assert offsets_of(c, "g") == {("t", 0): (42, "meta", 3), ("t", 1): (43, "", -1)}
            assert offsets_of(c, "solo") == {("t", 1): (9, "standalone", -1)}

            group = described(c, "g")
            assert (group.group_state, group.protocol_type, group.protocol_data) == (
                "Stable", "consumer", "range"
            )
            assert group.members == before.members  # ids, client ids, hosts, metadata, assignment
            assert {m.member_id for m in group.members} == {back.member_id, gone.member_id}

            back.client = c
            assert back.heartbeat() == E.none
            assert c.heartbeat("g", generation + 1, back.member_id) == E.illegal_generation
            synced = c.sync("g", generation, back.member_id)
            assert (synced.error_code, synced.assignment) == (E.none, back.assignment)
            assert c.commit("g", {("t", 0): 44}, generation=generation,
                            member_id=back.member_id) == {("t", 0): E.none}

            # The member that never comes back is dropped after its session timeout.
            codes = []
            while time.monotonic() - start < 8:
                codes.append(back.heartbeat())
                if codes[-1] != E.none:
                    break
                time.sleep(0.2)
            assert codes[-1] == E.rebalance_in_progress, codes
            assert time.monotonic() - start >= 1.0
            assert [m.member_id for m in described(c, "g").members] == [back.member_id]
            assert c.heartbeat("g", generation, gone.member_id) == E.unknown_member_id
            r = c.join("g", back.member_id, session_ms=1500, protocols=SUB_T)
            assert (r.error_code, r.generation_id, [m.member_id for m in r.members]) == (
                E.none, generation + 1, [back.member_id]
            )


def test_static_membership_survives_a_restart(tmp_path):
    data = tmp_path / "data"
    with samsa.Broker(data, **KEYS) as b, Client(b.port, "s") as c:
        (s,) = form_group([c], "g", instance_ids=["inst-1"])
    with (
        samsa.Broker(data, **KEYS) as b,
        Client(b.port, "old") as old,
        Client(b.port, "new") as new,
    ):
        assert old.heartbeat("g", s.generation, s.member_id, instance_id="inst-1") == E.none
        r = new.join("g", instance_id="inst-1")
        assert r.error_code == E.none
        assert r.member_id != s.member_id
        assert r.generation_id == s.generation
        assert old.heartbeat("g", s.generation, s.member_id, instance_id="inst-1") == (
            E.fenced_instance_id
        )
        assert new.sync("g", r.generation_id, r.member_id, instance_id="inst-1").assignment == (
            s.assignment
        )


def test_an_emptied_group_restarts_empty(tmp_path):
    data = tmp_path / "data"
    with samsa.Broker(data, **KEYS) as b, Client(b.port) as c:
        c.create_topic("t")
        (m,) = form_group([c], "g")
        assert c.commit("g", {("t", 0): 5}, generation=m.generation, member_id=m.member_id) == {
            ("t", 0): E.none
        }
        assert c.leave("g", m.member_id) == E.none
    with samsa.Broker(data, **KEYS) as b, Client(b.port) as c:
        group = described(c, "g")
        assert (group.group_state, group.members) == ("Empty", ())
        assert c.committed("g", "t", 0) == 5
        assert c.heartbeat("g", m.generation, m.member_id) == E.unknown_member_id
        r = c.join_new("g")
        assert r.generation_id == m.generation + 2  # the leave made one generation, this one


def test_deleted_group_stays_deleted_after_a_restart(tmp_path):
    data = tmp_path / "data"
    with samsa.Broker(data, **KEYS) as b, Client(b.port) as c:
        c.create_topic("t")
        assert c.commit("g", {("t", 0): 5}) == {("t", 0): E.none}
        assert c.delete_groups("g") == {"g": E.none}
    with samsa.Broker(data, **KEYS) as b, Client(b.port) as c:
        assert c.committed("g", "t", 0) == -1
        assert described(c, "g").group_state == "Dead"


# --- unclean stop -----------------------------------------------------------------------------


def test_committed_offsets_survive_sigkill(tmp_path):
    data, log = tmp_path / "data", tmp_path / "server.log"
    port = free_port()
    proc = start_server(data, port, log)
    try:
        with Client(port) as c, Client(port, "member") as mc:
            c.create_topic("t", 2)
            assert c.commit("solo", {("t", 0): (10, "a", 1), ("t", 1): 11}) == {
                ("t", 0): E.none, ("t", 1): E.none
            }
            (m,) = form_group([mc], "g", protocols=[SUB_T])
            assert mc.commit("g", {("t", 0): 20}, generation=m.generation,
                             member_id=m.member_id) == {("t", 0): E.none}
            assert c.commit("solo", {("t", 1): 12}) == {("t", 1): E.none}  # the latest wins
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    assert not (data / ".kafka_cleanshutdown").exists()

    proc = start_server(data, port, log)
    try:
        with Client(port) as c:
            assert offsets_of(c, "solo") == {("t", 0): (10, "a", 1), ("t", 1): (12, "", -1)}
            assert offsets_of(c, "g") == {("t", 0): (20, "", -1)}
            group = described(c, "g")
            assert group.group_state == "Stable"
            assert [(x.member_id, x.member_assignment) for x in group.members] == [
                (m.member_id, m.assignment)
            ]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(30) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


# --- the records --------------------------------------------------------------------------------


def test_consumer_offsets_records_are_kafka_formats(tmp_path):
    data = tmp_path / "data"
    group_id = "format-check"
    partition = java_partition_for(group_id)
    with samsa.Broker(data, **KEYS) as b, Client(b.port) as c, Client(b.port, "fmt") as mc:
        c.create_topic("t")
        t0 = now_ms()
        (m,) = form_group([mc], group_id, protocols=[SUB_T], session_ms=7000, rebalance_ms=8000)
        assert mc.commit(group_id, {("t", 0): (77, "hello", 4)}, generation=m.generation,
                         member_id=m.member_id) == {("t", 0): E.none}
        t1 = now_ms()

        topic = c.metadata([OFFSETS_TOPIC]).topics[0]
        assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (E.none, True, 50)
        records = records_of(c, partition)
        for other in range(50):
            if other != partition:
                assert all(group_id.encode() not in key for key, _, _ in records_of(c, other))

    decoded = [(decode_key(k), v, ts) for k, v, ts in records]
    group_records = [(v, ts) for k, v, ts in decoded if k == ("group", 2, group_id)]
    offset_records = [(v, ts) for k, v, ts in decoded if k == ("offset", 1, group_id, "t", 0)]
    assert len(decoded) == len(group_records) + len(offset_records)

    value, _ = group_records[-1]
    assert value is not None
    group = decode_group_value_v3(value)
    assert t0 <= group.pop("currentStateTimestamp") <= t1
    assert group == {
        "protocolType": "consumer", "generation": m.generation, "protocol": "range",
        "leader": m.member_id,
        "members": [{
            "memberId": m.member_id, "groupInstanceId": None, "clientId": "fmt",
            "clientHost": "/127.0.0.1", "rebalanceTimeout": 8000, "sessionTimeout": 7000,
            "subscription": subscription("t"), "assignment": m.assignment,
        }],
    }

    ((value, timestamp),) = offset_records
    assert value is not None
    offset = decode_offset_value_v3(value)
    assert t0 <= offset.pop("commitTimestamp") <= t1
    assert offset == {"offset": 77, "leaderEpoch": 4, "metadata": "hello"}
    assert t0 <= timestamp <= t1

    # kafka-dump-log's view of the same segment shows the same keys.
    segment = sorted((data / f"{OFFSETS_TOPIC}-{partition}").glob("*.log"))[0]
    out = subprocess.run([SAMSA, "dump-log", "--print-data-log", str(segment)],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    for key, _, _ in records:
        assert f"key: {key!r}" in out


# --- offsets.retention.minutes ----------------------------------------------------------------


def commit_as(m: Member, offsets: dict[tuple[str, int], Any]) -> None:
    codes = m.client.commit(m.group, offsets, generation=m.generation, member_id=m.member_id)
    assert set(codes.values()) == {E.none}, codes


def test_offsets_retention(tmp_path):
    data = tmp_path / "data"
    with (
        samsa.Broker(data, **KEYS) as b,
        Client(b.port) as c,
        Client(b.port, "e") as ec,
        Client(b.port, "a") as ac,
    ):
        c.create_topic("t", 2)
        (e,) = form_group([ec], "emptied", protocols=[SUB_T])
        commit_as(e, {("t", 0): 5, ("t", 1): 6})
        assert ec.leave("emptied", e.member_id) == E.none
        assert c.commit("solo", {("t", 0): 1}) == {("t", 0): E.none}
        (a,) = form_group([ac], "active", protocols=[SUB_T])
        commit_as(a, {("t", 0): 7})

        coordinator = b.server.group_coordinator
        assert coordinator is not None
        retention_ms = coordinator.retention_ms
        assert retention_ms == 7 * 24 * 60 * 60_000
        now = now_ms()

        on_loop(b, lambda: coordinator.expire_offsets(now + retention_ms - 60_000))
        assert offsets_of(c, "emptied") == {("t", 0): (5, "", -1), ("t", 1): (6, "", -1)}
        assert offsets_of(c, "solo") == {("t", 0): (1, "", -1)}

        on_loop(b, lambda: coordinator.expire_offsets(now + retention_ms + 1))
        assert offsets_of(c, "emptied") == {}
        assert c.committed("emptied", "t", 0) == -1
        assert offsets_of(c, "solo") == {}
        assert described(c, "emptied").group_state == "Dead"
        assert described(c, "solo").group_state == "Dead"
        # A group with members keeps the offsets of the topics it consumes.
        assert offsets_of(c, "active") == {("t", 0): (7, "", -1)}
        assert a.heartbeat() == E.none

        # Tombstones: the last record of every expired key has a null value.
        last: dict[tuple[Any, ...], bytes | None] = {}
        for group_id in ("emptied", "solo"):
            for key, value, _ in records_of(c, java_partition_for(group_id)):
                last[decode_key(key)] = value
        for key in [("offset", 1, "emptied", "t", 0), ("offset", 1, "emptied", "t", 1),
                    ("offset", 1, "solo", "t", 0), ("group", 2, "emptied")]:
            assert key in last and last[key] is None, key

    # The tombstones hold across a restart.
    with samsa.Broker(data, **KEYS) as b, Client(b.port) as c:
        assert offsets_of(c, "emptied") == {}
        assert offsets_of(c, "solo") == {}
        assert offsets_of(c, "active") == {("t", 0): (7, "", -1)}


def test_offsets_retention_of_unsubscribed_topics_in_a_stable_group(tmp_path):
    """Kafka (KIP-496): a Stable consumer group keeps the offsets of the topics it subscribes
    to; offsets of other topics expire by their commit time."""
    with (
        samsa.Broker(tmp_path / "data", **KEYS) as b,
        Client(b.port) as c,
        Client(b.port, "a") as ac,
    ):
        c.create_topic("t")
        c.create_topic("u")
        (a,) = form_group([ac], "active", protocols=[SUB_T])
        commit_as(a, {("t", 0): 7, ("u", 0): 8})
        coordinator = b.server.group_coordinator
        assert coordinator is not None
        expire_at = now_ms() + coordinator.retention_ms + 1
        on_loop(b, lambda: coordinator.expire_offsets(expire_at))
        assert offsets_of(c, "active") == {("t", 0): (7, "", -1)}

