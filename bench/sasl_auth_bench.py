"""The cost of authenticating a connection: connections set up per second, and the broker's CPU
per connection, for each way in.

One samsa broker process (``python -m samsa.cli server``) with four listeners on loopback:
PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (PLAIN and SCRAM-SHA-256; a CA and key store made
for the run; the SCRAM user's credential, 4096 iterations, written into its metadata dir before
it starts). Client processes (``--clients``, default 2) each open connections in a loop for
``--duration`` seconds, one variant after the other:

* ``plaintext``: connect, ApiVersions v0, close (the baseline: a connection and one request);
* ``ssl``: the same over TLS (a full handshake each time: no session resumption);
* ``sasl_plain``: SASL_PLAINTEXT, ApiVersions, SaslHandshake v1, one SaslAuthenticate (PLAIN);
* ``sasl_scram``: SASL_PLAINTEXT with SCRAM-SHA-256: SaslHandshake and two SaslAuthenticate;
* ``sasl_ssl_scram``: SCRAM-SHA-256 over TLS, what a SASL_SSL client pays per connection.

A connection counts once the broker answered its last request (ApiVersions, or the final
SaslAuthenticate). The clients are samsa's own sans-IO SCRAM client
(``samsa.security.sasl.scram.ScramClient``) over blocking sockets, with its PBKDF2 (the salted
password, 4096 iterations) computed once per client process, as a real client computes it once
per password: what is left is what every connection costs. The broker's CPU (utime + stime of
its process, /proc) is read before and after each variant.

    .venv/bin/python bench/sasl_auth_bench.py                 # about 30 s
    .venv/bin/python bench/sasl_auth_bench.py --clients 4 --duration 10

One JSON line per variant on stdout, a table on stderr. Timings never fail the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import multiprocessing
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from proc_cpu import cpu_seconds

PROJECT_DIR = Path(__file__).resolve().parent.parent
USER, PASSWORD = "bench", "bench-secret"
VARIANTS = ("plaintext", "ssl", "sasl_plain", "sasl_scram", "sasl_ssl_scram")
LISTENER = {"plaintext": "PLAINTEXT", "ssl": "SSL", "sasl_plain": "SASL_PLAINTEXT",
            "sasl_scram": "SASL_PLAINTEXT", "sasl_ssl_scram": "SASL_SSL"}
_SIZE = struct.Struct(">i")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- the client side -----------------------------------------------------------------------------


class Frames:
    """Requests on one blocking socket (v1 request headers: ApiVersions v0, SaslHandshake v1,
    SaslAuthenticate v0 are not flexible)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.correlation = 0

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        self.correlation += 1
        header = struct.pack(">hhih", api_key, version, self.correlation, 5) + b"bench"
        self.sock.sendall(_SIZE.pack(len(header) + len(body)) + header + body)
        (size,) = _SIZE.unpack(self._read(4))
        frame = self._read(size)
        if _SIZE.unpack_from(frame)[0] != self.correlation:
            raise RuntimeError("answered another request")
        return frame[4:]

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(data: bytes) -> bytes:
    return _SIZE.pack(len(data)) + data


def authenticate(frames: Frames, token: bytes) -> bytes:
    """SaslAuthenticate v0: error code, error message, auth bytes."""
    answer = frames.request(36, 0, _bytes(token))
    (error,) = struct.unpack_from(">h", answer)
    if error:
        raise RuntimeError(f"SaslAuthenticate failed with error {error}")
    (length,) = struct.unpack_from(">h", answer, 2)
    at = 4 + max(length, 0)
    (size,) = _SIZE.unpack_from(answer, at)
    return answer[at + 4:at + 4 + size]


def one_connection(variant: str, port: int, context: ssl.SSLContext | None) -> None:
    from samsa.security.sasl.plain import plain_client_message
    from samsa.security.sasl.scram import ScramClient, ScramMechanism

    with socket.create_connection(("127.0.0.1", port)) as raw:
        sock = context.wrap_socket(raw, server_hostname="127.0.0.1") if context else raw
        frames = Frames(sock)
        frames.request(18, 0, b"")  # ApiVersions
        if variant in ("plaintext", "ssl"):
            return
        mechanism = "PLAIN" if variant == "sasl_plain" else "SCRAM-SHA-256"
        (error,) = struct.unpack_from(">h", frames.request(17, 1, _string(mechanism)))
        if error:
            raise RuntimeError(f"SaslHandshake failed with error {error}")
        if mechanism == "PLAIN":
            authenticate(frames, plain_client_message(USER, PASSWORD))
            return
        client = ScramClient(ScramMechanism.SCRAM_SHA_256, USER, PASSWORD)
        message: bytes | None = client.first_message()
        while message is not None:
            message = client.evaluate(authenticate(frames, message))
        assert client.complete


def client_loop(variant: str, port: int, ca_file: str, seconds: float,
                start_at: float, queue: Any) -> None:
    from samsa.security.sasl.scram import ScramMechanism

    # the PBKDF2 of a password: once per client process, as a client does it once per password
    original = ScramMechanism.salted_password
    cached = functools.lru_cache(maxsize=8)(lambda m, p, s, i: original(m, p, s, i))
    ScramMechanism.salted_password = lambda self, p, s, i: cached(self, p, s, i)  # type: ignore
    context = (ssl.create_default_context(cafile=ca_file)
               if variant in ("ssl", "sasl_ssl_scram") else None)
    one_connection(variant, port, context)  # warm-up: imports, the salted password
    while time.time() < start_at:
        time.sleep(0.001)
    done = errors = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        try:
            one_connection(variant, port, context)
            done += 1
        except (OSError, RuntimeError):
            errors += 1
    queue.put((done, errors, time.perf_counter() - t0))


# --- the broker --------------------------------------------------------------------------------


def start_broker(workdir: Path) -> tuple[subprocess.Popen[bytes], dict[str, int], Path]:
    sys.path.insert(0, str(PROJECT_DIR))
    from samsa.cluster.scram import LocalScramStore
    from samsa.security.ca import LOCAL_HOSTS, CertificateAuthority
    from samsa.security.sasl.jaas import PLAIN_LOGIN_MODULE, jaas_config

    ca = CertificateAuthority("CN=sasl-auth-bench CA")
    ca_file = ca.write(workdir / "ca.pem")
    keystore = ca.issue("CN=localhost", hosts=LOCAL_HOSTS).write_keystore(workdir / "b.pem")
    data = workdir / "data"
    data.mkdir()
    asyncio.run(LocalScramStore(data).set_passwords({USER: PASSWORD}, ["SCRAM-SHA-256"]))
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    settings = {
        "log.dirs": str(data),
        "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "sasl.jaas.config": jaas_config(PLAIN_LOGIN_MODULE, {f"user_{USER}": PASSWORD}),
    }
    command = [sys.executable, "-m", "samsa.cli", "server"]
    for key, value in settings.items():
        command += ["--override", f"{key}={value}"]
    env = {**os.environ, "PYTHONPATH": str(PROJECT_DIR)}
    with open(workdir / "broker.log", "ab") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    deadline = time.monotonic() + 30
    while True:
        try:
            one_connection("plaintext", ports["PLAINTEXT"], None)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the broker did not start: "
                                   + (workdir / "broker.log").read_text()[-500:]) from None
            time.sleep(0.01)
    return proc, ports, ca_file


def run_variant(variant: str, port: int, ca_file: Path, clients: int, seconds: float,
                pid: int) -> dict[str, Any]:
    queue: Any = multiprocessing.Queue()
    start_at = time.time() + 1.0  # every client warmed up
    processes = [multiprocessing.Process(target=client_loop, args=(
        variant, port, str(ca_file), seconds, start_at, queue)) for _ in range(clients)]
    for p in processes:
        p.start()
    while time.time() < start_at:
        time.sleep(0.001)
    cpu0 = cpu_seconds(pid)
    outcomes = [queue.get(timeout=seconds + 60) for _ in processes]
    cpu1 = cpu_seconds(pid)
    for p in processes:
        p.join(10)
    done = sum(o[0] for o in outcomes)
    errors = sum(o[1] for o in outcomes)
    elapsed = max(o[2] for o in outcomes)
    return {"variant": variant, "listener": LISTENER[variant], "clients": clients,
            "connections": done, "errors": errors, "seconds": round(elapsed, 3),
            "connections_per_s": round(done / elapsed, 1),
            "broker_cpu_us_per_connection": round((cpu1 - cpu0) / done * 1e6, 1) if done else None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="connections authenticated per second")
    parser.add_argument("--clients", type=int, default=2, help="client processes (default 2)")
    parser.add_argument("--duration", type=float, default=5.0,
                        help="seconds per variant (default 5)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, from: {', '.join(VARIANTS)}")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sasl-auth-bench-") as tmp:
        proc = None
        try:
            proc, ports, ca_file = start_broker(Path(tmp))
            log(f"sasl auth bench: broker pid {proc.pid}, {args.clients} client processes, "
                f"{args.duration:g} s per variant, {os.cpu_count()} CPUs")
            for variant in variants:
                line = run_variant(variant, ports[LISTENER[variant]], ca_file, args.clients,
                                   args.duration, proc.pid)
                results.append(line)
                print(json.dumps(line), flush=True)
        except Exception as exc:  # timings never fail the run
            log(f"sasl auth bench failed: {type(exc).__name__}: {exc}")
        finally:
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(10)
                if proc.poll() is None:
                    proc.kill()
    if results:
        table = [["variant", "listener", "conn/s", "broker CPU us/conn", "errors"]]
        for r in results:
            table.append([r["variant"], r["listener"], f"{r['connections_per_s']:,.0f}",
                          f"{r['broker_cpu_us_per_connection'] or 0:,.0f}", str(r["errors"])])
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        log("")
        for i, row in enumerate(table):
            log(" | ".join(c.ljust(widths[j]) if j < 2 else c.rjust(widths[j])
                           for j, c in enumerate(row)))
            if i == 0:
                log("-+-".join("-" * w for w in widths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
