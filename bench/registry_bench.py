"""Schema registry benchmark: lookups and registrations per second of samsa's registry.

    python bench/registry_bench.py [--seconds 5] [--clients 1,4] [--schemas 100]

An embedded broker (in this process) holds the ``_schemas`` topic; the registry runs as its
own process (``samsa schema-registry``), so that neither the broker nor the load shares its
interpreter. Each client is a process of its own with one keep-alive HTTP/1.1 connection
(``http.client``), sending one request at a time, for ``--seconds``:

* ``GET /schemas/ids/{id}``: ids drawn at random among ``--schemas`` registered Avro schemas
  (what a deserializer asks for a schema id it has not cached);
* ``POST /subjects/{subject}`` (lookup): the schema of a random registered subject (what a
  serializer with ``auto.register.schemas=false`` asks);
* ``POST /subjects/{subject}/versions`` (registration): every request a new schema (a record
  of 5 fields under a new name, each client its own subject at compatibility NONE), so every
  request is a write: parsed, appended to ``_schemas`` with acks=all and read back before the
  answer.

Each line: requests per second over all clients, and the median and 99th percentile latency
of one request.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from samsa.embedded import Broker  # noqa: E402
from samsa.registry.app import CONTENT_TYPE  # noqa: E402
from samsa.tools.zookeeper_server import free_port  # noqa: E402

HEADERS = {"Content-Type": CONTENT_TYPE}


def _schema(name: str, fields: int) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [
        {"name": f"f{i}", "type": "long", "default": 0} for i in range(fields)]})


def _worker(args: tuple[str, int, int, int, float]) -> list[float]:
    """One client's run: the latency of each request."""
    kind, port, schemas, client, seconds = args
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    rng = random.Random(client)
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        n = len(latencies) + 1
        if kind == "ids":
            method, path, body = "GET", f"/schemas/ids/{rng.randint(1, schemas)}", None
        elif kind == "lookup":
            i = rng.randint(1, schemas)
            method, path = "POST", f"/subjects/bench-{i}"
            body = json.dumps({"schema": _schema(f"S{i}", 1)})
        else:
            method, path = "POST", f"/subjects/writer-{client}/versions"
            body = json.dumps({"schema": _schema(f"W{n}", 5)})
        start = time.perf_counter()
        connection.request(method, path, body=body, headers=HEADERS)
        response = connection.getresponse()
        payload = response.read()
        latencies.append(time.perf_counter() - start)
        if response.status != 200:
            raise RuntimeError(f"{method} {path}: {response.status} {payload!r}")
    connection.close()
    return latencies


def _call(url: str, method: str, body: object) -> object:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method=method,
                                     headers=HEADERS)
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", default="1,4")
    parser.add_argument("--schemas", type=int, default=100)
    args = parser.parse_args()
    clients = [int(c) for c in args.clients.split(",")]

    with tempfile.TemporaryDirectory() as data, Broker(data) as broker:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
        registry = subprocess.Popen(
            [sys.executable, "-m", "samsa.cli", "schema-registry", "--bootstrap-server",
             broker.bootstrap_servers, "--listeners", url],
            env=env, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(url + "/", timeout=1).read()
                    break
                except OSError:
                    if time.monotonic() > deadline or registry.poll() is not None:
                        raise RuntimeError("the registry did not start") from None
                    time.sleep(0.1)
            for i in range(1, args.schemas + 1):
                _call(f"{url}/subjects/bench-{i}/versions", "POST",
                      {"schema": _schema(f"S{i}", 1)})
            for c in range(max(clients)):
                _call(f"{url}/config/writer-{c}", "PUT", {"compatibility": "NONE"})
            print(f"registry {url}, broker {broker.bootstrap_servers}, {args.schemas} schemas, "
                  f"{args.seconds:g} s per run, one connection per client process")
            context = multiprocessing.get_context("spawn")
            for kind, label in (("ids", "GET /schemas/ids/{id}"),
                                ("lookup", "POST /subjects/{s} (lookup)"),
                                ("register", "POST /subjects/{s}/versions (register)")):
                for n in clients:
                    with context.Pool(n) as pool:
                        results = pool.map(_worker, [(kind, port, args.schemas, c,
                                                      args.seconds) for c in range(n)])
                    latencies = sorted(x for r in results for x in r)
                    total = len(latencies)
                    p99 = latencies[int(len(latencies) * 0.99) - 1]
                    print(json.dumps({
                        "request": label, "clients": n,
                        "per_s": round(total / args.seconds),
                        "median_ms": round(statistics.median(latencies) * 1000, 2),
                        "p99_ms": round(p99 * 1000, 2)}))
        finally:
            registry.send_signal(signal.SIGTERM)
            registry.wait(30)


if __name__ == "__main__":
    main()
