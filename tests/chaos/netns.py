"""A private network for the fault tests: one Linux network namespace per node, joined by a
bridge in a hub namespace, with faults injected by iptables inside the nodes' namespaces.

Every node gets ``eth0`` with an address in 10.213.0.0/24 (the tests' own; nothing outside
the namespaces sees it) and its own loopback. Faults (``Network``):

* ``cut(a, b)``: what ``a`` sends to ``b`` is dropped (iptables DROP on ``a``'s OUTPUT and
  ``b``'s INPUT, silently, as a cable pulled: TCP waits out its timeouts);
* ``partition(side, other)``: both ways between every node of one side and the other;
* ``isolate(node)``: one node from every other;
* ``lossy(node, p)``: each packet ``node`` receives is dropped with probability ``p``;
* ``delay(node, peers, delay_s, jitter_s)``: what ``node`` sends to ``peers`` and receives from
  them is held back ``delay_s`` plus or minus ``jitter_s`` each way; ``delay_inbound``: what a
  node receives (the kernel of this project's machines has no ``netem``: NFQUEUE rules and a
  delayer process in the receiver's namespace, ``delay.py``);
* ``heal()``: every rule and delayer gone.

Needs root (``ip netns``); ``available()`` says whether this process can build one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .delay import Delayer

SUBNET = "10.213.0"
IPTABLES = "iptables-legacy" if shutil.which("iptables-legacy") else "iptables"


def _run(*command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return result


def available() -> str | None:
    """None when this process can build a network; else why not."""
    if os.geteuid() != 0:
        return "needs root for ip netns"
    for tool in ("ip", IPTABLES):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    return None


@dataclass(frozen=True)
class Node:
    name: str
    namespace: str
    ip: str

    def exec_prefix(self) -> list[str]:
        """The command prefix that runs a program in this node's namespace."""
        return ["ip", "netns", "exec", self.namespace]

    def run(self, *command: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _run(*self.exec_prefix(), *command, check=check)


@dataclass
class Network:
    """Namespaces named ``<tag>-<node>``; ``close()`` deletes them all (the processes in them
    must be gone first: a namespace lives on while a process uses it)."""

    names: Sequence[str]
    tag: str = field(default_factory=lambda: "sc" + uuid.uuid4().hex[:6])
    nodes: dict[str, Node] = field(default_factory=dict)
    _created: list[str] = field(default_factory=list)
    _delayers: dict[tuple[str, float, float], Delayer] = field(default_factory=dict)
    # what each delayer did once stopped (packets held, their mean delay, the kernel's drops)
    delayed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def hub(self) -> str:
        return f"{self.tag}-hub"

    def open(self) -> Network:
        try:
            self._add_namespace(self.hub)
            _run("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
            _run("ip", "-n", self.hub, "link", "set", "br0", "up")
            for index, name in enumerate(self.names, start=1):
                self._add_node(index, name)
        except BaseException:
            self.close()
            raise
        return self

    def _add_namespace(self, namespace: str) -> None:
        _run("ip", "netns", "add", namespace)
        self._created.append(namespace)
        _run("ip", "-n", namespace, "link", "set", "lo", "up")

    def _add_node(self, index: int, name: str) -> None:
        namespace = f"{self.tag}-{name}"
        self._add_namespace(namespace)
        port = f"{self.tag}p{index}"[:15]  # the bridge's side of the pair, in the hub
        _run("ip", "link", "add", "eth0", "netns", namespace, "type", "veth",
             "peer", "name", port, "netns", self.hub)
        _run("ip", "-n", self.hub, "link", "set", port, "master", "br0")
        _run("ip", "-n", self.hub, "link", "set", port, "up")
        ip = f"{SUBNET}.{index}"
        _run("ip", "-n", namespace, "addr", "add", f"{ip}/24", "dev", "eth0")
        _run("ip", "-n", namespace, "link", "set", "eth0", "up")
        self.nodes[name] = Node(name, namespace, ip)

    def close(self) -> None:
        self._stop_delayers()
        for namespace in reversed(self._created):
            with contextlib.suppress(Exception):
                _run("ip", "netns", "del", namespace, check=False)
        self._created.clear()

    def __enter__(self) -> Network:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getitem__(self, name: str) -> Node:
        return self.nodes[name]

    # --- faults -----------------------------------------------------------------------------

    def _iptables(self, node: Node, *rule: str) -> None:
        node.run(IPTABLES, "-w", *rule)

    def cut(self, a: str, b: str) -> None:
        """Drop what ``a`` sends to ``b`` (one way)."""
        src, dst = self.nodes[a], self.nodes[b]
        self._iptables(src, "-A", "OUTPUT", "-d", dst.ip, "-j", "DROP")
        self._iptables(dst, "-A", "INPUT", "-s", src.ip, "-j", "DROP")

    def partition(self, side: Iterable[str], other: Iterable[str]) -> None:
        """Nothing passes between a node of ``side`` and a node of ``other``, either way."""
        others = list(other)
        for a in side:
            for b in others:
                self.cut(a, b)
                self.cut(b, a)

    def isolate(self, name: str) -> None:
        self.partition([name], [n for n in self.nodes if n != name])

    def lossy(self, name: str, probability: float) -> None:
        """Drop each packet ``name`` receives from another node with this probability."""
        self._iptables(self.nodes[name], "-A", "INPUT", "-s", f"{SUBNET}.0/24", "-m",
                       "statistic", "--mode", "random", "--probability", f"{probability:.3f}",
                       "-j", "DROP")

    def delay(self, name: str, peers: Iterable[str], delay_s: float, jitter_s: float = 0.0,
              max_s: float = 600.0) -> None:
        """Hold back each packet between ``name`` and each of ``peers``, both ways, by
        ``delay_s`` plus or minus up to ``jitter_s`` (each direction; at most ``max_s`` seconds,
        then the links are fast again)."""
        others = list(peers)
        self.delay_inbound(name, others, delay_s, jitter_s, max_s)
        for peer in others:
            self.delay_inbound(peer, [name], delay_s, jitter_s, max_s)

    def delay_inbound(self, name: str, sources: Iterable[str], delay_s: float,
                      jitter_s: float = 0.0, max_s: float = 600.0) -> None:
        """Hold back each packet ``name`` receives from ``sources`` by ``delay_s`` plus or
        minus up to ``jitter_s`` (at most ``max_s`` seconds). Held where they are received,
        not sent: ``delay.py`` says why."""
        node = self.nodes[name]
        key = (name, delay_s, jitter_s)
        delayer = self._delayers.get(key)
        if delayer is None:
            number = len(self._delayers)  # queue numbers are per namespace; unique is enough
            delayer = Delayer(node.exec_prefix(), number, delay_s, jitter_s, max_s).start()
            self._delayers[key] = delayer
        # in the mangle table, before filter's: a packet let go by the delayer goes on to the
        # filter table, where a cut still drops it (an ACCEPT verdict ends its chain)
        for source in sources:
            self._iptables(node, "-t", "mangle", "-A", "INPUT", "-s", self.nodes[source].ip,
                           "-j", "NFQUEUE", "--queue-num", str(delayer.number),
                           "--queue-bypass")

    def _stop_delayers(self) -> None:
        for delayer in self._delayers.values():
            try:
                self.delayed.append(delayer.stop())
            except Exception as exc:
                self.delayed.append({"error": str(exc)})
        self._delayers.clear()

    def heal(self) -> None:
        for node in self.nodes.values():
            for table in ("filter", "mangle"):
                self._iptables(node, "-t", table, "-F", "INPUT")
                self._iptables(node, "-t", table, "-F", "OUTPUT")
        self._stop_delayers()

    def rules(self) -> dict[str, str]:
        """Each node's iptables rules (for a failed test's report)."""
        return {name: node.run(IPTABLES, "-w", "-S", check=False).stdout
                + node.run(IPTABLES, "-w", "-t", "mangle", "-S", check=False).stdout
                for name, node in self.nodes.items()}
