"""The distribution as a user gets it: ``samsa-broker`` (the name ``samsa`` on PyPI belongs to a
2014 client for Kafka 0.7), a wheel of the ``samsa`` package alone, that installs in a fresh
virtual environment and runs ``samsa server``."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from waiting import wait_for

from samsa.tools.zookeeper_server import free_port

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    (found,) = out.glob("samsa_broker-*.whl")
    return found


def test_the_wheel_holds_the_package_alone(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"samsa"}
    assert not [n for n in names if n.startswith(("tests/", "bench/")) or "/tests/" in n]
    # the console's pages and scripts travel with it (package data)
    assert {"samsa/console/templates/base.html", "samsa/console/static/chart.umd.min.js",
            "samsa/console/static/console.js"} <= set(names)
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert "Name: samsa-broker\n" in text
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "samsa = samsa.cli:run" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.fixture(scope="module")
def fresh_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", str(wheel)],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr[-3000:]
    yield venv


def test_a_fresh_install_runs_a_broker(fresh_venv: Path, tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(fresh_venv / "bin" / "samsa"), "server",
             "--override", f"log.dirs={tmp_path / 'data'}",
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        wait_for(lambda: "started on" in log.read_text() or server.poll() is not None,
                 timeout=60, what="the installed broker to start")
        assert server.poll() is None, log.read_text()
        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("installed", b"hello")
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "installed"})
        consumer.assign([TopicPartition("installed", 0, 0)])
        try:
            msg = wait_for(lambda: consumer.poll(0.5), timeout=30, what="the record back")
            assert msg.error() is None and msg.value() == b"hello"
        finally:
            consumer.close()
        _console_serves(fresh_venv, bootstrap, tmp_path)
        # the fresh environment has none of the test extra: the broker needs none of it
        listed = subprocess.run([str(fresh_venv / "bin" / "pip"), "list"], capture_output=True,
                                text=True, check=True, timeout=120).stdout.lower()
        assert "pyspark" not in listed and "pytest" not in listed
    finally:
        server.terminate()
        server.wait(30)
    assert "stopped cleanly" in log.read_text()


def _console_serves(venv: Path, bootstrap: str, tmp_path: Path) -> None:
    """``samsa ui`` of the installed package serves its pages, templates and scripts."""
    port = free_port()
    log = tmp_path / "ui.log"
    with log.open("w") as out:
        ui = subprocess.Popen([str(venv / "bin" / "samsa"), "ui", "--bootstrap-server", bootstrap,
                               "--port", str(port)], stdout=out, stderr=subprocess.STDOUT)
    try:
        def page(path: str) -> str | None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                    return r.read().decode()
            except OSError:
                return None
        topics = wait_for(lambda: page("/topics"), timeout=60, what="the installed console")
        assert "/topics/installed" in topics, log.read_text()
        assert "Chart" in (page("/static/chart.umd.min.js") or "")
    finally:
        ui.terminate()
        ui.wait(30)
