"""samsa.Broker (embedded), the samsa_broker pytest fixture, and the ``samsa server`` process:
start, stop, persistence, clean shutdown, signals and config errors."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

import samsa

pytestmark = pytest.mark.timeout(90)

MARKER = ".kafka_cleanshutdown"
SAMSA = str(Path(sys.executable).parent / "samsa")
DEADLINE = 15.0


# --- helpers ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_versions_ok(host: str, port: int) -> bool:
    """One ApiVersions v0 round trip on a fresh connection."""
    request = struct.pack(">hhih", 18, 0, 42, 1) + b"t"
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        body = sock.recv(size, socket.MSG_WAITALL)
    return struct.unpack_from(">ih", body) == (42, 0)


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "message.timeout.ms": 10000})
    errors: list[KafkaError] = []
    for i, value in enumerate(values):
        producer.produce(topic, value, key=b"%d" % i, partition=i % partitions,
                         on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(DEADLINE) == 0
    assert errors == []


def consume(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "embedded",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + DEADLINE
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert not msg.error(), msg.error()
            got.append(msg.value())
        assert len(got) == count, f"got {len(got)} of {count}"
        return got
    finally:
        consumer.close()


def refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        return True
    return False


# --- sync and async use -------------------------------------------------------------------------


def test_sync_context_manager(tmp_path):
    with samsa.Broker(tmp_path) as b:
        host, port = b.bootstrap_servers.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) == b.port > 0
        assert b.server.started
        assert api_versions_ok(host, b.port)
        produce(b.bootstrap_servers, "sync", [b"a", b"b"])
        assert consume(b.bootstrap_servers, "sync", 2) == [b"a", b"b"]
        assert not (tmp_path / MARKER).exists(), "the marker must go while the broker runs"
    assert not b.server.started
    assert refuses_connections(b.port)
    assert (tmp_path / MARKER).exists()
    assert (tmp_path / "sync-0").is_dir(), "an explicit data dir is kept"


def test_temporary_data_dir_is_removed():
    with samsa.Broker() as b:
        data_dir = b.data_dir
        assert data_dir.is_dir()
        produce(b.bootstrap_servers, "tmp", [b"x"])
    assert not data_dir.exists()


def test_config_overrides_and_kafka_names(tmp_path):
    with samsa.Broker(tmp_path, num_partitions=4,
                      config={"auto.create.topics.enable": "true"}) as b:
        assert b.server.config.get("num.partitions") == 4
        produce(b.bootstrap_servers, "four", [b"x"] * 8, partitions=4)
        assert consume(b.bootstrap_servers, "four", 2, partition=3) == [b"x", b"x"]


def test_bad_config_raises_before_starting(tmp_path):
    with pytest.raises(ValueError, match="foo.bar"):
        samsa.Broker(tmp_path, config={"foo.bar": "1"})
    with pytest.raises(ValueError, match="num.partitions"):
        samsa.Broker(tmp_path, num_partitions="abc")


def test_second_broker_on_the_same_data_dir_fails(tmp_path):
    with samsa.Broker(tmp_path):
        other = samsa.Broker(tmp_path)
        with pytest.raises(Exception, match="in use"):
            other.start()


@pytest.mark.asyncio
async def test_a_second_stop_waits_for_the_one_under_way(tmp_path):
    """As after an embedded broker's halt, whose stop runs as a task: a second stop() returns
    only once the first has finished (the directory locks released), so the same data dir
    starts again at once."""
    async with samsa.Broker(tmp_path) as b:
        first = asyncio.create_task(b.server.stop())
        await asyncio.sleep(0)  # the first stop is under way
        await b.server.stop()
        assert first.done()
    async with samsa.Broker(tmp_path) as again:
        assert again.server.started


@pytest.mark.asyncio
async def test_async_context_manager(tmp_path):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as AioTopicPartition

    async with samsa.Broker(tmp_path, num_partitions=2) as b:
        # The broker runs in this very event loop, next to the clients.
        reader, writer = await asyncio.open_connection("127.0.0.1", b.port)
        request = struct.pack(">hhih", 18, 0, 9, 1) + b"a"
        writer.write(struct.pack(">i", len(request)) + request)
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), DEADLINE))[0]
        body = await reader.readexactly(size)
        assert struct.unpack_from(">ih", body) == (9, 0)
        writer.close()

        producer = AIOKafkaProducer(bootstrap_servers=b.bootstrap_servers)
        await asyncio.wait_for(producer.start(), DEADLINE)
        try:
            for i in range(6):
                await producer.send_and_wait("aio", b"%d" % i, partition=i % 2)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=b.bootstrap_servers,
                                    enable_auto_commit=False, auto_offset_reset="earliest")
        await asyncio.wait_for(consumer.start(), DEADLINE)
        try:
            tp = AioTopicPartition("aio", 1)
            consumer.assign([tp])
            got = []
            while len(got) < 3:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=200), DEADLINE)
                got.extend(r.value for records in batch.values() for r in records)
            assert got == [b"1", b"3", b"5"]
        finally:
            await consumer.stop()
        port = b.port
    assert (tmp_path / MARKER).exists()
    assert refuses_connections(port)


def test_samsa_broker_fixture(samsa_broker):
    assert samsa_broker.server.started
    produce(samsa_broker.bootstrap_servers, "fixture", [b"one", b"two", b"three"])
    assert consume(samsa_broker.bootstrap_servers, "fixture", 3) == [b"one", b"two", b"three"]


def test_samsa_broker_fixture_is_fresh_per_test(samsa_broker):
    consumer = Consumer({"bootstrap.servers": samsa_broker.bootstrap_servers,
                         "group.id": "x"})
    try:
        topics = consumer.list_topics(timeout=DEADLINE).topics
    finally:
        consumer.close()
    assert "fixture" not in topics


# --- persistence and clean shutdown -----------------------------------------------------------


def test_data_persists_across_restart(tmp_path):
    values = [b"value-%d" % i for i in range(100)]
    with samsa.Broker(tmp_path, num_partitions=3) as b:
        produce(b.bootstrap_servers, "keep", values, partitions=3)
        produce(b.bootstrap_servers, "keep2", [b"z"])
        cluster_id, broker_id = b.server.cluster_id, b.server.broker_id
    with samsa.Broker(tmp_path) as b:
        assert (b.server.cluster_id, b.server.broker_id) == (cluster_id, broker_id)
        consumer = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "p"})
        try:
            md = consumer.list_topics(timeout=DEADLINE)
        finally:
            consumer.close()
        assert {"keep", "keep2"} <= set(md.topics)
        assert len(md.topics["keep"].partitions) == 3, "partition count must survive a restart"
        for p in range(3):
            assert consume(b.bootstrap_servers, "keep", len(values[p::3]), partition=p) == (
                values[p::3]
            )
        assert consume(b.bootstrap_servers, "keep2", 1) == [b"z"]
        # Appends continue after the recovered log end.
        produce(b.bootstrap_servers, "keep2", [b"after"])
        assert consume(b.bootstrap_servers, "keep2", 2) == [b"z", b"after"]


def test_clean_shutdown_marker_and_no_recovery_on_restart(tmp_path, caplog):
    recovering = "no clean shutdown marker"
    with samsa.Broker(tmp_path) as b:
        produce(b.bootstrap_servers, "clean", [b"a", b"b", b"c"])
        assert not (tmp_path / MARKER).exists()
    assert (tmp_path / MARKER).exists()
    checkpoint = (tmp_path / "recovery-point-offset-checkpoint").read_text().split()
    # version, count, then "topic partition offset": the whole log is flushed.
    assert checkpoint[:2] == ["0", "1"] and checkpoint[2:] == ["clean", "0", "3"]
    with caplog.at_level(logging.INFO, logger="samsa"), samsa.Broker(tmp_path) as b:
        assert consume(b.bootstrap_servers, "clean", 3) == [b"a", b"b", b"c"]
    assert recovering not in caplog.text
    # Control: without the marker the broker does recover (so the check above means
    # something).
    (tmp_path / MARKER).unlink()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="samsa"), samsa.Broker(tmp_path) as b:
        assert consume(b.bootstrap_servers, "clean", 3) == [b"a", b"b", b"c"]
    assert recovering in caplog.text


def test_stop_with_a_long_poll_in_flight(tmp_path):
    """A graceful stop while a client waits in a long-poll fetch finishes promptly enough and
    still writes the marker."""
    with samsa.Broker(tmp_path) as b:
        produce(b.bootstrap_servers, "lp", [b"x"])
        consumer = Consumer({"bootstrap.servers": b.bootstrap_servers, "group.id": "lp",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 3000})
        try:
            consumer.assign([TopicPartition("lp", 0, 1)])
            consumer.poll(0.5)  # a fetch at the log end is now waiting in the broker
            started = time.monotonic()
            b.stop()
            assert time.monotonic() - started < 10
        finally:
            consumer.close()
    assert (tmp_path / MARKER).exists()


def test_stop_after_client_vanished_during_long_poll_leaves_no_pending_tasks(tmp_path, caplog):
    """A connection that goes away while its fetch waits must not leave a task behind when the
    broker stops ("Task was destroyed but it is pending!")."""
    gc.collect()  # leftovers of earlier tests are not this test's business
    caplog.clear()
    caplog.set_level(logging.ERROR, logger="asyncio")
    with samsa.Broker(tmp_path) as b:
        produce(b.bootstrap_servers, "gone", [b"x"])
        # Fetch v4 at the log end, max wait 5 s, min bytes 1.
        topic = struct.pack(">h", 4) + b"gone"
        body = (struct.pack(">iiiib", -1, 5000, 1, 1 << 20, 0) + struct.pack(">i", 1) + topic
                + struct.pack(">i", 1) + struct.pack(">iqi", 0, 1, 1 << 20))
        fetch = struct.pack(">hhih", 1, 4, 2, 1) + b"t" + body
        with socket.create_connection(("127.0.0.1", b.port), timeout=5) as sock:
            sock.sendall(struct.pack(">i", len(fetch)) + fetch)
            time.sleep(0.3)
        time.sleep(0.3)  # the broker has seen the close; the fetch is still waiting
    del b  # drop every reference to the stopped server, so its leftovers are collected now
    gc.collect()
    destroyed = [r for r in caplog.records if "Task was destroyed" in r.getMessage()]
    assert destroyed == [], (
        "KafkaServer.stop() does not wait for (or cancel) the task of a connection that was "
        "lost while its request was in flight"
    )


# --- the samsa server process -----------------------------------------------------------------


def start_server(data: Path, port: int, log: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [SAMSA, "server", "--override", f"log.dirs={data}",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=log.open("ab"),
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"samsa server exited: {log.read_text()}"
        try:
            if api_versions_ok("127.0.0.1", port):
                return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    proc.wait(10)
    raise AssertionError(f"samsa server did not come up: {log.read_text()}")


def stop_server(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_server_process_signal_is_a_clean_shutdown(tmp_path, sig):
    data, log = tmp_path / "data", tmp_path / "server.log"
    port = free_port()
    proc = start_server(data, port, log)
    try:
        assert "is ready" in log.read_text()
        produce(f"127.0.0.1:{port}", "signal", [b"m%d" % i for i in range(20)])
        assert not (data / MARKER).exists()
    finally:
        code = stop_server(proc, sig)
    assert code == 0, log.read_text()
    assert (data / MARKER).exists()
    proc = start_server(data, port, log)
    try:
        assert consume(f"127.0.0.1:{port}", "signal", 20) == [b"m%d" % i for i in range(20)]
    finally:
        assert stop_server(proc) == 0
    text = log.read_text()
    assert "no clean shutdown marker" not in text.split("is ready")[1], (
        "the restart after a clean shutdown must not recover"
    )


def test_server_process_killed_recovers(tmp_path):
    """Control for the test above: SIGKILL leaves no marker, and the restart recovers the
    data written before the kill."""
    data, log = tmp_path / "data", tmp_path / "server.log"
    port = free_port()
    proc = start_server(data, port, log)
    try:
        produce(f"127.0.0.1:{port}", "killed", [b"k%d" % i for i in range(5)])
    finally:
        proc.kill()
        proc.wait(10)
    assert not (data / MARKER).exists()
    proc = start_server(data, port, log)
    try:
        assert consume(f"127.0.0.1:{port}", "killed", 5) == [b"k%d" % i for i in range(5)]
    finally:
        assert stop_server(proc) == 0
    assert "no clean shutdown marker" in log.read_text()


@pytest.mark.parametrize(
    ("override", "key"),
    [("foo.bar=1", "foo.bar"), ("num.partitions=abc", "num.partitions"),
     ("num.partitions=0", "num.partitions"),
     ("listeners=SASL_SSL://127.0.0.1:1", "samsa has no GSSAPI (Kerberos)"),
     ("listeners=SSL://127.0.0.1:1", "ssl.keystore.location")],
)
def test_server_bad_config_one_line_error(tmp_path, override, key):
    result = subprocess.run(
        [SAMSA, "server", "--override", f"log.dirs={tmp_path}",
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
         "--override", override],
        capture_output=True, text=True, timeout=30,
    )
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert key in lines[0]
    assert "Traceback" not in result.stderr


def test_server_unknown_properties_file(tmp_path):
    result = subprocess.run([SAMSA, "server", str(tmp_path / "nope.properties")],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "nope.properties" in lines[0], result.stderr
