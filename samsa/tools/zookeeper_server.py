"""A standalone Apache ZooKeeper server run as a ``java`` subprocess, for cluster mode and tests.

    with ZooKeeperServer() as zk:                 # a free loopback port, a temp data dir
        client = KazooClient(hosts=zk.connect_string)

It runs the real ZooKeeper from Debian's packages (``apt-get install libzookeeper-java``: the
jars in ``/usr/share/java``) with ``org.apache.zookeeper.server.ZooKeeperServerMain``, the
standalone entry point, on a ``zoo.cfg`` written into the data dir. The server listens on
loopback only, with the admin (Jetty) server disabled and every four-letter command allowed. Its
log goes to ``<data dir>/zookeeper.log`` (log4j 1.2, which Debian's ZooKeeper is built against)
and the JVM's own output to ``<data dir>/zookeeper.out``; nothing reaches the console.

``start()`` returns once the server answers the ``conf`` four-letter command with its own data
dir (so a stranger on the port is never taken for it), or raises ``ZooKeeperError`` with the
log tail. ``stop()`` sends SIGTERM, then SIGKILL after a timeout; ``restart()`` keeps the data
dir and the port. ``pause()`` / ``resume()`` freeze the JVM with SIGSTOP / SIGCONT: clients
time out and reconnect (whether a session outliving its timeout meanwhile is expired on resume
is a race inside ZooKeeper: see ``pause()``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

JAVA_DIR = Path("/usr/share/java")
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
HOST = "127.0.0.1"
# zookeeper.jar names its other dependencies in its manifest's Class-Path; the log4j binding of
# slf4j and log4j itself are not there (without them ZooKeeper logs nowhere).
_JARS = ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
NOT_INSTALLED = "ZooKeeper is not installed: apt-get install libzookeeper-java"
NO_JAVA = "java is not installed: apt-get install openjdk-17-jre-headless"

# A small, quick-starting JVM: ZooKeeper for a handful of brokers needs little heap and no C2.
DEFAULT_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms32m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    "-Dzookeeper.jmx.log4j.disable=true",
)
# Keys the server sets itself; config= may not override them.
_OWN_KEYS = frozenset({"dataDir", "dataLogDir", "clientPort", "clientPortAddress"})

_LOG4J = """\
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File={log}
log4j.appender.FILE.Append=true
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} %-5p [%t:%C{{1}}@%L] - %m%n
"""


class ZooKeeperError(RuntimeError):
    """ZooKeeper could not be found, started, or stopped."""


def find_classpath(java_dir: Path = JAVA_DIR) -> list[Path]:
    """The jars that run Debian's ZooKeeper server, or ``ZooKeeperError`` naming the package."""
    jars = [java_dir / name for name in _JARS]
    if not jars[0].is_file():
        raise ZooKeeperError(NOT_INSTALLED)
    missing = [jar.name for jar in jars if not jar.is_file()]
    if missing:
        raise ZooKeeperError(f"{NOT_INSTALLED} ({', '.join(missing)} missing in {java_dir})")
    return jars


def find_java() -> str:
    """The ``java`` executable: ``$JAVA_HOME/bin/java``, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperError(NO_JAVA)
    return java


_PORT_ATTEMPTS = 3
# what ZooKeeperServerMain logs, as the last lines before it exits, when the port is taken
_BIND_FAILURE = "java.net.BindException: Address already in use"


class _PortTaken(ZooKeeperError):
    """The JVM could not bind the port it was given (start() picks another when it picked
    that one itself)."""


def free_port(host: str = HOST) -> int:
    """A TCP port nobody listens on at the moment (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int, host: str = HOST) -> bool:
    """Whether binding ``host:port`` would fail as it would for ZooKeeper (which, like this
    check, sets SO_REUSEADDR, so connections in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
        return False


def four_letter_word(
    command: str, port: int, host: str = HOST, timeout: float = 1.0
) -> str | None:
    """Send a four-letter command (``ruok``, ``srvr``, ``conf``, ``mntr``, ...) and return the
    reply, or None when nothing answers within ``timeout`` s."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(command.encode("ascii"))
            chunks: list[bytes] = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError:  # refused, reset, or timed out (a paused or starting server)
        return None
    return b"".join(chunks).decode("utf-8", "replace")


def _tail(path: Path, lines: int) -> list[str]:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 256 * 1024))
            return f.read().decode("utf-8", "replace").splitlines()[-lines:]
    except OSError:
        return []


# Every JVM started and not yet stopped, by pid: none outlives the Python process that started
# it (unless that process is killed), even if its ZooKeeperServer was never stopped.
_LIVE: dict[int, subprocess.Popen[bytes]] = {}


@atexit.register
def _stop_all() -> None:
    for proc in list(_LIVE.values()):
        with contextlib.suppress(Exception):
            terminate_process(proc, timeout=2.0)
    _LIVE.clear()


def terminate_process(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGCONT (a stopped process holds SIGTERM back), SIGTERM, then SIGKILL after timeout."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGCONT)
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class ZooKeeperServer:
    """A standalone ZooKeeper server in a ``java`` subprocess.

    ``data_dir``: where ``zoo.cfg``, the snapshots and transaction logs (``version-2/``) and the
    logs go; created if missing (its parent must exist). Default: a temp dir that ``close()``
    (or leaving the ``with`` block) removes. ``port``: the client port on 127.0.0.1; default: a
    free one, picked at the first start and kept by restarts. ``tick_time_ms``: ZooKeeper's
    tick; sessions may last from 2 to ``max_session_timeout_ms / tick_time_ms`` ticks, so a
    small tick makes short session timeouts (and quick expiry in tests) possible. ``config``:
    more ``zoo.cfg`` keys (``maxClientCnxns``, ``forceSync``, ...). ``host`` and ``launcher``:
    the address to listen on and a command prefix that runs the JVM (the fault tests put it
    in a network namespace of their own: ``("ip", "netns", "exec", name)``, with that
    namespace's address; there ``port`` defaults to 2181, since nothing else listens there).
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        port: int | None = None,
        *,
        tick_time_ms: int = 500,
        max_session_timeout_ms: int = 60_000,
        config: Mapping[str, str | int] | None = None,
        start_timeout: float = 30.0,
        jvm_options: Sequence[str] = DEFAULT_JVM_OPTIONS,
        java_dir: Path = JAVA_DIR,
        host: str = HOST,
        launcher: Sequence[str] = (),
    ) -> None:
        clash = _OWN_KEYS.intersection(config or {})
        if clash:
            raise ValueError(f"config may not set {', '.join(sorted(clash))}")
        if port is not None and not 0 < port < 65536:
            raise ValueError(f"port must be in 1..65535, not {port}")
        self._temp = data_dir is None
        self._given_dir = None if data_dir is None else Path(data_dir).absolute()
        self._data_dir: Path | None = None
        self._port = port
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.extra_config = dict(config or {})
        self.start_timeout = start_timeout
        self.jvm_options = tuple(jvm_options)
        self.java_dir = java_dir
        self.host = host
        self.launcher = tuple(launcher)
        self._proc: subprocess.Popen[bytes] | None = None
        self._out: IO[bytes] | None = None
        self._paused = False

    # -- what clients need -------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._port is None:
            raise ZooKeeperError("the server has not been started: no port yet")
        return self._port

    @property
    def connect_string(self) -> str:
        """``host:port``, for ``KazooClient(hosts=...)`` and ``zookeeper.connect``."""
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        if self._data_dir is None:
            raise ZooKeeperError("the server has not been started: no data dir yet")
        return self._data_dir

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def paused(self) -> bool:
        return self._paused and self.running

    def command(self) -> list[str]:
        """The ``java`` command line that runs the server."""
        classpath = os.pathsep.join(str(jar) for jar in find_classpath(self.java_dir))
        return [
            *self.launcher,
            find_java(),
            *self.jvm_options,
            f"-Dlog4j.configuration=file:{self.data_dir / 'log4j.properties'}",
            f"-Dzookeeper.log.dir={self.data_dir}",
            "-cp",
            classpath,
            MAIN_CLASS,
            str(self.data_dir / "zoo.cfg"),
        ]

    def zoo_cfg(self) -> dict[str, str]:
        """The ``zoo.cfg`` keys the server runs with."""
        cfg: dict[str, str] = {
            "tickTime": str(self.tick_time_ms),
            "dataDir": str(self.data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
            "minSessionTimeout": str(2 * self.tick_time_ms),
            "maxSessionTimeout": str(self.max_session_timeout_ms),
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "*",
        }
        cfg.update({key: str(value) for key, value in self.extra_config.items()})
        return cfg

    def four_letter_word(self, command: str, timeout: float = 1.0) -> str | None:
        """This server's reply to a four-letter command, or None if it does not answer."""
        return four_letter_word(command, self.port, self.host, timeout=timeout)

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's log, and of the JVM's own output if it wrote any."""
        if self._data_dir is None:
            return ""
        parts = _tail(self.log_path, lines)
        out = _tail(self.data_dir / "zookeeper.out", lines)
        if out:
            parts += ["-- zookeeper.out --", *out]
        return "\n".join(parts)

    # -- life cycle --------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the server and wait until it serves; ``ZooKeeperError`` if it does not."""
        if self.running:
            raise ZooKeeperError(f"ZooKeeper is already running on {self.connect_string}")
        self._prepare_data_dir()
        local = not self.launcher  # a launcher's namespace cannot be probed from here
        if self._port is None and local:
            # Our own pick of a free port can be taken by another process before the JVM
            # binds it: then pick again (a few times), since nobody asked for that port.
            for _ in range(_PORT_ATTEMPTS):
                self._port = free_port()
                with contextlib.suppress(_PortTaken):
                    return self._start_process()
            raise ZooKeeperError(
                f"cannot start ZooKeeper: {_PORT_ATTEMPTS} free ports in a row were taken "
                f"before it could bind them; log tail:\n{self.log_tail()}")
        if self._port is None:
            self._port = 2181
        elif local and port_in_use(self._port):
            raise ZooKeeperError(
                f"cannot start ZooKeeper: port {self.connect_string} is already in use"
            )
        return self._start_process()

    def _log_since(self, position: int) -> str:
        """What the server's log gained after byte ``position``."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(position)
                return log.read().decode(errors="replace")
        except OSError:
            return ""

    def _start_process(self) -> Self:
        command = self.command()  # may raise: not installed
        try:
            log_start = self.log_path.stat().st_size
        except OSError:
            log_start = 0
        self._write_config()
        self._out = (self.data_dir / "zookeeper.out").open("ab")
        try:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=self._out,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,  # Ctrl-C reaches the caller, who stops it in order
            )
        except OSError as e:
            self._close_out()
            raise ZooKeeperError(f"cannot run {command[0]}: {e}") from e
        self._paused = False
        _LIVE[self._proc.pid] = self._proc
        self._wait_serving(log_start)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if the JVM is still there after ``timeout`` s. Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            terminate_process(proc, timeout)
            _LIVE.pop(proc.pid, None)
        self._paused = False
        self._close_out()

    def restart(self, timeout: float = 10.0) -> Self:
        """Stop and start again with the same data dir and port."""
        self.stop(timeout)
        return self.start()

    def pause(self, timeout: float = 10.0) -> None:
        """Freeze the server (SIGSTOP) and return once every JVM thread has stopped: from then
        on nothing is answered until ``resume()``. Clients see their connection time out
        (kazoo: SUSPENDED) and reconnect after ``resume()``.

        Sessions that outlive their timeout while the server is paused are not reliably
        expired on resume: the server reads what the clients sent before giving up (a
        heartbeat, a reconnect) and, if that comes before its session tracker runs, the
        session lives on. To expire a session for sure, freeze the client instead (SIGSTOP a
        broker process): the server, still running, expires it on time.
        """
        self._signal(signal.SIGSTOP)
        self._paused = True
        assert self._proc is not None
        deadline = time.monotonic() + timeout
        while True:  # SIGSTOP only starts the stop: wait for the kernel's report that it is done
            pid, status = os.waitpid(self._proc.pid, os.WNOHANG | os.WUNTRACED)
            if pid and os.WIFSTOPPED(status):
                return
            if pid:  # it died: let Popen know how, as it will not be able to ask again
                self._proc.returncode = os.waitstatus_to_exitcode(status)
                raise ZooKeeperError(
                    f"ZooKeeper died while pausing; log tail:\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise ZooKeeperError(f"ZooKeeper did not stop within {timeout} s of SIGSTOP")
            time.sleep(0.005)

    def resume(self) -> None:
        """Unfreeze a paused server (SIGCONT)."""
        self._signal(signal.SIGCONT)
        self._paused = False

    def close(self) -> None:
        """Stop the server and remove its data dir if it is a temp dir this object made."""
        self.stop()
        if self._temp and self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "paused" if self.paused else "running" if self.running else "stopped"
        where = self.connect_string if self._port is not None else "no port"
        return f"<ZooKeeperServer {where} {state}>"

    # -- internals ---------------------------------------------------------------------------

    def _prepare_data_dir(self) -> None:
        if self._data_dir is not None:
            return
        if self._given_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="samsa-zk-"))
            return
        parent = self._given_dir.parent
        if not parent.is_dir():
            raise ZooKeeperError(
                f"cannot create ZooKeeper data dir {self._given_dir}: {parent} does not exist"
            )
        try:
            self._given_dir.mkdir(exist_ok=True)
        except OSError as e:
            raise ZooKeeperError(f"cannot create ZooKeeper data dir {self._given_dir}: {e}") from e
        self._data_dir = self._given_dir

    def _write_config(self) -> None:
        lines: Iterable[str] = (f"{key}={value}" for key, value in self.zoo_cfg().items())
        (self.data_dir / "zoo.cfg").write_text("\n".join(lines) + "\n")
        (self.data_dir / "log4j.properties").write_text(_LOG4J.format(log=self.log_path))

    def _wait_serving(self, log_start: int) -> None:
        """Until ``conf`` names our data dir: the server is up, and it is ours."""
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        expected = f"dataDir={self.data_dir / 'version-2'}"
        while True:
            code = self._proc.poll()
            if code is not None:
                self.stop()
                if _BIND_FAILURE in self._log_since(log_start):
                    raise _PortTaken(f"cannot start ZooKeeper: port {self.connect_string} "
                                     "was taken before it could bind it")
                raise ZooKeeperError(
                    f"ZooKeeper on {self.connect_string} exited with code {code} while starting;"
                    f" log tail:\n{self.log_tail()}"
                )
            reply = self.four_letter_word("conf", timeout=0.5)
            if reply is not None and expected in reply.splitlines():
                return
            if time.monotonic() > deadline:
                tail = self.log_tail()
                self.stop(timeout=2.0)
                raise ZooKeeperError(
                    f"ZooKeeper on {self.connect_string} did not start serving within"
                    f" {self.start_timeout} s; log tail:\n{tail}"
                )
            time.sleep(0.05)

    def _signal(self, sig: signal.Signals) -> None:
        if self._proc is None or self._proc.poll() is not None:
            raise ZooKeeperError("ZooKeeper is not running")
        self._proc.send_signal(sig)

    def _close_out(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
