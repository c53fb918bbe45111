"""What one request costs the broker, measured on the broker rather than through a client.

For each request type, a broker process (``samsa server`` on a fresh log directory and a free
loopback port) answers ``--requests`` identical requests sent one at a time over one
connection, from frames encoded once (``samsa.protocol.client``), so the client costs almost
nothing. Two figures per request type:

* ``calls``: Python function calls per request, counted by cProfile in a second run of the
  broker under ``python -m cProfile``. Deterministic: the same code gives the same count on a
  busy or an idle machine, so two versions compare exactly even where timings cannot.
* ``cpu_us``: the broker process's CPU time per request (utime + stime of ``/proc/<pid>/stat``,
  unprofiled), best of ``--rounds``. Timings on a shared machine only ever get worse, hence
  the best.

Request types: ``produce`` (Produce v9, one 100-byte message, acks=1), ``metadata`` (Metadata
v12 for one topic), ``list_offsets`` (ListOffsets v7, latest offset of one partition).

    .venv/bin/python bench/request_cost.py
    git worktree add /tmp/old <commit>                 # two versions, interleaved, one run:
    .venv/bin/python bench/request_cost.py --baseline /tmp/old
    .venv/bin/python bench/request_cost.py --metrics   # metrics on against off, interleaved

Output: one JSON line per (version, request type) on stdout, a table on stderr.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pstats
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.schema.list_offsets.v7.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from samsa.protocol.client import SIZE, ClientCodec
from samsa.records.record import RecordInput, encode_batch

from proc_cpu import cpu_seconds

PROJECT_DIR = Path(__file__).resolve().parent.parent
TOPIC = "cost"
WARMUP = 500


def _produce() -> tuple[int, int, Any]:
    batch = encode_batch([RecordInput(key=None, value=b"x" * 100, timestamp=1_700_000_000_000)])
    return 0, 9, ProduceRequest(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(name=TOPIC, partition_data=(
            PartitionProduceData(index=0, records=batch),)),))


def _metadata() -> tuple[int, int, Any]:
    return 3, 12, MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=TOPIC),),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def _list_offsets() -> tuple[int, int, Any]:
    return 2, 7, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=(
        ListOffsetsTopic(name=TOPIC, partitions=(
            ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=-1),)),))


REQUESTS: dict[str, Callable[[], tuple[int, int, Any]]] = {
    "produce": _produce, "metadata": _metadata, "list_offsets": _list_offsets,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client:
    """One connection sending pre-encoded frames, one at a time."""

    def __init__(self, port: int, deadline: float) -> None:
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.codec = ClientCodec("request-cost")

    def request(self, api_key: int, version: int, body: Any) -> Any:
        frame, sent = self.codec.encode(api_key, version, body)
        self.sock.sendall(frame)
        return self.codec.decode(sent, self._read(self.codec.frame_size(self._read(SIZE.size))))

    def repeat(self, frame: bytes, count: int) -> None:
        """Send ``frame`` ``count`` times, each after the previous answer (not decoded)."""
        for _ in range(count):
            self.sock.sendall(frame)
            self._read(self.codec.frame_size(self._read(SIZE.size)))

    def _read(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)


def measure(tree: Path, kind: str, requests: int, profile: Path | None,
            overrides: tuple[str, ...] = ()) -> float:
    """Broker CPU µs per request of ``kind`` for the samsa in ``tree`` (started with
    ``overrides``, KEY=VALUE); with ``profile``, run the broker under cProfile, writing its
    stats there."""
    with tempfile.TemporaryDirectory(prefix="request-cost-") as data:
        port = free_port()
        python = [sys.executable] + (["-m", "cProfile", "-o", str(profile)] if profile else [])
        proc = subprocess.Popen(
            [*python, "-m", "samsa.cli", "server", "--override", f"log.dirs={data}",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
             *(arg for o in overrides for arg in ("--override", o))],
            cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client = Client(port, time.monotonic() + 60)
            client.request(3, 12, MetadataRequest(  # creates the topic
                topics=(MetadataRequestTopic(topic_id=None, name=TOPIC),),
                allow_auto_topic_creation=True, include_topic_authorized_operations=False))
            deadline = time.monotonic() + 60
            while client.request(*_list_offsets()).topics[0].partitions[0].error_code != 0:
                if time.monotonic() > deadline:
                    raise RuntimeError("the topic never became available")
                time.sleep(0.05)
            api_key, version, body = REQUESTS[kind]()
            frame, _ = client.codec.encode(api_key, version, body)
            client.repeat(frame, WARMUP)
            before = cpu_seconds(proc.pid)
            client.repeat(frame, requests)
            cpu = cpu_seconds(proc.pid) - before
            client.sock.close()
        finally:
            interrupt(proc)
    return cpu / requests * 1e6


def interrupt(proc: subprocess.Popen[bytes], wait_s: float = 60) -> None:
    """SIGINT, as Ctrl-C; killed if it has not ended within ``wait_s``."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def calls_per_request(tree: Path, kind: str, requests: int, workdir: Path,
                      overrides: tuple[str, ...] = ()) -> float:
    """Function calls per request: the difference between two profiled runs (``requests`` and
    twice as many), so start-up and shutdown cancel out."""
    counts = []
    for n in (requests, 2 * requests):
        out = workdir / f"{kind}-{n}.prof"
        measure(tree, kind, n, out, overrides)
        counts.append(pstats.Stats(str(out)).total_calls)  # type: ignore[attr-defined]
    return (counts[1] - counts[0]) / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another samsa source tree, measured interleaved with this one")
    parser.add_argument("--metrics", action="store_true",
                        help="also this samsa with its metrics on (prometheus.listener), "
                        "interleaved with it")
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(REQUESTS))
    args = parser.parse_args()
    # each variant: a source tree and the overrides its broker starts with
    trees: dict[str, tuple[Path, tuple[str, ...]]] = {"samsa": (PROJECT_DIR, ())}
    if args.baseline is not None:
        if not (args.baseline / "samsa" / "cli.py").exists():
            parser.error(f"--baseline {args.baseline} is not a samsa source tree")
        trees["samsa-base"] = (args.baseline.resolve(), ())
    if args.metrics:
        trees["samsa-metrics"] = (PROJECT_DIR, ("prometheus.listener=http://127.0.0.1:0",))
    kinds = args.kinds.split(",")
    unknown = set(kinds) - set(REQUESTS)
    if unknown:
        parser.error(f"unknown request kinds: {', '.join(sorted(unknown))}")
    results: dict[tuple[str, str], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="request-cost-prof-") as workdir:
        for kind in kinds:
            cpu: dict[str, list[float]] = {name: [] for name in trees}
            for round_ in range(args.rounds):
                order = list(trees.items())
                for name, (tree, overrides) in order if round_ % 2 == 0 else reversed(order):
                    cpu[name].append(measure(tree, kind, args.requests, None, overrides))
            for name, (tree, overrides) in trees.items():
                calls = calls_per_request(tree, kind, max(args.requests // 5, 200), Path(workdir),
                                          overrides)
                line = {"broker": name, "request": kind, "calls": round(calls, 1),
                        "cpu_us": round(min(cpu[name]), 1),
                        "repeats": [round(c, 1) for c in cpu[name]]}
                results[(name, kind)] = line
                print(json.dumps(line), flush=True)
    print(f"\n{'request':<14}" + "".join(f"{n + ' calls':>18}{n + ' cpu_us':>18}" for n in trees),
          file=sys.stderr)
    for kind in kinds:
        row = f"{kind:<14}"
        for name in trees:
            line = results[(name, kind)]
            row += f"{line['calls']:>18.1f}{line['cpu_us']:>18.1f}"
        if "samsa-metrics" in trees:
            on, off = results[("samsa-metrics", kind)], results[("samsa", kind)]
            row += f"  metrics on/off: cpu {on['cpu_us'] / off['cpu_us']:.3f}x"
            row += f", calls {on['calls'] / off['calls']:.3f}x"
        print(row, file=sys.stderr)


if __name__ == "__main__":
    main()
