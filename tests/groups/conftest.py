"""The consumer-group test harness: brokers, a paced producer, member processes and the checks
run on what the members wrote.

Every member is its own OS process (tests/groups/member.py) appending to its own output file;
the checks read those files. Every wait here is bounded by a deadline.
"""

from __future__ import annotations

import itertools
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_for  # noqa: F401 (the test modules import it from here)

import samsa

PARTITIONS = 6
SESSION_MS = 6000  # the broker's group.min.session.timeout.ms
MEMBER_SCRIPT = Path(__file__).with_name("member.py")
SAMSA = Path(sys.executable).with_name("samsa")
# How long a rebalance (join, sync, every member's callbacks) may take before a test fails.
REBALANCE_S = 20.0
# How long the members may take to process everything once the producer is done.
DRAIN_S = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- brokers ---------------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[samsa.Broker]:
    with samsa.Broker(tmp_path / "data", num_partitions=PARTITIONS) as b:
        yield b


class BrokerProcess:
    """``samsa server`` as a subprocess on a fixed port, so it can be stopped and restarted
    on the same data directory and address."""

    def __init__(self, data_dir: Path, port: int, log: Path) -> None:
        self.data_dir, self.port, self.log = data_dir, port, log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> None:
        command = [str(SAMSA)] if SAMSA.exists() else [sys.executable, "-m", "samsa.cli"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [*command, "server",
                 "--override", f"log.dirs={self.data_dir}",
                 "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                 "--override", "group.initial.rebalance.delay.ms=0"],
                stdout=log, stderr=log,
            )

        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"broker exited with {self.proc.returncode}:\n"
                                     f"{self.log.read_text(errors='replace')}")
            return "is ready" in self.log.read_text(errors="replace").split(
                "shutting down")[-1]

        wait_for(ready, timeout, "the broker to start")

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (a clean shutdown); the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def broker_process(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A started subprocess broker; killed at the end of the test if still running."""
    b = BrokerProcess(tmp_path / "data", free_port(), tmp_path / "broker.log")
    b.start()
    yield b
    b.kill()


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=10)
    futures[topic].result(timeout=15)

    def visible() -> bool:
        meta = admin.list_topics(topic, timeout=5).topics.get(topic)
        return meta is not None and meta.error is None and len(meta.partitions) == partitions

    wait_for(visible, 15, f"topic {topic} in the metadata")


# --- producing -------------------------------------------------------------------------------


class PacedProducer(threading.Thread):
    """Sends ``count`` keyed messages (key ``k<i>``, value ``v<i>``) evenly over ``seconds``,
    on a thread; ``produced`` maps (partition, offset) to the value once delivered."""

    def __init__(self, bootstrap: str, topic: str, count: int, seconds: float,
                 first: int = 0) -> None:
        super().__init__(name="paced-producer", daemon=True)
        self.bootstrap, self.topic, self.count, self.seconds = bootstrap, topic, count, seconds
        self.first = first
        self.produced: dict[tuple[int, int], str] = {}
        self.errors: list[str] = []
        self.sent = 0
        self.failure: BaseException | None = None

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.produced[(msg.partition(), msg.offset())] = msg.value().decode()

    def run(self) -> None:
        try:
            producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                                 "message.timeout.ms": 20000, "enable.idempotence": True})
            rounds = max(1, int(self.seconds / 0.05))
            per_round = -(-self.count // rounds)
            start = time.monotonic()
            for r in range(rounds):
                for i in range(self.first + r * per_round,
                               self.first + min(self.count, (r + 1) * per_round)):
                    producer.produce(self.topic, key=f"k{i}", value=f"v{i}",
                                     on_delivery=self._delivered)
                    self.sent += 1
                producer.poll(0)
                time.sleep(max(0.0, start + (r + 1) * self.seconds / rounds - time.monotonic()))
            if producer.flush(30) != 0:
                self.errors.append("messages still in flight after 30 s")
        except BaseException as exc:  # reported by finish()
            self.failure = exc

    def finish(self, timeout: float = 60.0) -> dict[tuple[int, int], str]:
        if self.ident is not None:  # started as a thread (not run() in the caller's thread)
            self.join(timeout)
            assert not self.is_alive(), "the producer did not finish"
        if self.failure is not None:
            raise self.failure
        assert not self.errors, self.errors[:5]
        assert len(self.produced) == self.count, (len(self.produced), self.count)
        return self.produced


def produce(bootstrap: str, topic: str, count: int, first: int = 0
            ) -> dict[tuple[int, int], str]:
    """``count`` keyed messages at once; (partition, offset) -> value."""
    p = PacedProducer(bootstrap, topic, count, 0.0, first)
    p.run()
    return p.finish()


# --- member processes and their output -------------------------------------------------------


@dataclass
class Event:
    kind: str
    time: float
    detail: str

    @property
    def partitions(self) -> set[int]:
        return set() if self.detail in ("", "-") else {int(p) for p in self.detail.split(",")}

    @property
    def offsets(self) -> dict[int, int]:
        """partition -> offset of a ``committed`` event."""
        pairs = (item.split(":") for item in self.detail.split(",") if item)
        return {int(p): int(o) for p, o in pairs}


@dataclass
class Output:
    messages: list[tuple[int, int, str]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def of(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    @property
    def owned(self) -> set[int]:
        """What the member owns according to its assigned/revoked/lost events."""
        owned: set[int] = set()
        for e in self.events:
            if e.kind == "assigned":
                owned |= e.partitions
            elif e.kind in ("revoked", "lost"):
                owned -= e.partitions
            elif e.kind == "closed":
                owned = set()
        return owned

    @property
    def last_commits(self) -> dict[int, int]:
        """The last offset this member committed successfully, per partition."""
        last: dict[int, int] = {}
        for e in self.of("committed"):
            last.update(e.offsets)
        return last


def parse_output(text: str) -> Output:
    out = Output()
    lines = text.split("\n")
    for line in lines[:-1]:  # a last line without its newline is still being written
        head, _, rest = line.partition(" ")
        if head.isdigit():
            offset, _, value = rest.partition(" ")
            out.messages.append((int(head), int(offset), value))
        else:
            stamp, _, detail = rest.partition(" ")
            out.events.append(Event(head, float(stamp), detail))
    return out


_names = itertools.count()


class Member:
    """One member process. ``start`` it, read its ``output()``; ``terminate`` (SIGTERM,
    a clean close) or ``kill`` (SIGKILL) it; ``ended`` is when it stopped owning anything."""

    def __init__(self, directory: Path, client: str, bootstrap: str, group: str, topic: str,
                 assignor: str = "range", instance_id: str | None = None,
                 session_ms: int = SESSION_MS, name: str | None = None,
                 commit_delay_ms: int = 0, group_protocol: str = "classic") -> None:
        self.name = name or f"m{next(_names)}"
        self.out_path = directory / f"{self.name}.out"
        self.err_path = directory / f"{self.name}.err"
        self.command = [
            sys.executable, str(MEMBER_SCRIPT), "--client", client, "--bootstrap", bootstrap,
            "--group", group, "--topic", topic, "--assignor", assignor,
            "--session-timeout-ms", str(session_ms), "--heartbeat-ms", "1000",
            "--name", self.name, "--out", str(self.out_path),
            "--commit-delay-ms", str(commit_delay_ms), "--group-protocol", group_protocol,
        ]
        if instance_id:
            self.command += ["--instance-id", instance_id]
        self.proc: subprocess.Popen[bytes] | None = None
        self.killed_at: float | None = None

    def start(self) -> Member:
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(self.command, stdout=err, stderr=err)
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> Output:
        try:
            return parse_output(self.out_path.read_text())
        except FileNotFoundError:
            return Output()

    def uncommitted(self) -> bool:
        """Whether the last line written is a message: a batch processed, not yet committed."""
        try:
            lines = self.out_path.read_text().split("\n")
        except FileNotFoundError:
            return False
        return len(lines) > 1 and lines[-2][:1].isdigit()

    def stderr_tail(self, lines: int = 20) -> str:
        try:
            text = self.err_path.read_text(errors="replace").splitlines()[-lines:]
        except FileNotFoundError:
            return ""
        return "\n".join(text)

    def terminate(self, timeout: float = 30.0) -> None:
        """SIGTERM and wait: the member commits, closes and exits 0."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError(f"{self.name} did not exit within {timeout} s of SIGTERM\n"
                                 f"{self.stderr_tail()}") from None
        assert code == 0, f"{self.name} exited with {code}\n{self.stderr_tail()}"
        assert self.output().of("closed"), f"{self.name} did not close\n{self.stderr_tail()}"

    def kill(self) -> float:
        """SIGKILL; the time it died."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.killed_at = time.time()
        return self.killed_at

    def cleanup(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def __repr__(self) -> str:
        return f"Member({self.name})"


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Callable[..., Member]]:
    """``members(client, bootstrap, group, topic, ...)`` starts a member process; every one
    still running is killed at the end of the test."""
    started: list[Member] = []

    def start(*args: Any, **kwargs: Any) -> Member:
        member = Member(tmp_path, *args, **kwargs).start()
        started.append(member)
        return member

    yield start
    for member in started:
        member.cleanup()


# --- checks ----------------------------------------------------------------------------------


def describe(members: Iterable[Member]) -> str:
    """Each member's events and stderr tail, for failure messages."""
    parts = []
    for m in members:
        out = m.output()
        events = "\n".join(f"    {e.kind} {e.time:.3f} {e.detail}" for e in out.events
                           if e.kind != "committed")
        parts.append(f"--- {m.name} (alive={m.alive}, {len(out.messages)} messages, "
                     f"owns {sorted(out.owned)})\n{events}\n  stderr:\n{m.stderr_tail(8)}")
    return "\n".join(parts)


def assignment_settled(live: list[Member], partitions: int = PARTITIONS
                       ) -> dict[str, set[int]] | None:
    """The live members' assignments if every one of them owns something and together they
    own each partition exactly once; None otherwise (a rebalance is still going on)."""
    owned = {m.name: m.output().owned for m in live}
    if not all(owned.values()):
        return None
    counts = Counter(p for parts in owned.values() for p in parts)
    if set(counts) != set(range(partitions)) or any(c != 1 for c in counts.values()):
        return None
    return owned


def wait_settled(live: list[Member], everyone: list[Member], timeout: float = REBALANCE_S
                 ) -> dict[str, set[int]]:
    """Wait until the live members split the partitions between them (each owns some, all
    partitions covered, none owned twice); their assignments."""
    for m in live:
        assert m.alive, f"{m.name} died\n{describe(everyone)}"
    return wait_for(lambda: assignment_settled(live), timeout,
                    f"{[m.name for m in live]} to split the {PARTITIONS} partitions",
                    details=lambda: describe(everyone))


def ownership_intervals(members: Iterable[Member]) -> dict[int, list[tuple[float, float, str]]]:
    """partition -> [(from, until, member)] from the assigned/revoked/lost/closed events; a
    killed member owns until it was killed, a live one until now."""
    intervals: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
    for m in members:
        since: dict[int, float] = {}
        for e in m.output().events:
            if e.kind == "assigned":
                for p in e.partitions:
                    since.setdefault(p, e.time)
            elif e.kind in ("revoked", "lost"):
                for p in e.partitions:
                    if p in since:
                        intervals[p].append((since.pop(p), e.time, m.name))
            elif e.kind == "closed":
                for p, t in since.items():
                    intervals[p].append((t, e.time, m.name))
                since.clear()
        end = m.killed_at if m.killed_at is not None else float("inf")
        for p, t in since.items():
            intervals[p].append((t, end, m.name))
    return intervals


def check_no_overlap(members: list[Member]) -> None:
    """No partition is ever owned by two members at once: each owner gave it up (revoked,
    closed or died) before the next one was given it."""
    for p, spans in ownership_intervals(members).items():
        spans.sort()
        for (_, until, a), (since, _, b) in itertools.pairwise(spans):
            assert since >= until, (
                f"partition {p} owned by {b} from {since:.3f} while {a} owned it until "
                f"{until:.3f}\n{describe(members)}")


def processed(members: Iterable[Member]) -> list[tuple[int, int, str, str]]:
    """Every (partition, offset, value, member) any member wrote."""
    return [(p, o, v, m.name) for m in members for p, o, v in m.output().messages]


def check_exactly_once(members: list[Member], produced: dict[tuple[int, int], str]) -> None:
    """Every produced message was processed exactly once, by some member, with its value."""
    seen = processed(members)
    counts = Counter((p, o) for p, o, _, _ in seen)
    duplicates = sorted(k for k, c in counts.items() if c > 1)
    missing = sorted(set(produced) - set(counts))
    unknown = sorted(set(counts) - set(produced))
    wrong = [(p, o, v) for p, o, v, _ in seen if (p, o) in produced and produced[(p, o)] != v]
    by = defaultdict(list)
    for p, o, _, name in seen:
        if (p, o) in duplicates[:10]:
            by[(p, o)].append(name)
    assert not duplicates, (f"{len(duplicates)} messages processed more than once, e.g. "
                            f"{dict(by)}\n{describe(members)}")
    assert not missing, f"{len(missing)} messages never processed, e.g. {missing[:10]}"
    assert not unknown, f"processed messages nobody produced: {unknown[:10]}"
    assert not wrong, f"values differ from what was produced: {wrong[:10]}"


def wait_drained(members: list[Member], produced: dict[tuple[int, int], str],
                 timeout: float = DRAIN_S) -> None:
    """Wait until every produced message has been processed by someone."""
    wanted = set(produced)

    def done() -> bool:
        return wanted <= {(p, o) for p, o, _, _ in processed(members)}

    def details() -> str:
        missing = sorted(wanted - {(p, o) for p, o, _, _ in processed(members)})
        return f"{len(missing)} unprocessed, e.g. {missing[:10]}\n{describe(members)}"

    wait_for(done, timeout, "every message to be processed", interval=0.1, details=details)


def check_after_kill(members: list[Member], produced: dict[tuple[int, int], str],
                     killed: Member) -> set[tuple[int, int]]:
    """Nothing lost; a message processed twice only if the SIGKILLed member processed it
    after its last commit and its next owner processed it again: per partition, the
    duplicates are exactly the killed member's offsets from the resume point on, and that
    point is at or after the killed member's last recorded commit. The duplicates."""
    seen = processed(members)
    missing = sorted(set(produced) - {(p, o) for p, o, _, _ in seen})
    assert not missing, f"{len(missing)} messages never processed, e.g. {missing[:10]}"
    assert not {(p, o) for p, o, _, _ in seen} - set(produced)
    copies: dict[tuple[int, int], list[str]] = defaultdict(list)
    for p, o, _, name in seen:
        copies[(p, o)].append(name)
    duplicates = {k: names for k, names in copies.items() if len(names) > 1}
    killed_out = killed.output()
    commits = killed_out.last_commits
    by_killed: dict[int, set[int]] = defaultdict(set)
    for p, o, _ in killed_out.messages:
        by_killed[p].add(o)
    for (p, o), names in sorted(duplicates.items()):
        assert len(names) == 2 and names.count(killed.name) == 1, (
            f"message {p}/{o} processed by {names}: only the killed member's uncommitted "
            f"tail may be processed twice\n{describe(members)}")
    for p in {p for p, _ in duplicates}:
        dup = {o for q, o in duplicates if q == p}
        resume = min(dup)
        assert resume >= commits.get(p, -1), (
            f"partition {p} was processed again from {resume}, before {killed.name}'s last "
            f"commit {commits.get(p)}")
        tail = {o for o in by_killed[p] if o >= resume}
        assert dup == tail, (
            f"partition {p}: duplicates {sorted(dup)} are not {killed.name}'s offsets from "
            f"{resume} on ({sorted(tail)})")
    return set(duplicates)


def events_since(member: Member, index: int, *kinds: str) -> list[Event]:
    return [e for e in member.output().events[index:] if e.kind in kinds]


LAST_ROUND = 300  # messages sent once the last rebalance of join_leave_scenario has settled


def join_leave_scenario(client: str, bootstrap: str, start: Callable[..., Member],
                        assignor: str = "range", count: int = 3000, seconds: float = 6.0,
                        **member_options: Any) -> None:
    """Three members join one by one while messages flow, the first one leaves (SIGTERM), the
    others drain: after each rebalance the live members split the partitions; in the end
    every message was processed exactly once and no partition ever had two owners at once."""
    topic, group = unique("orders"), unique("group")
    create_topic(bootstrap, topic)
    a = start(client, bootstrap, group, topic, assignor, **member_options)
    everyone = [a]
    wait_settled([a], everyone)
    producer = PacedProducer(bootstrap, topic, count, seconds)
    producer.start()
    b = start(client, bootstrap, group, topic, assignor, **member_options)
    everyone.append(b)
    wait_settled([a, b], everyone)
    c = start(client, bootstrap, group, topic, assignor, **member_options)
    everyone.append(c)
    wait_settled([a, b, c], everyone)
    a.terminate()
    wait_settled([b, c], everyone)
    produced = producer.finish()
    # more after the last rebalance, over every partition: each member still there gets some
    # even when a slow start (a loaded machine) let the paced producer finish before it joined
    produced.update(produce(bootstrap, topic, LAST_ROUND, first=count))
    wait_drained(everyone, produced)
    b.terminate()
    c.terminate()
    check_exactly_once(everyone, produced)
    check_no_overlap(everyone)
    assert all(m.output().messages for m in everyone), describe(everyone)


def cooperative_scenario(client: str, bootstrap: str, start: Callable[..., Member],
                         count: int = 2000, seconds: float = 5.0) -> None:
    """cooperative-sticky: when a member joins, the members already there revoke only the
    partitions that move to it and keep the rest without a revocation; when one leaves, the
    others revoke nothing. Still exactly once, still never two owners."""
    topic, group = unique("orders"), unique("group")
    create_topic(bootstrap, topic)
    a = start(client, bootstrap, group, topic, "cooperative-sticky")
    everyone = [a]
    wait_settled([a], everyone)
    producer = PacedProducer(bootstrap, topic, count, seconds)
    producer.start()

    def join(live: list[Member]) -> list[Member]:
        before = {m.name: (len(m.output().events), m.output().owned) for m in live}
        new = start(client, bootstrap, group, topic, "cooperative-sticky")
        everyone.append(new)
        settled = wait_settled([*live, new], everyone)
        sizes = sorted(len(parts) for parts in settled.values())
        assert sizes[-1] - sizes[0] <= 1, f"unbalanced: {settled}"
        for m in live:
            index, owned_before = before[m.name]
            revoked = set().union(*(e.partitions for e in events_since(m, index, "revoked")))
            moved = owned_before - settled[m.name]
            assert revoked == moved, (
                f"{m.name} owned {sorted(owned_before)}, kept {sorted(settled[m.name])}, but "
                f"revoked {sorted(revoked)}\n{describe(everyone)}")
            assert moved <= settled[new.name], (settled, moved)
            assert not events_since(m, index, "lost"), describe(everyone)
            gained = set().union(*(e.partitions for e in events_since(m, index, "assigned")))
            assert gained <= settled[m.name] and not gained & owned_before - moved, (
                f"{m.name} was given {sorted(gained)}\n{describe(everyone)}")
        return [*live, new]

    live = join(join([a]))
    survivors = live[1:]
    before = {m.name: len(m.output().events) for m in survivors}
    live[0].terminate()
    wait_settled(survivors, everyone)
    for m in survivors:
        assert not events_since(m, before[m.name], "revoked", "lost"), (
            f"{m.name} revoked partitions when another member left\n{describe(everyone)}")
    produced = producer.finish()
    wait_drained(everyone, produced)
    for m in survivors:
        m.terminate()
    check_exactly_once(everyone, produced)
    check_no_overlap(everyone)
