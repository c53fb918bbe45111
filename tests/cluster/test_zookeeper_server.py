"""ZooKeeperServer: a real ZooKeeper (Debian's jars) started, used through kazoo, restarted,
paused and stopped. Every wait is bounded; everything listens on loopback."""

from __future__ import annotations

import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState

from samsa.tools.zookeeper_server import (
    NOT_INSTALLED,
    ZooKeeperError,
    ZooKeeperServer,
    find_classpath,
    four_letter_word,
    port_in_use,
)
from tests.waiting import wait_for

# Reconnect attempts every 0.1-0.2 s, not with exponential back-off: tests see state changes
# soon after the server comes back.
FAST_RETRY = {"max_tries": -1, "delay": 0.1, "backoff": 1, "max_jitter": 0.5, "max_delay": 0.2}


@pytest.fixture
def zk(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path / "zk", tick_time_ms=200) as server:
        yield server


@pytest.fixture
def clients() -> Iterator[list[KazooClient]]:
    """Clients a test makes; each is stopped and closed at the end."""
    made: list[KazooClient] = []
    yield made
    for client in made:
        client.stop()
        client.close()


def connect(server: ZooKeeperServer, clients: list[KazooClient], timeout: float = 10.0
            ) -> KazooClient:
    client = KazooClient(hosts=server.connect_string, timeout=timeout,
                         connection_retry=FAST_RETRY)
    clients.append(client)
    client.start(timeout=10)
    return client


def test_serves_kazoo_and_ephemeral_node_goes_with_its_session(
    zk: ZooKeeperServer, clients: list[KazooClient]
) -> None:
    assert zk.connect_string == f"127.0.0.1:{zk.port}"
    assert "Mode: standalone" in (zk.four_letter_word("srvr") or "")
    assert zk.four_letter_word("ruok") == "imok"
    owner, other = connect(zk, clients), connect(zk, clients)
    owner.create("/brokers/ids/1", b'{"host": "127.0.0.1"}', ephemeral=True, makepath=True)
    data, stat = other.get("/brokers/ids/1")
    assert data == b'{"host": "127.0.0.1"}'
    assert stat.ephemeralOwner == owner.client_id[0]

    owner.stop()  # closes the session: the server deletes its ephemeral nodes at once
    wait_for(lambda: other.exists("/brokers/ids/1") is None, timeout=10,
             what="the ephemeral node to go with its session")
    assert other.exists("/brokers/ids") is not None  # the persistent parent stays


def test_logs_to_a_file_in_the_data_dir(zk: ZooKeeperServer) -> None:
    cfg = (zk.data_dir / "zoo.cfg").read_text()
    assert "clientPortAddress=127.0.0.1" in cfg and "admin.enableServer=false" in cfg
    assert "binding to port" in zk.log_path.read_text()
    assert (zk.data_dir / "zookeeper.out").read_text() == ""  # nothing on the JVM's console
    assert (zk.data_dir / "version-2").is_dir()
    conf = zk.four_letter_word("conf") or ""
    assert "minSessionTimeout=400" in conf and "maxSessionTimeout=60000" in conf


def test_restart_keeps_persistent_nodes_port_and_connected_clients(
    zk: ZooKeeperServer, clients: list[KazooClient]
) -> None:
    # Session 3 s: a client that reconnects at the wrong moment of the server's start waits
    # out its connect timeout, the session timeout (ZooKeeper 3.8.0 leaves that connection
    # hanging: ZOOKEEPER-5051); 3 s bounds that.
    client = connect(zk, clients, timeout=3.0)
    states = StateLog(client)
    client.create("/config/topics/events", b"3 partitions", makepath=True)
    before = zk.connect_string
    first_pid = zk.pid

    zk.restart()

    assert zk.connect_string == before and zk.pid != first_pid
    fresh = connect(zk, clients)
    assert fresh.get_children("/config/topics") == ["events"]
    assert fresh.get("/config/topics/events")[0] == b"3 partitions"
    # A client of the old server notices, and reconnects by itself.
    states.wait_for(KazooState.SUSPENDED, timeout=10)
    states.wait_for(KazooState.CONNECTED, timeout=10)
    assert client.get("/config/topics/events")[0] == b"3 partitions"


def test_stop_frees_the_port_and_is_idempotent(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk").start()
    port = server.port
    assert port_in_use(port)
    server.stop()
    assert not server.running and server.pid is None
    assert four_letter_word("ruok", port, timeout=0.5) is None
    assert not port_in_use(port)
    with socket.socket() as sock:  # any server may listen there now (servers, ZooKeeper too,
        # set SO_REUSEADDR: the four-letter probes leave the port's side in TIME_WAIT)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
    server.stop()  # a second stop does nothing
    assert (tmp_path / "zk" / "version-2").is_dir()  # a given data dir stays


def test_temp_data_dir_is_removed_on_close() -> None:
    with ZooKeeperServer() as server:
        data_dir = server.data_dir
        assert data_dir.name.startswith("samsa-zk-") and data_dir.is_dir()
    assert not data_dir.exists()


def test_missing_data_dir_parent_is_a_clear_error(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "absent" / "zk")
    with pytest.raises(ZooKeeperError, match=r"cannot create ZooKeeper data dir .*absent/zk: "
                                             r".*absent does not exist"):
        server.start()
    assert not server.running


def test_port_in_use_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        server = ZooKeeperServer(tmp_path / "zk", port=port)
        with pytest.raises(ZooKeeperError,
                           match=rf"port 127\.0\.0\.1:{port} is already in use"):
            server.start()
    assert not server.running


def test_a_picked_port_taken_before_zookeeper_binds_it_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The free port start() picks can be taken by another process (another test worker)
    before the JVM binds it: the real ZooKeeper fails with BindException, and start() picks
    another port instead of failing."""
    import samsa.tools.zookeeper_server as zookeeper_server

    real_free_port = zookeeper_server.free_port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        picks = iter([taken])
        monkeypatch.setattr(zookeeper_server, "free_port",
                            lambda host="127.0.0.1": next(picks, None) or real_free_port(host))
        with ZooKeeperServer(tmp_path / "zk") as server:
            assert server.port != taken
            assert server.four_letter_word("ruok") == "imok"
            assert "BindException" in server.log_path.read_text()


def test_a_server_that_dies_while_starting_reports_its_log_tail(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", config={"maxClientCnxns": "many"})
    started = time.monotonic()
    with pytest.raises(ZooKeeperError, match=r"(?s)exited with code \d+ while starting; "
                                             r"log tail:\n.*NumberFormatException.*many"):
        server.start()
    assert time.monotonic() - started < 15
    assert not server.running


def test_not_installed_is_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperError) as raised:
        find_classpath(tmp_path)
    assert str(raised.value) == NOT_INSTALLED == (
        "ZooKeeper is not installed: apt-get install libzookeeper-java")
    with pytest.raises(ZooKeeperError, match="ZooKeeper is not installed"):
        ZooKeeperServer(tmp_path / "zk", java_dir=tmp_path).start()
    assert len(find_classpath()) == 3  # and here it is installed


def test_config_may_not_override_what_the_server_owns() -> None:
    with pytest.raises(ValueError, match="config may not set clientPort, dataDir"):
        ZooKeeperServer(config={"dataDir": "/x", "clientPort": 1})


def test_pause_suspends_clients_and_resume_brings_them_back(
    zk: ZooKeeperServer, clients: list[KazooClient]
) -> None:
    # Session 4 s: kazoo gives up on the connection after 2/3 of it (SUSPENDED, about 2.7 s
    # after its last heartbeat), and the test resumes then: the session still has >= 1 s left.
    client = connect(zk, clients, timeout=4.0)
    states = StateLog(client)
    client.create("/controller", b"1", ephemeral=True)
    session = client.client_id[0]

    zk.pause()
    assert zk.paused and zk.running
    assert zk.four_letter_word("ruok", timeout=0.3) is None  # connects, but nobody answers
    states.wait_for(KazooState.SUSPENDED, timeout=10)
    zk.resume()
    assert not zk.paused

    states.wait_for(KazooState.CONNECTED, timeout=10)
    assert KazooState.LOST not in states.seen
    assert client.client_id[0] == session
    assert client.exists("/controller") is not None
    assert zk.four_letter_word("ruok") == "imok"


# A client in its own process, as a broker will be: it creates an ephemeral node, prints its
# session id, then prints every state change.
_FROZEN_CLIENT = """
import sys
from kazoo.client import KazooClient
client = KazooClient(hosts=sys.argv[1], timeout=2.0, connection_retry={retry!r})
client.add_listener(lambda state: print("state", state, flush=True))
client.start(timeout=10)
client.create("/brokers/ids/7", b"7", ephemeral=True, makepath=True)
print("session", client.client_id[0], flush=True)
sys.stdin.read()  # until the test closes our stdin
client.stop()
"""


def test_a_frozen_clients_session_expires_and_it_sees_that_on_waking(
    zk: ZooKeeperServer, clients: list[KazooClient]
) -> None:
    """What a broker stalled longer than its session timeout (a GC pause, SIGSTOP) goes
    through: the server, which keeps running, expires the session on its own clock and
    deletes the ephemeral node; the client learns it on waking (SUSPENDED, then LOST: kazoo's
    name for EXPIRED_SESSION) and opens a new session. Freezing the client, not the server,
    is what makes expiry deterministic: see ZooKeeperServer.pause()."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _FROZEN_CLIENT.format(retry=FAST_RETRY), zk.connect_string],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        try:
            for line in proc.stdout or ():
                lines.put(line.strip())
        except ValueError:  # the pipe was closed at the end of the test
            pass

    threading.Thread(target=pump, daemon=True).start()

    def next_line(timeout: float) -> str:
        try:
            return lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"the client printed nothing for {timeout} s") from None

    try:
        assert next_line(15) == "state CONNECTED"
        session = int(next_line(10).split()[1])
        observer = connect(zk, clients)
        assert observer.get("/brokers/ids/7")[1].ephemeralOwner == session

        proc.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        wait_for(lambda: observer.exists("/brokers/ids/7") is None, timeout=10,
                 what="the server to expire the frozen client's session")
        assert time.monotonic() - frozen_at >= 1.5  # not before (about) the 2 s timeout
        proc.send_signal(signal.SIGCONT)

        assert next_line(10) == "state SUSPENDED"
        assert next_line(10) == "state LOST"  # the server said: session expired
        assert next_line(10) == "state CONNECTED"  # a new session
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.communicate(timeout=15)  # closes stdin: the client stops


class StateLog:
    """A kazoo client's state changes, as they come."""

    def __init__(self, client: KazooClient) -> None:
        self.seen: list[str] = []
        self._changed = threading.Condition()
        client.add_listener(self._record)

    def _record(self, state: str) -> None:
        with self._changed:
            self.seen.append(state)
            self._changed.notify_all()

    def wait_for(self, state: str, timeout: float) -> None:
        with self._changed:
            assert self._changed.wait_for(lambda: state in self.seen, timeout), (
                f"no {state} within {timeout} s; states: {self.seen}")
