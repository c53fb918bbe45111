"""Network delay without netem (this project's kernels have no ``sch_netem``): iptables sends
the packets of a delayed link to an NFQUEUE, and a small process in the same network namespace
reads that queue over raw netlink (nfnetlink_queue) and gives each packet its ACCEPT verdict
only once its delay has passed. The kernel keeps the packet meanwhile; only its id travels.

Like netem's, each packet's delay is drawn on its own (``delay`` plus or minus up to
``jitter``, uniformly), so a jitter reorders packets; a packet whose queue is full (``MAXLEN``)
is dropped, as by netem's ``limit``. The iptables rules use ``--queue-bypass``: when no delayer
is bound to the queue (not started yet, or gone), packets pass undelayed rather than being
dropped.

The packets are held where they are received (iptables INPUT): one held on its way out would
still count against its TCP socket's small queues, and the sender would send next to nothing
per delay (netem detaches the packets it holds from their socket; userspace cannot).

Run as its own process in the node's namespace (``Delayer`` starts it there with
``ip netns exec``), so the workloads' interpreter never holds a packet back: ``python delay.py
QUEUE DELAY_S JITTER_S MAX_S``. It prints ``ready`` once bound, stops when its stdin closes
(``Delayer.stop``, or its parent gone) or after ``MAX_S`` seconds, accepting whatever it still
holds, and prints what it did (a JSON line) as it exits. Standard library only: it runs as a
script.
"""

from __future__ import annotations

import heapq
import json
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator

NETLINK_NETFILTER = 12
SOL_NETLINK = 270
NETLINK_NO_ENOBUFS = 5
NLMSG_ERROR = 2
NLM_F_REQUEST = 1
NLM_F_ACK = 4
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET = 0
NFQNL_MSG_VERDICT = 1
NFQNL_MSG_CONFIG = 2
NFQA_PACKET_HDR = 1
NFQA_VERDICT_HDR = 2
NFQA_CFG_CMD = 1
NFQA_CFG_PARAMS = 2
NFQA_CFG_QUEUE_MAXLEN = 3
NFQA_CFG_MASK = 4
NFQA_CFG_FLAGS = 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1  # the packet's id and metadata, not its bytes
NFQA_CFG_F_GSO = 4  # GSO packets queued whole (not segmented for us: we never read them)
NLA_TYPE_MASK = 0x3FFF
NF_ACCEPT = 1
MAXLEN = 20000
RCVBUF = 8 << 20
VERDICTS_PER_SEND = 1000
STATS = "/proc/net/netfilter/nfnetlink_queue"


def _attr(kind: int, payload: bytes) -> bytes:
    header = struct.pack("=HH", 4 + len(payload), kind)
    return header + payload + b"\0" * (-len(payload) % 4)


def _message(kind: int, flags: int, seq: int, family: int, queue: int, attrs: bytes) -> bytes:
    body = struct.pack("=BB", family, 0) + struct.pack("!H", queue) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | kind,
                       NLM_F_REQUEST | flags, seq, 0) + body


def _messages(data: bytes) -> Iterator[tuple[int, bytes, int]]:
    """(type, payload, seq) of each netlink message in one datagram."""
    offset = 0
    while offset + 16 <= len(data):
        length, kind, _flags, seq, _pid = struct.unpack_from("=IHHII", data, offset)
        if length < 16:
            return
        yield kind, data[offset + 16:offset + length], seq
        offset += (length + 3) & ~3


def _packet_id(payload: bytes) -> int | None:
    offset = 4  # nfgenmsg
    while offset + 4 <= len(payload):
        length, kind = struct.unpack_from("=HH", payload, offset)
        if length < 4:
            return None
        if kind & NLA_TYPE_MASK == NFQA_PACKET_HDR:
            return int(struct.unpack_from("!I", payload, offset + 4)[0])
        offset += (length + 3) & ~3
    return None


class Queue:
    """One bound nfnetlink queue in this process's network namespace."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.seq = 0
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, 33, RCVBUF)  # SO_RCVBUFFORCE (root)
            self.sock.setsockopt(SOL_NETLINK, NETLINK_NO_ENOBUFS, 1)
            self.sock.bind((0, 0))
            self._configure(_attr(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND,
                                                             socket.AF_INET)))
            self._configure(
                _attr(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))
                + _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", MAXLEN))
                + _attr(NFQA_CFG_FLAGS, struct.pack("!I", NFQA_CFG_F_GSO))
                + _attr(NFQA_CFG_MASK, struct.pack("!I", NFQA_CFG_F_GSO)))
        except BaseException:
            self.sock.close()
            raise

    def _configure(self, attrs: bytes) -> None:
        self.seq += 1
        self.sock.send(_message(NFQNL_MSG_CONFIG, NLM_F_ACK, self.seq, socket.AF_UNSPEC,
                                self.number, attrs))
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if not select.select([self.sock], [], [], 0.5)[0]:
                continue
            for kind, payload, seq in _messages(self.sock.recv(1 << 16)):
                if kind == NLMSG_ERROR and seq == self.seq:
                    error = struct.unpack_from("=i", payload)[0]
                    if error:
                        raise OSError(-error, f"nfnetlink_queue config of queue {self.number}: "
                                              f"{os.strerror(-error)}")
                    return
        raise TimeoutError(f"no answer to the config of queue {self.number}")

    def receive(self) -> list[int]:
        """The ids of the packets queued since the last call (without blocking)."""
        ids: list[int] = []
        while True:
            try:
                data = self.sock.recv(1 << 16, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return ids
            for kind, payload, _seq in _messages(data):
                if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                    packet = _packet_id(payload)
                    if packet is not None:
                        ids.append(packet)

    def accept(self, ids: list[int]) -> None:
        for start in range(0, len(ids), VERDICTS_PER_SEND):
            self.sock.send(b"".join(
                _message(NFQNL_MSG_VERDICT, 0, 0, socket.AF_UNSPEC, self.number,
                         _attr(NFQA_VERDICT_HDR, struct.pack("!II", NF_ACCEPT, packet)))
                for packet in ids[start:start + VERDICTS_PER_SEND]))

    def stats(self) -> dict[str, int]:
        """The kernel's counters for this queue (``/proc``, per namespace)."""
        names = ("queue", "portid", "waiting", "copy_mode", "copy_range", "queue_dropped",
                 "user_dropped", "id_sequence")
        try:
            with open(STATS) as lines:
                for line in lines:
                    values = dict(zip(names, map(int, line.split()), strict=False))
                    if values.get("queue") == self.number:
                        return values
        except OSError:
            pass
        return {}

    def close(self) -> None:
        self.sock.close()


def serve(number: int, delay_s: float, jitter_s: float, max_s: float,
          control: int = 0) -> dict[str, float]:
    """Hold each packet of queue ``number`` for its delay until ``control`` (a file descriptor)
    reads end-of-file or ``max_s`` seconds pass; what it did."""
    queue = Queue(number)
    print("ready", flush=True)
    held: list[tuple[float, int]] = []  # (when to release, packet id): a heap
    delays = 0.0
    count = 0
    deadline = time.monotonic() + max_s
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                break
            wait = min(deadline, held[0][0] if held else deadline) - now
            readable = select.select([queue.sock.fileno(), control], [], [], max(0.0, wait))[0]
            if control in readable and not os.read(control, 4096):
                break
            now = time.monotonic()
            if queue.sock.fileno() in readable:
                for packet in queue.receive():
                    delay = max(0.0, delay_s + random.uniform(-jitter_s, jitter_s))
                    heapq.heappush(held, (now + delay, packet))
                    delays += delay
                    count += 1
            due = []
            while held and held[0][0] <= now:
                due.append(heapq.heappop(held)[1])
            if due:
                queue.accept(due)
    finally:
        queue.accept(sorted(packet for _, packet in held))
        stats = queue.stats()
        queue.close()
    return {"packets": count, "mean_delay_s": round(delays / count, 4) if count else 0.0,
            "queue_dropped": stats.get("queue_dropped", -1),
            "user_dropped": stats.get("user_dropped", -1)}


class Delayer:
    """``delay.py`` serving queue ``number`` in the namespace that ``prefix`` runs a command in
    (``["ip", "netns", "exec", NS]``); at most ``max_s`` seconds."""

    def __init__(self, prefix: list[str], number: int, delay_s: float, jitter_s: float,
                 max_s: float) -> None:
        self.number = number
        self.command = [*prefix, sys.executable, os.path.abspath(__file__), str(number),
                        str(delay_s), str(jitter_s), str(max_s)]
        self.proc: subprocess.Popen[str] | None = None
        self.result: dict[str, float] = {}

    def start(self, timeout: float = 20) -> Delayer:
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while not select.select([self.proc.stdout], [], [], 0.2)[0]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                break
        line = self.proc.stdout.readline().strip() if self.proc.poll() is None else ""
        if line != "ready":
            self.stop()
            raise RuntimeError(f"the delayer did not start ({' '.join(self.command)}): "
                               f"{line!r}")
        return self

    def stop(self, timeout: float = 10) -> dict[str, float]:
        """Every held packet released; what it did (empty when it failed)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return self.result
        try:
            out, err = proc.communicate(timeout=timeout)  # closes its stdin: it stops
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        lines = out.strip().splitlines()
        if proc.returncode == 0 and lines:
            self.result = json.loads(lines[-1])
        elif proc.returncode != 0:
            raise RuntimeError(f"the delayer exited {proc.returncode}: {err.strip()[-2000:]}")
        return self.result


if __name__ == "__main__":
    result = serve(int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]),
                   float(sys.argv[4]), control=sys.stdin.fileno())
    print(json.dumps(result), flush=True)
