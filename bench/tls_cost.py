"""What TLS costs the broker on the produce path, measured on the broker rather than through a
client.

The broker bench's SSL produce figures are bound by librdkafka: it writes one TLS record per
message (an ``SSL_write`` per buffer segment), which costs it several times its PLAINTEXT CPU,
and it shares the machine's cores with the broker. Here the client does almost nothing: one
broker process (``samsa server`` with a PLAINTEXT and an SSL listener, a throwaway CA, a
fresh log directory) gets ``--requests`` Produce v9 requests (one partition, acks=1, a batch of
50 records of 200 bytes, as the paper's batch-50 workload), framed and encrypted before the
clock starts, sent back to back over one connection by one thread while another reads and
counts the answers. Three ways to send them:

* ``plaintext``: the PLAINTEXT listener.
* ``ssl_request``: the SSL listener, each request written at once (TLS records of up to 16 KiB:
  one per request here), as Kafka's Java client and the Python clients write.
* ``ssl_message``: the SSL listener, each request in as many records as librdkafka sends for
  it (55 for 50 messages, counted on the broker: about one per message).

Figures: the broker process's CPU per message (utime + stime of ``/proc/<pid>/stat``) and the
messages per second from the first byte sent to the last answer read, best of ``--rounds``
(timings on a shared machine only get worse); ratios to plaintext. A round runs the three
interleaved, on one broker.

    .venv/bin/python bench/tls_cost.py [--requests 6000] [--rounds 3]

Output: one JSON line per (round, way) on stdout, a table on stderr.
"""

from __future__ import annotations

import argparse
import datetime
import json
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from samsa.protocol.client import ClientCodec
from samsa.records.record import RecordInput, encode_batch
from samsa.security.ca import LOCAL_HOSTS, CertificateAuthority

from proc_cpu import cpu_seconds
from request_cost import Client, free_port, interrupt

PROJECT_DIR = Path(__file__).resolve().parent.parent
TOPIC = "tls-cost"
MESSAGES, VALUE_BYTES = 50, 200
RECORDS_PER_REQUEST = 55  # what librdkafka 2.16 sends for a request of 50 messages
WAYS = ("plaintext", "ssl_request", "ssl_message")
DEADLINE_S = 120.0


def produce_request() -> ProduceRequest:
    batch = encode_batch([RecordInput(key=None, value=b"v" * VALUE_BYTES,
                                      timestamp=1_700_000_000_000) for _ in range(MESSAGES)])
    return ProduceRequest(
        transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
        topic_data=(TopicProduceData(name=TOPIC, partition_data=(
            PartitionProduceData(index=0, records=batch),)),))


def connect(port: int) -> socket.socket:
    return Client(port, time.monotonic() + 60).sock


class Session:
    """A TLS client session over ``sock`` on memory BIOs: the handshake on the socket, then
    whatever is written is encrypted into ``outgoing`` bytes without sending them."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        self.sock = sock
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname="127.0.0.1")
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                if self.outgoing.pending:
                    sock.sendall(self.outgoing.read())
                data = sock.recv(65536)
                if not data:
                    raise ConnectionError("closed in the handshake") from None
                self.incoming.write(data)
        if self.outgoing.pending:
            sock.sendall(self.outgoing.read())

    def encrypt(self, pieces: list[bytes]) -> bytes:
        for piece in pieces:
            self.tls.write(piece)
        return self.outgoing.read()

    def decrypt(self, data: bytes) -> bytes:
        self.incoming.write(data)
        out = bytearray()
        try:
            while chunk := self.tls.read(1 << 20):
                out += chunk
        except ssl.SSLWantReadError:
            pass
        return bytes(out)


def pieces_of(frame: bytes, way: str) -> list[bytes]:
    if way != "ssl_message":
        return [frame]
    size = -(-len(frame) // RECORDS_PER_REQUEST)
    return [frame[i:i + size] for i in range(0, len(frame), size)]


def run_once(port: int, tls_port: int, context: ssl.SSLContext, way: str, frame: bytes,
             requests: int, pid: int) -> dict[str, float]:
    sock = connect(tls_port if way != "plaintext" else port)
    session = Session(sock, context) if way != "plaintext" else None
    wire = b"".join(session.encrypt(pieces_of(frame, way)) if session else frame
                    for _ in range(requests))
    answered = 0
    failure: list[BaseException] = []

    def read_answers() -> None:
        nonlocal answered
        pending = bytearray()
        try:
            while answered < requests:
                data = sock.recv(1 << 20)
                if not data:
                    raise ConnectionError("the broker closed the connection")
                pending += session.decrypt(data) if session else data
                while len(pending) >= 4:
                    size = int.from_bytes(pending[:4], "big")
                    if len(pending) < 4 + size:
                        break
                    del pending[:4 + size]
                    answered += 1
        except BaseException as exc:  # reported by the caller
            failure.append(exc)

    reader = threading.Thread(target=read_answers, daemon=True)
    cpu_before = cpu_seconds(pid)
    started = time.perf_counter()
    reader.start()
    sock.sendall(wire)
    reader.join(DEADLINE_S)
    seconds = time.perf_counter() - started
    cpu = cpu_seconds(pid) - cpu_before
    sock.close()
    if failure or answered < requests:
        raise RuntimeError(f"{way}: {answered} of {requests} answered: {failure}")
    messages = requests * MESSAGES
    return {"broker_cpu_us_per_msg": round(cpu / messages * 1e6, 3),
            "msg_per_s": round(messages / seconds), "wire_bytes_per_request":
            round(len(wire) / requests)}


def create_topic(port: int) -> None:
    """Metadata with auto-creation until the partition has its leader, then one Produce that
    must succeed (the measured ones are counted, not decoded)."""
    client = Client(port, time.monotonic() + 60)
    with client.sock:
        deadline = time.monotonic() + 60
        while True:
            topic = client.request(3, 12, MetadataRequest(
                topics=(MetadataRequestTopic(topic_id=None, name=TOPIC),),
                allow_auto_topic_creation=True, include_topic_authorized_operations=False,
            )).topics[0]
            if topic.error_code == 0 and topic.partitions and topic.partitions[0].leader_id >= 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{TOPIC} never got a leader: {topic}")
            time.sleep(0.05)
        answer = client.request(0, 9, produce_request())
        if answer.responses[0].partition_responses[0].error_code != 0:
            raise RuntimeError(f"a Produce to {TOPIC} failed: {answer}")


@dataclass
class Broker:
    proc: subprocess.Popen[bytes]
    port: int
    tls_port: int
    context: ssl.SSLContext


def start_broker(workdir: Path) -> Broker:
    ca = CertificateAuthority()
    keystore = ca.issue("CN=localhost", hosts=LOCAL_HOSTS).write_keystore(
        workdir / "broker.pem")
    context = ssl.create_default_context(cafile=str(ca.write(workdir / "ca.pem")))
    port, tls_port = free_port(), free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "samsa.cli", "server",
         "--override", f"log.dirs={workdir / 'data'}",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port}",
         "--override", "ssl.keystore.type=PEM",
         "--override", f"ssl.keystore.location={keystore}",
         "--override", "num.partitions=1"],
        cwd=PROJECT_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return Broker(proc, port, tls_port, context)


def table(best: dict[str, dict[str, float]]) -> str:
    base = best["plaintext"]
    lines = [f"{'way':<12} | {'broker µs/msg':>13} | {'msg/s':>10} | {'wire B/req':>10} | "
             f"{'CPU ×':>6} | {'msg/s ×':>7}", "-" * 74]
    for way in WAYS:
        b = best[way]
        lines.append(
            f"{way:<12} | {b['broker_cpu_us_per_msg']:>13.2f} | {b['msg_per_s']:>10,.0f} | "
            f"{b['wire_bytes_per_request']:>10,.0f} | "
            f"{b['broker_cpu_us_per_msg'] / base['broker_cpu_us_per_msg']:>5.2f}x | "
            f"{b['msg_per_s'] / base['msg_per_s']:>6.2f}x")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=6000,
                        help="Produce requests per way and round (50 messages each)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # the measured requests are counted, not decoded: one correlation id serves them all
    frame, _ = ClientCodec("tls-cost").encode(0, 9, produce_request())
    best: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="tls-cost-") as tmp:
        broker = start_broker(Path(tmp))
        try:
            create_topic(broker.port)
            for way in WAYS:  # warm-up: creates the topic, fills caches
                run_once(broker.port, broker.tls_port, broker.context, way, frame,
                         min(500, args.requests), broker.proc.pid)
            for round_ in range(args.rounds):
                for way in WAYS:
                    result = run_once(broker.port, broker.tls_port, broker.context, way, frame,
                                      args.requests, broker.proc.pid)
                    print(json.dumps({"round": round_, "way": way, **result}), flush=True)
                    kept = best.get(way)
                    if kept is None or result["broker_cpu_us_per_msg"] < \
                            kept["broker_cpu_us_per_msg"]:
                        best[way] = {**result, "msg_per_s": max(
                            result["msg_per_s"], kept["msg_per_s"] if kept else 0)}
                    elif result["msg_per_s"] > kept["msg_per_s"]:
                        kept["msg_per_s"] = result["msg_per_s"]
        finally:
            interrupt(broker.proc)
    print(table(best), file=sys.stderr)


if __name__ == "__main__":
    main()
