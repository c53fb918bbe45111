"""A broker's request capacity: requests per second per core of the broker, under load.

bench/request_cost.py sends one request at a time, so each request pays a whole round trip of
wake-ups. Here several loader processes keep ``--window`` requests in flight on each of their
connections (pipelined, as real clients do with several partitions and in-flight requests), from
frames encoded once and answers counted, never decoded: the loaders cost the machine little, and
the broker, one event loop on one core, is what saturates. The figures are the broker's own:

* ``req/s``: answers per second over the measured interval, all loaders together;
* ``broker cores``: the broker process's CPU time (``/proc/<pid>/stat``) over that interval,
  divided by its length (1.0: one core busy all the time);
* ``cpu_us``: broker CPU microseconds per request; ``per core``: ``1e6 / cpu_us``, the requests
  one core of the broker answers per second when it does nothing else.

Request kinds: ``produce`` (Produce v9, one 100-byte message, acks=1), ``fetch`` (Fetch v12 of a
partition's first one-message batch, answered at once), ``fetch_region`` (Fetch v12 of 256 KiB of
whole batches, sent with sendfile), ``wakeup`` (long-polls: consumers wait at
the end of a partition, a producer appends one message at a time and every append wakes them;
counts fetch answers and produce answers), ``metadata`` (Metadata v12, one topic), ``heartbeat``
(Heartbeat v4 of a one-member group per connection), ``offset_commit`` (OffsetCommit v8, one
partition, a group of its own per connection).

    .venv/bin/python bench/request_capacity.py
    .venv/bin/python bench/request_capacity.py --baseline /tmp/old   # two trees, interleaved
    .venv/bin/python bench/request_capacity.py --profile /tmp/p      # cProfile of each kind
    .venv/bin/python bench/request_capacity.py --kinds produce --floor  # beside asyncio_floor.py

Output: one JSON line per (tree, kind) on stdout, a table on stderr.
"""

from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v5.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.static.primitive import i32Timedelta

from samsa.protocol.client import ClientCodec
from samsa.records.record import RecordInput, encode_batch

from proc_cpu import cpu_seconds
from request_cost import Client, interrupt

PROJECT_DIR = Path(__file__).resolve().parent.parent
TOPIC = "capacity"
_SIZE = struct.Struct(">i")
KINDS = ("produce", "fetch", "fetch_region", "wakeup", "metadata", "heartbeat", "offset_commit")
# fetch_region: a consumer's (or a follower's) fetch of 256 KiB of whole batches, a file region
# the broker sends with sendfile
REGION_BYTES = 256 * 1024
REGION_BATCH_RECORDS = 1000  # 100-byte values: batches of about 110 KB
REGION_SEED_BATCHES = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


def produce_body(value: bytes = b"x" * 100, count: int = 1) -> ProduceRequest:
    batch = encode_batch([RecordInput(key=None, value=value, timestamp=1_700_000_000_000)
                          for _ in range(count)])
    return ProduceRequest(
        transactional_id=None, acks=1, timeout=_ms(30_000),
        topic_data=(TopicProduceData(name=TOPIC, partition_data=(
            PartitionProduceData(index=0, records=batch),)),))


def fetch_body(offset: int, max_wait_ms: int, partition: int = 0,
               partition_max_bytes: int = 1) -> FetchRequest:
    return FetchRequest(
        replica_id=-1, max_wait=i32Timedelta.parse(_ms(max_wait_ms)), min_bytes=1,
        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=(FetchTopic(topic=TOPIC, partitions=(FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset,
            log_start_offset=-1, partition_max_bytes=partition_max_bytes),)),),
        forgotten_topics_data=(), rack_id="")


class Conn(Client):
    """One blocking connection: requests decoded for set-up, pipelined raw frames for load."""

    def __init__(self, port: int, name: str) -> None:
        super().__init__(port, time.monotonic() + 60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.codec = ClientCodec(name)

    def frame(self, api_key: int, version: int, body: Any) -> bytes:
        return self.codec.encode(api_key, version, body)[0]


def pipelined(sock: socket.socket, frame: bytes, window: int, t0: float, t1: float) -> int:
    """Keep ``window`` copies of ``frame`` in flight until ``t1``; the answers that arrived
    between ``t0`` and ``t1``."""
    sock.sendall(frame * window)
    buf = b""
    counted = 0
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
        done, pos = 0, 0
        while len(buf) - pos >= 4:
            (size,) = _SIZE.unpack_from(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            pos += 4 + size
            done += 1
        buf = buf[pos:]
        now = time.monotonic()
        if t0 <= now < t1:
            counted += done
        if now >= t1:
            return counted
        if done:
            sock.sendall(frame * done)


def _setup_frame(conn: Conn, kind: str, index: int) -> bytes:
    """The one frame this loader's connection repeats (after the set-up ``kind`` needs)."""
    if kind == "produce":
        return conn.frame(0, 9, produce_body())
    if kind == "fetch":
        return conn.frame(1, 12, fetch_body(0, 500))
    if kind == "fetch_region":
        for _ in range(REGION_SEED_BATCHES):  # each loader's own, so offset 1 on is filled
            answer = conn.request(0, 9, produce_body(count=REGION_BATCH_RECORDS))
            if answer.responses[0].partition_responses[0].error_code:
                raise RuntimeError("seeding the partition failed")
        return conn.frame(1, 12, fetch_body(1, 500, partition_max_bytes=REGION_BYTES))
    if kind == "metadata":
        return conn.frame(3, 12, MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TOPIC),),
            allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    if kind == "offset_commit":
        return conn.frame(8, 8, OffsetCommitRequest(
            group_id=f"capacity-commit-{index}", generation_id_or_member_epoch=-1,
            member_id="", group_instance_id=None, topics=(OffsetCommitRequestTopic(
                name=TOPIC, partitions=(OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                    committed_metadata=""),)),)))
    if kind == "heartbeat":
        group = f"capacity-heartbeat-{index}"
        member = ""
        for _ in range(3):  # v4+: the first join answers MEMBER_ID_REQUIRED with an id
            joined = conn.request(11, 5, JoinGroupRequest(
                group_id=group, session_timeout=i32Timedelta.parse(_ms(30_000)),
                rebalance_timeout=i32Timedelta.parse(_ms(30_000)), member_id=member,
                group_instance_id=None, protocol_type="consumer",
                protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),)))
            member = joined.member_id
            if joined.error_code == 0:
                break
        else:
            raise RuntimeError(f"JoinGroup failed: {joined.error_code}")
        synced = conn.request(14, 5, SyncGroupRequest(
            group_id=group, generation_id=joined.generation_id, member_id=member,
            group_instance_id=None, protocol_type="consumer", protocol_name="range",
            assignments=(SyncGroupRequestAssignment(member_id=member, assignment=b""),)))
        if synced.error_code != 0:
            raise RuntimeError(f"SyncGroup failed: {synced.error_code}")
        return conn.frame(12, 4, HeartbeatRequest(
            group_id=group, generation_id=joined.generation_id, member_id=member,
            group_instance_id=None))
    raise ValueError(kind)


def load(port: int, kind: str, index: int, window: int, t0: float, t1: float,
         results: Any) -> None:
    """A loader process: one connection, ``window`` requests of ``kind`` in flight."""
    try:
        conn = Conn(port, f"capacity-{index}")
        frame = _setup_frame(conn, kind, index)
        results.put(("ok", pipelined(conn.sock, frame, window, t0, t1)))
        conn.sock.close()
    except BaseException as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def wakeup_consumer(port: int, index: int, t0: float, t1: float, results: Any) -> None:
    """Long-polls at the end of the partition, one fetch in flight; counts its answers."""
    try:
        conn = Conn(port, f"capacity-wait-{index}")
        offset, counted = 0, 0
        while (now := time.monotonic()) < t1:
            response = conn.request(1, 12, fetch_body(offset, 500))
            part = response.responses[0].partitions[0]
            if part.records:
                offset = int(part.high_watermark)
            if t0 <= now and time.monotonic() < t1:
                counted += 1
        results.put(("ok", counted))
    except BaseException as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


def wakeup_producer(port: int, t0: float, t1: float, results: Any) -> None:
    """Appends one message at a time (acks=1), the next after the previous answer."""
    try:
        conn = Conn(port, "capacity-appender")
        results.put(("ok", pipelined(conn.sock, conn.frame(0, 9, produce_body()), 1, t0, t1)))
    except BaseException as exc:
        results.put(("error", f"{type(exc).__name__}: {exc}"))


class Broker:
    """``samsa server`` from ``tree`` on a fresh log directory (under cProfile: ``profile``)."""

    def __init__(self, tree: Path, profile: Path | None = None) -> None:
        self._data = tempfile.TemporaryDirectory(prefix="request-capacity-")
        self.port = free_port()
        python = [sys.executable] + (["-m", "cProfile", "-o", str(profile)] if profile else [])
        self.proc = subprocess.Popen(
            [*python, "-m", "samsa.cli", "server",
             "--override", f"log.dirs={self._data.name}",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
             "--override", "num.partitions=1",
             # each heartbeat loader's one-member group forms at once, not after 3 s
             "--override", "group.initial.rebalance.delay.ms=0"],
            cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        conn = Conn(self.port, "capacity-setup")
        conn.request(3, 12, MetadataRequest(  # creates the topic
            topics=(MetadataRequestTopic(topic_id=None, name=TOPIC),),
            allow_auto_topic_creation=True, include_topic_authorized_operations=False))
        deadline = time.monotonic() + 60
        while conn.request(0, 9, produce_body()).responses[0].partition_responses[0].error_code:
            if time.monotonic() > deadline:
                raise RuntimeError("the topic never became writable")
            time.sleep(0.05)
        conn.sock.close()

    def stop(self) -> None:
        interrupt(self.proc)
        self._data.cleanup()


class FloorServer:
    """bench/asyncio_floor.py: framing and a fixed answer, nothing else (the ``--floor`` peer)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, str(PROJECT_DIR / "bench" / "asyncio_floor.py"), str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("asyncio_floor.py never listened") from None
                time.sleep(0.05)

    def stop(self) -> None:
        interrupt(self.proc)


FLOOR = Path("asyncio-floor")  # the --floor peer's name among the trees


def measure(tree: Path, kind: str, loaders: int, window: int, seconds: float,
            warmup: float, profile: Path | None = None) -> dict[str, float]:
    """One run of ``kind`` against a fresh broker from ``tree``."""
    broker: Broker | FloorServer = FloorServer() if tree == FLOOR else Broker(tree, profile)
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    try:
        start = time.monotonic() + 1.0  # the loaders connect and set up meanwhile
        t0 = start + warmup
        t1 = t0 + seconds
        procs: list[Any] = []
        if kind == "wakeup":
            procs = [ctx.Process(target=wakeup_consumer, args=(broker.port, i, t0, t1, results))
                     for i in range(loaders)]
            procs.append(ctx.Process(target=wakeup_producer,
                                     args=(broker.port, t0, t1, results)))
        else:
            procs = [ctx.Process(target=load,
                                 args=(broker.port, kind, i, window, t0, t1, results))
                     for i in range(loaders)]
        for p in procs:
            p.start()
        time.sleep(max(0.0, t0 - time.monotonic()))
        cpu0 = cpu_seconds(broker.proc.pid)
        time.sleep(max(0.0, t1 - time.monotonic()))
        cpu1 = cpu_seconds(broker.proc.pid)
        answered = 0
        for _ in procs:
            status, value = results.get(timeout=120)
            if status != "ok":
                raise RuntimeError(f"a loader failed: {value}")
            answered += value
        for p in procs:
            p.join(30)
    finally:
        broker.stop()
    cpu = cpu1 - cpu0
    return {"req_per_s": answered / seconds, "broker_cores": cpu / seconds,
            "cpu_us": cpu / answered * 1e6 if answered else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another samsa source tree, measured interleaved with this one")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--floor", action="store_true",
                        help="also measure bench/asyncio_floor.py (produce only): framing alone")
    parser.add_argument("--loaders", type=int, default=4, help="loader processes")
    parser.add_argument("--window", type=int, default=16,
                        help="requests in flight per loader connection")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", type=Path, default=None,
                        help="also run each kind once under cProfile, stats written here")
    args = parser.parse_args()
    trees = {"samsa": PROJECT_DIR}
    if args.baseline is not None:
        if not (args.baseline / "samsa" / "cli.py").exists():
            parser.error(f"--baseline {args.baseline} is not a samsa source tree")
        trees["samsa-base"] = args.baseline.resolve()
    kinds = args.kinds.split(",")
    if args.floor:
        if kinds != ["produce"]:
            parser.error("--floor answers produce requests only: give --kinds produce")
        trees["asyncio-floor"] = FLOOR
    if unknown := set(kinds) - set(KINDS):
        parser.error(f"unknown kinds: {', '.join(sorted(unknown))}")
    best: dict[tuple[str, str], dict[str, float]] = {}
    for kind in kinds:
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
        for round_ in range(args.rounds):
            order = list(trees.items())
            for name, tree in order if round_ % 2 == 0 else reversed(order):
                runs[name].append(measure(tree, kind, args.loaders, args.window, args.seconds,
                                          args.warmup))
        for name in trees:
            pick = min(runs[name], key=lambda r: r["cpu_us"])
            best[(name, kind)] = pick
            print(json.dumps({"broker": name, "request": kind,
                              **{k: round(v, 2) for k, v in pick.items()},
                              "cpu_us_repeats": [round(r["cpu_us"], 2) for r in runs[name]]}),
                  flush=True)
        if args.profile is not None:
            args.profile.mkdir(parents=True, exist_ok=True)
            for name, tree in trees.items():
                if tree == FLOOR:
                    continue
                measure(tree, kind, args.loaders, args.window, args.seconds, args.warmup,
                        args.profile / f"{name}-{kind}.prof")
    header = f"{'request':<14}"
    for name in trees:
        header += f"{name + ' req/s':>20}{'cores':>7}{'cpu_us':>8}{'per core':>10}"
    print("\n" + header, file=sys.stderr)
    for kind in kinds:
        row = f"{kind:<14}"
        for name in trees:
            r = best[(name, kind)]
            row += (f"{r['req_per_s']:>20,.0f}{r['broker_cores']:>7.2f}{r['cpu_us']:>8.1f}"
                    f"{1e6 / r['cpu_us']:>10,.0f}")
        print(row, file=sys.stderr)


if __name__ == "__main__":
    main()
