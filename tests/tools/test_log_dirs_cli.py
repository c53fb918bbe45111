"""``samsa log-dirs`` (kafka-log-dirs.sh) and DescribeLogDirs behind it, against an in-process
broker with three log directories, one of which is a file (offline from the start): each
partition is listed in the directory its files are in, with its size on disk; the offline
directory answers KafkaStorageException and no partitions; kafka-python's admin client reads
the same; bad input is one line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient

import samsa

from . import error_line, ok
from . import samsa as run_samsa

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[samsa.Broker, Path]]:
    root = tmp_path_factory.mktemp("log-dirs")
    (root / "broken").write_text("a file where a log directory should be\n")
    dirs = f"{root / 'a'},{root / 'b'},{root / 'broken'}"
    with samsa.Broker(root, config={"log.dirs": dirs, "num.partitions": 3}) as b:
        producer = Producer({"bootstrap.servers": b.bootstrap_servers, "linger.ms": 5})
        for i in range(90):
            producer.produce("sized", b"x" * (100 + i), partition=i % 3)
        producer.produce("other", b"y", partition=0)
        assert producer.flush(30) == 0
        yield b, root


def on_disk(root: Path) -> dict[str, dict[str, int]]:
    """Directory -> {partition: bytes of its .log files}, read from the file system."""
    found: dict[str, dict[str, int]] = {}
    for directory in ("a", "b"):
        for partition in (root / directory).iterdir():
            if partition.is_dir() and "-" in partition.name \
                    and partition.name.rsplit("-", 1)[1].isdigit() \
                    and not partition.name.startswith("__"):
                found.setdefault(str(root / directory), {})[partition.name] = sum(
                    f.stat().st_size for f in partition.glob("*.log"))
    return found


def test_describe_lists_each_directory_and_its_partitions(
        broker: tuple[samsa.Broker, Path]) -> None:
    b, root = broker
    out = ok(run_samsa("log-dirs", "--bootstrap-server", b.bootstrap_servers, "--describe"))
    lines = out.splitlines()
    broker_id = b.server.broker_id
    assert lines[:2] == ["Querying brokers for log directories information",
                         f"Received log directory information from brokers {broker_id}"]
    described = json.loads(lines[2])
    assert described["version"] == 1
    [entry] = described["brokers"]
    assert entry["broker"] == broker_id
    by_dir = {d["logDir"]: d for d in entry["logDirs"]}
    assert set(by_dir) == {str(root / "a"), str(root / "b"), str(root / "broken")}
    assert by_dir[str(root / "broken")]["error"] == \
        "org.apache.kafka.common.errors.KafkaStorageException"
    assert by_dir[str(root / "broken")]["partitions"] == []
    listed = {d: {p["partition"]: p["size"] for p in by_dir[d]["partitions"]
                  if not p["partition"].startswith("__")}
              for d in (str(root / "a"), str(root / "b"))}
    assert {d: ps for d, ps in listed.items() if ps} == on_disk(root)
    every = {p for ps in listed.values() for p in ps}
    assert every == {"sized-0", "sized-1", "sized-2", "other-0", "other-1", "other-2"}
    for d in ("a", "b"):
        assert by_dir[str(root / d)]["error"] is None
        assert all(p["offsetLag"] == 0 and p["isFuture"] is False
                   for p in by_dir[str(root / d)]["partitions"])

    # --topic-list filters the partitions, --broker-list names the broker
    out = ok(run_samsa("log-dirs", "--bootstrap-server", b.bootstrap_servers, "--describe",
                       "--topic-list", "other", "--broker-list", str(broker_id)))
    described = json.loads(out.splitlines()[2])
    names = {p["partition"] for d in described["brokers"][0]["logDirs"]
             for p in d["partitions"]}
    assert names == {"other-0", "other-1", "other-2"}


def test_kafka_python_reads_the_same(broker: tuple[samsa.Broker, Path]) -> None:
    b, root = broker
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap_servers)
    try:
        [answer] = admin.describe_log_dirs()
    finally:
        admin.close()
    dirs = {d["log_dir"]: d for d in answer["log_dirs"]}
    assert dirs[str(root / "broken")]["error_code"] == 56  # KAFKA_STORAGE_ERROR
    sizes = {f"{t['name']}-{p['partition_index']}": p["partition_size"]
             for d in ("a", "b") for t in dirs[str(root / d)]["topics"]
             for p in t["partitions"] if not t["name"].startswith("__")}
    assert sizes == {p: size for ps in on_disk(root).values() for p, size in ps.items()}
    assert all(dirs[str(root / d)]["total_bytes"] >= dirs[str(root / d)]["usable_bytes"] > 0
               for d in ("a", "b"))


def test_bad_input_is_one_line(broker: tuple[samsa.Broker, Path]) -> None:
    b, _ = broker
    line = error_line(run_samsa("log-dirs", "--bootstrap-server", b.bootstrap_servers,
                                "--describe", "--broker-list", "7,8"))
    assert "The given brokers do not exist from --broker-list: 7,8" in line
    assert "describe" in error_line(run_samsa("log-dirs", "--bootstrap-server",
                                              b.bootstrap_servers))
    assert "broker ids" in error_line(run_samsa("log-dirs", "--bootstrap-server",
                                                b.bootstrap_servers, "--describe",
                                                "--broker-list", "one"))
