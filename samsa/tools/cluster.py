"""``samsa cluster``: a local cluster of brokers coordinated by ZooKeeper, on loopback.

    samsa cluster up [--brokers 3] [--data-dir ./cluster-data] [--port 9092]
                     [--zookeeper-port 2181] [--override key=value ...]
    samsa cluster down [--data-dir ./cluster-data]

``up`` starts a ZooKeeper server (``ZooKeeperServer``: Debian's ZooKeeper in a JVM, its data in
``DIR/zookeeper``) and N broker processes (``python -m samsa.cli server --override ...``: broker
ids 1..N on ports BASE..BASE+N-1, their logs in ``DIR/broker-<i>``, their output appended to
``DIR/broker-<i>.log``). It waits until every broker accepts connections and the cluster's
metadata lists all N brokers and a controller, prints ``bootstrap.servers=...`` and
``zookeeper.connect=...`` on stdout, and stays in the foreground. SIGTERM or SIGINT (Ctrl-C, or
``samsa cluster down``) stops the brokers (SIGTERM, then SIGKILL after a timeout), then
ZooKeeper. ``DIR/cluster.pid`` holds its pid while it runs. ``up`` again on the same DIR
restarts the same cluster: same broker ids, same ZooKeeper state, same logs.

The brokers run in their own sessions (Ctrl-C reaches ``up``, which stops them in order) and,
on Linux, get SIGTERM when ``up`` dies without stopping them. Every failure is one ``samsa:``
line: a port in use, ZooKeeper or java missing, a broker exiting while starting (with the tail
of its log), a start that takes too long.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import click
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from samsa.tools import zookeeper_server
from samsa.tools.common import ToolError, client_config, parse_assignments
from samsa.tools.zookeeper_server import ZooKeeperError, ZooKeeperServer, port_in_use

HOST = "127.0.0.1"
DEFAULT_DATA_DIR = "cluster-data"
DEFAULT_BROKERS = 3
DEFAULT_PORT = 9092
DEFAULT_ZOOKEEPER_PORT = 2181
PID_FILE = "cluster.pid"
ZOOKEEPER_DIR = "zookeeper"
# How long ``up`` waits for the whole cluster to serve (ZooKeeper, registrations, brokers).
START_TIMEOUT_S = 60.0
# A broker gets this long to shut down cleanly after SIGTERM before it is killed.
BROKER_STOP_TIMEOUT_S = 30.0
ZOOKEEPER_STOP_TIMEOUT_S = 10.0
# ``down`` waits this long for ``up`` to stop everything (more than the two above together).
DOWN_TIMEOUT_S = BROKER_STOP_TIMEOUT_S + ZOOKEEPER_STOP_TIMEOUT_S + 20.0
# Lines of a broker's log quoted in an error.
LOG_TAIL_LINES = 3
# Polling intervals: of the start-up checks, and of the foreground watch over the processes.
POLL_S = 0.1
WATCH_S = 0.5
# Broker keys ``up`` sets itself; --override may not set them.
OWN_KEYS = ("broker.id", "listeners", "log.dirs", "zookeeper.connect")

# Linux's prctl(PR_SET_PDEATHSIG): a broker gets SIGTERM when ``up`` dies without stopping it.
_PR_SET_PDEATHSIG = 1


def _one_line(message: str) -> str:
    return " ".join(message.split())


@click.group("cluster",
             context_settings={"help_option_names": ["-h", "--help"]})
def cluster() -> None:
    """Run a local cluster (ZooKeeper and N brokers on loopback): up, down."""


def _data_dir_option(command: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--data-dir", "data_dir", default=DEFAULT_DATA_DIR, show_default=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="Where ZooKeeper's and the brokers' data, logs and the pid file live.",
    )(command)


# --- small helpers -------------------------------------------------------------------------------


def broker_ports(base: int, brokers: int) -> list[int]:
    """The brokers' ports: BASE, BASE+1, ... (broker i on BASE+i-1)."""
    return [base + i for i in range(brokers)]


def bootstrap_servers(ports: Sequence[int]) -> str:
    return ",".join(f"{HOST}:{port}" for port in ports)


def pid_path(data_dir: Path) -> Path:
    return data_dir / PID_FILE


def read_pid(path: Path) -> int | None:
    """The pid in a pid file; None if there is no file. A ToolError if it holds no pid."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ToolError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not text.isdigit() or int(text) <= 0:
        raise ToolError(f"{path} does not hold a pid: {text[:40]!r}")
    return int(text)


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie, dead but not reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive, and not ours (see is_cluster_process)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust kill(0)
    state = stat.rpartition(")")[2].split()[:1]
    return state not in (["Z"], ["X"])


def is_cluster_process(pid: int) -> bool:
    """Whether ``pid`` runs ``samsa cluster`` (not another process that took a stale pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no /proc to ask: assume it is
    except OSError:
        return False
    return b"cluster" in cmdline


def leftover_processes(data_dir: Path) -> tuple[list[int], list[int]]:
    """Brokers and ZooKeeper servers of a cluster on ``data_dir`` that outlived the ``up`` that
    started them (killed with SIGKILL), found by their command lines: (brokers, zookeepers)."""
    zoo_cfg = str(data_dir / ZOOKEEPER_DIR / "zoo.cfg").encode()
    log_dirs = f"log.dirs={data_dir / 'broker-'}".encode()
    brokers: list[int] = []
    zookeepers: list[int] = []
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(arg.startswith(log_dirs) for arg in args):
                brokers.append(int(entry.name))
            elif zoo_cfg in args:
                zookeepers.append(int(entry.name))
    return brokers, zookeepers


def stop_processes(pids: Sequence[int], timeout: float) -> None:
    """SIGTERM (not our children: polled), then SIGKILL after ``timeout`` s."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(process_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for pid in pids:
        if process_alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, start: int = 0) -> str:
    """The last non-empty lines of a log file after byte ``start``, joined with `` | ``."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(start, f.tell() - 64 * 1024))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    tail = [line.strip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(tail) if tail else "(nothing)"


def _short_zookeeper_error(exc: ZooKeeperError) -> str:
    """ZooKeeperError's first line and the last lines of the log tail it carries."""
    head, _, rest = str(exc).partition("\n")
    tail = [line.strip() for line in rest.splitlines() if line.strip()][-LOG_TAIL_LINES:]
    return " | ".join([head, *tail])


def _linux_prctl() -> Callable[[int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


def die_with_parent(sig: signal.Signals = signal.SIGTERM) -> Callable[[], None] | None:
    """A preexec_fn: the child gets ``sig`` when this process dies (Linux; None elsewhere).
    Linux ties this to the thread that forks the child."""
    prctl = _linux_prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, sig)
        if os.getppid() != parent:  # the parent died before prctl: as if it had just now
            os.kill(os.getpid(), sig)

    return preexec


class _Stopped(BaseException):
    """Raised by the SIGTERM/SIGINT handler of ``up``: stop the cluster and exit."""


@contextlib.contextmanager
def _stop_signals() -> Iterator[Callable[[], None]]:
    """SIGTERM and SIGINT raise _Stopped once; the yielded function makes them no-ops (while
    stopping). The previous handlers come back at the end."""
    stopping = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            raise _Stopped(signum)

    def ignore() -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield ignore
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


# --- the cluster ---------------------------------------------------------------------------------


@dataclass
class BrokerProcess:
    """One broker of the local cluster: ``python -m samsa.cli server``."""

    broker_id: int
    port: int
    log_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    log_start: int = 0  # where this run's output starts in the (appended) log file
    reported: bool = False  # its unexpected exit has been reported

    def command(self, zookeeper_connect: str, overrides: dict[str, str]) -> list[str]:
        settings = {
            **overrides,
            "zookeeper.connect": zookeeper_connect,
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "log.dirs": str(self.log_dir),
        }
        command = [sys.executable, "-m", "samsa.cli", "server"]
        for key, value in settings.items():
            command += ["--override", f"{key}={value}"]
        return command

    @property
    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def exit_error(self) -> ToolError:
        return ToolError(
            f"broker {self.broker_id} exited with code {self.exit_code} while starting;"
            f" {self.log_path} ends with: {self.log_tail()}"
        )

    def log_tail(self) -> str:
        """The last lines this run of the broker wrote to its log."""
        return log_tail(self.log_path, start=self.log_start)


@dataclass
class LocalCluster:
    """ZooKeeper and N brokers under one data dir; ``start()`` then ``stop()``."""

    data_dir: Path
    brokers: int
    port: int
    zookeeper_port: int
    overrides: dict[str, str] = field(default_factory=dict)
    zookeeper: ZooKeeperServer | None = None
    members: list[BrokerProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.data_dir = self.data_dir.absolute()
        self.members = [
            BrokerProcess(i, port, self.data_dir / f"broker-{i}",
                          self.data_dir / f"broker-{i}.log")
            for i, port in enumerate(broker_ports(self.port, self.brokers), start=1)
        ]

    @property
    def bootstrap_servers(self) -> str:
        return bootstrap_servers([b.port for b in self.members])

    @property
    def zookeeper_connect(self) -> str:
        return f"{HOST}:{self.zookeeper_port}"

    def check_ports(self) -> None:
        """One line naming every port of the cluster that something else holds."""
        wanted = [("ZooKeeper", self.zookeeper_port)] + [
            (f"broker {b.broker_id}", b.port) for b in self.members
        ]
        busy = [f"{HOST}:{port} ({who})" for who, port in wanted if port_in_use(port, HOST)]
        if busy:
            raise ToolError(f"cannot start the cluster: port{'s' if len(busy) > 1 else ''}"
                            f" {', '.join(busy)} already in use")

    def start(self, timeout: float) -> None:
        """Start ZooKeeper and the brokers and wait until the cluster serves; on any failure
        the caller calls ``stop()``."""
        deadline = time.monotonic() + timeout
        self.zookeeper = ZooKeeperServer(
            self.data_dir / ZOOKEEPER_DIR, self.zookeeper_port,
            start_timeout=max(1.0, min(30.0, timeout)), java_dir=zookeeper_server.JAVA_DIR,
        )
        try:
            self.zookeeper.start()
        except ZooKeeperError as exc:
            raise ToolError(_short_zookeeper_error(exc)) from None
        self._wait_stale_registrations(deadline)
        for broker in self.members:
            broker.log_dir.mkdir(parents=True, exist_ok=True)
            with broker.log_path.open("ab") as out:
                stamp = time.strftime("%Y-%m-%d %H:%M:%S")
                out.write(f"--- samsa cluster: starting broker {broker.broker_id} at {stamp}"
                          f" ---\n".encode())
                out.flush()
                broker.log_start = out.tell()
                command = broker.command(self.zookeeper_connect, self.overrides)
                try:
                    broker.proc = subprocess.Popen(
                        command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                        cwd=self.data_dir, start_new_session=True,
                        preexec_fn=die_with_parent(),
                    )
                except OSError as exc:
                    raise ToolError(f"cannot run {command[0]}: {exc.strerror or exc}") from exc
        self._wait_serving(deadline, timeout)

    def _wait_stale_registrations(self, deadline: float) -> None:
        """Brokers killed without a clean shutdown leave their ephemeral /brokers/ids/<id> in
        ZooKeeper until their session expires (after ZooKeeper's restart too): wait for that,
        or our brokers with the same ids would be refused."""
        from kazoo.client import KazooClient
        from kazoo.exceptions import NoNodeError

        # kazoo logs its connection troubles; the one-line errors here say what matters.
        logging.getLogger("kazoo").addHandler(logging.NullHandler())
        logging.getLogger("kazoo").propagate = False
        ids = {b.broker_id for b in self.members}
        client = KazooClient(hosts=self.zookeeper_connect, timeout=5.0)
        try:
            client.start(timeout=max(1.0, min(10.0, deadline - time.monotonic())))
        except Exception as exc:
            raise ToolError(f"cannot connect to ZooKeeper at {self.zookeeper_connect}:"
                            f" {exc}") from None
        told = False
        try:
            while True:
                try:
                    children = client.get_children("/brokers/ids")
                except NoNodeError:
                    children = []
                stale = sorted(ids.intersection(int(c) for c in children if c.isdigit()))
                if not stale:
                    return
                if not told:
                    told = True
                    click.echo(f"waiting for the ZooKeeper sessions of broker ids"
                               f" {', '.join(map(str, stale))} (not shut down cleanly) to expire")
                if time.monotonic() > deadline:
                    raise ToolError(
                        f"broker ids {', '.join(map(str, stale))} are still registered in"
                        f" ZooKeeper at {self.zookeeper_connect} (sessions of brokers that"
                        f" did not shut down cleanly); try again in a minute"
                    )
                time.sleep(POLL_S * 2)
        finally:
            with contextlib.suppress(Exception):
                client.stop()
                client.close()

    def _wait_serving(self, deadline: float, timeout: float) -> None:
        """Until every broker accepts connections and the metadata lists all of them and a
        controller. A broker that exits meanwhile fails the start with its log's tail."""
        admin: AdminClient | None = None
        missing = "no broker accepts connections yet"
        expected = {b.broker_id: (HOST, b.port) for b in self.members}
        while True:
            for broker in self.members:
                if broker.exit_code is not None:
                    raise broker.exit_error()
            closed = [b for b in self.members if not _accepts(b.port)]
            if closed:
                missing = (f"broker{'s' if len(closed) > 1 else ''}"
                           f" {', '.join(str(b.broker_id) for b in closed)} not listening")
            else:
                if admin is None:
                    admin = AdminClient(client_config(self.bootstrap_servers, "samsa-cluster"))
                missing = _metadata_missing(admin, expected)
                if missing is None:
                    return
            if time.monotonic() > deadline:
                raise ToolError(f"the cluster did not start within {timeout:g} s ({missing});"
                                f" see the logs in {self.data_dir}")
            time.sleep(POLL_S)

    def exited(self) -> Iterator[BrokerProcess]:
        """Brokers that exited since the last call (once each)."""
        for broker in self.members:
            if not broker.reported and broker.exit_code is not None:
                broker.reported = True
                yield broker

    def stop(self) -> None:
        """Brokers (all at once: SIGTERM, SIGKILL after a timeout), then ZooKeeper."""
        running = [b.proc for b in self.members if b.proc is not None and b.proc.poll() is None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)  # a stopped process holds SIGTERM back
                proc.terminate()
        deadline = time.monotonic() + BROKER_STOP_TIMEOUT_S
        for proc in running:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.zookeeper is not None:
            self.zookeeper.stop(ZOOKEEPER_STOP_TIMEOUT_S)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


def _metadata_missing(admin: AdminClient, expected: dict[int, tuple[str, int]]) -> str | None:
    """What the cluster's metadata still lacks (every broker, a controller), or None."""
    try:
        metadata = admin.list_topics(timeout=2.0)
    except KafkaException:
        return "no metadata yet"
    listed = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
    absent = sorted(i for i, address in expected.items() if listed.get(i) != address)
    if absent:
        return f"metadata does not list broker{'s' if len(absent) > 1 else ''}" \
               f" {', '.join(map(str, absent))} yet"
    if metadata.controller_id not in expected:
        return "no controller elected yet"
    return None


def _write_pid_file(path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(f"{os.getpid()}\n")
    tmp.replace(path)


def _remove_pid_file(path: Path, pid: int) -> None:
    """Remove the pid file if it still names ``pid``."""
    with contextlib.suppress(OSError, ToolError):
        if read_pid(path) == pid:
            path.unlink()


def _check_running(data_dir: Path) -> None:
    """Refuse to start a second cluster on a data dir that has one running (a pid file that
    holds no pid is stale, as is one whose process is gone)."""
    try:
        pid = read_pid(pid_path(data_dir))
    except ToolError:
        return
    if pid is not None and pid != os.getpid() and process_alive(pid) and is_cluster_process(pid):
        raise ToolError(f"a cluster is already running from {data_dir} (pid {pid}); stop it"
                        f" with: samsa cluster down --data-dir {data_dir}")


def _check_zookeeper_installed() -> None:
    try:
        zookeeper_server.find_classpath(zookeeper_server.JAVA_DIR)
        zookeeper_server.find_java()
    except ZooKeeperError as exc:
        raise ToolError(str(exc)) from None


# --- commands ------------------------------------------------------------------------------------


@cluster.command("up")
@click.option("--brokers", "brokers", type=click.IntRange(1, 64), default=DEFAULT_BROKERS,
              show_default=True, help="How many brokers (ids 1..N).")
@_data_dir_option
@click.option("--port", "port", type=click.IntRange(1, 65535), default=DEFAULT_PORT,
              show_default=True, help="The first broker's port; broker i listens on PORT+i-1.")
@click.option("--zookeeper-port", "zookeeper_port", type=click.IntRange(1, 65535),
              default=DEFAULT_ZOOKEEPER_PORT, show_default=True, help="ZooKeeper's client port.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A broker config key for every broker (Kafka's names).")
@click.option("--timeout", "timeout", type=click.FloatRange(1, 3600), default=START_TIMEOUT_S,
              show_default=True, help="Seconds to wait for the cluster to serve.")
def up(brokers: int, data_dir: Path, port: int, zookeeper_port: int,
       overrides: tuple[str, ...], timeout: float) -> None:
    """Start ZooKeeper and N brokers; run until SIGTERM or Ctrl-C.

    Prints bootstrap.servers=... and zookeeper.connect=... once every broker serves. Data,
    logs and the pid file live in DATA_DIR; up again on it restarts the same cluster."""
    if port + brokers - 1 > 65535:
        raise click.UsageError(f"--port {port} leaves no room for {brokers} brokers")
    if port <= zookeeper_port < port + brokers:
        raise click.UsageError(f"--zookeeper-port {zookeeper_port} is one of the brokers' ports"
                               f" ({port}..{port + brokers - 1})")
    settings = parse_assignments(overrides, "--override")
    own = [key for key in settings if key in OWN_KEYS]
    if own:
        raise click.UsageError(f"--override may not set {', '.join(own)}: samsa cluster sets it")
    data_dir = data_dir.absolute()
    local = LocalCluster(data_dir, brokers, port, zookeeper_port, settings)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolError(f"cannot create {data_dir}: {exc.strerror or exc}") from exc
    _check_running(data_dir)
    brokers_left, zookeepers_left = leftover_processes(data_dir)
    if brokers_left or zookeepers_left:
        pids = ", ".join(map(str, sorted(brokers_left + zookeepers_left)))
        raise ToolError(f"processes of an earlier cluster on {data_dir} are still running (pids"
                        f" {pids}); stop them with: samsa cluster down --data-dir {data_dir}")
    _check_zookeeper_installed()
    local.check_ports()
    pid_file = pid_path(data_dir)
    with _stop_signals() as stopping:
        try:
            _write_pid_file(pid_file)
            local.start(timeout)
            click.echo(f"bootstrap.servers={local.bootstrap_servers}")
            click.echo(f"zookeeper.connect={local.zookeeper_connect}")
            click.echo(f"cluster of {brokers} broker{'s' if brokers > 1 else ''} up (pid"
                       f" {os.getpid()}, data in {data_dir}); stop it with Ctrl-C or: samsa"
                       f" cluster down --data-dir {data_dir}")
            _watch(local)
        except _Stopped:
            pass
        finally:
            stopping()
            try:
                local.stop()
            finally:
                _remove_pid_file(pid_file, os.getpid())
    click.echo("cluster stopped")


def _watch(local: LocalCluster) -> None:
    """Run in the foreground until a stop signal; report brokers (or ZooKeeper) that exit."""
    zookeeper_reported = False
    while True:
        time.sleep(WATCH_S)
        for broker in local.exited():
            click.echo(f"samsa: broker {broker.broker_id} exited with code {broker.exit_code};"
                       f" {broker.log_path} ends with: {broker.log_tail()}", err=True)
        zk = local.zookeeper
        if zk is not None and not zk.running and not zookeeper_reported:
            zookeeper_reported = True
            click.echo(f"samsa: ZooKeeper exited; see {zk.log_path}", err=True)


@cluster.command("down")
@_data_dir_option
@click.option("--timeout", "timeout", type=click.FloatRange(1, 3600), default=DOWN_TIMEOUT_S,
              show_default=True, help="Seconds to wait for the cluster to stop.")
def down(data_dir: Path, timeout: float) -> None:
    """Stop the cluster running from --data-dir and wait until it is gone.

    Sends SIGTERM to the ``up`` process named in DATA_DIR/cluster.pid, which stops its brokers
    and ZooKeeper. Processes left by an ``up`` that was killed are stopped too."""
    data_dir = data_dir.absolute()
    path = pid_path(data_dir)
    pid = read_pid(path)
    if pid is not None and not (process_alive(pid) and is_cluster_process(pid)):
        with contextlib.suppress(OSError):
            path.unlink()
        stale = f"pid {pid} of {path} is gone (removed the stale pid file)"
    elif pid is None:
        stale = f"no {path}"
    else:
        stale = ""
    if stale:
        # ``up`` was killed (SIGKILL): its brokers went with it, ZooKeeper may be left over.
        brokers_left, zookeepers_left = leftover_processes(data_dir)
        if not brokers_left and not zookeepers_left:
            raise ToolError(f"no cluster is running from {data_dir}: {stale}")
        stop_processes(brokers_left, BROKER_STOP_TIMEOUT_S)
        stop_processes(zookeepers_left, ZOOKEEPER_STOP_TIMEOUT_S)
        pids = ", ".join(map(str, sorted(brokers_left + zookeepers_left)))
        click.echo(f"stopped what an earlier cluster in {data_dir} left running (pids {pids})")
        return
    assert pid is not None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    except PermissionError as exc:
        raise ToolError(f"cannot stop the cluster (pid {pid}): {exc.strerror or exc}") from exc
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        if time.monotonic() > deadline:
            raise ToolError(f"the cluster (pid {pid}) is still running {timeout:g} s after"
                            f" SIGTERM; its logs are in {data_dir}")
        time.sleep(POLL_S)
    _remove_pid_file(path, pid)  # gone without removing it (killed)
    click.echo(f"cluster in {data_dir} stopped (pid {pid})")


__all__ = ["LocalCluster", "cluster", "down", "up"]
