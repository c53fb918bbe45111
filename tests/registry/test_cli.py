"""``samsa schema-registry``: one-line errors for bad options, and a real run (flags or a
properties file) against an embedded broker, stopped by SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from waiting import wait_for

from samsa.embedded import Broker
from samsa.tools.zookeeper_server import free_port

from .helpers import Http, record

COMMAND = [sys.executable, "-m", "samsa.cli", "schema-registry"]


@pytest.mark.parametrize("args, message", [
    ([], "give --bootstrap-server HOST:PORT or a properties file"),
    (["--bootstrap-server", "nope"], "kafkastore.bootstrap.servers takes host:port"),
    (["--bootstrap-server", "127.0.0.1:1"], "cannot connect to any bootstrap server"),
    (["--bootstrap-server", "127.0.0.1:1", "--listeners", "ftp://x"],
     "listeners takes http://HOST:PORT"),
    (["/no/such/registry.properties"], "cannot read /no/such/registry.properties"),
    (["--bootstrap-server", "127.0.0.1:1", "--override", "schema.compatibility.level=sideways"],
     "schema.compatibility.level takes one of"),
    (["--bootstrap-server", "127.0.0.1:1", "--override", "novalue"],
     "--override takes key=value"),
    (["--bootstrap-server", "127.0.0.1:1", "--override", "leader.eligibility=maybe"],
     "leader.eligibility takes true or false"),
    (["--no-such-option"], "No such option"),
])
def test_bad_options_are_one_line(args: list[str], message: str) -> None:
    done = subprocess.run([*COMMAND, *args], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("samsa: ") and message in lines[0], lines[0]


def test_listener_in_use_is_one_line(samsa_broker: Broker) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([*COMMAND, "--bootstrap-server", samsa_broker.bootstrap_servers,
                               "--listeners", f"http://127.0.0.1:{port}"],
                              capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot listen on 127.0.0.1" in lines[0], done.stderr


def _run(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*COMMAND, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def _serve_and_stop(process: subprocess.Popen[str], url: str) -> str:
    try:
        http = Http(url)

        def answers() -> bool:
            try:
                return http.get("/").status == 200
            except OSError:
                return process.poll() is not None  # stop waiting on a dead process
        wait_for(answers, timeout=60, what="the registry's listener")
        assert process.poll() is None
        assert http.register("cli-value", record("R", ("a", "int"))).body == {"id": 1}
        assert http.get("/subjects").body == ["cli-value"]
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr
    return stderr


def test_run_with_flags(samsa_broker: Broker) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    stderr = _serve_and_stop(_run(["--bootstrap-server", samsa_broker.bootstrap_servers,
                                   "--listeners", url]), url)
    assert f"samsa schema registry is ready: {url}" in stderr
    assert "shutting down" in stderr


def test_run_with_a_properties_file(samsa_broker: Broker, tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    properties = tmp_path / "schema-registry.properties"
    properties.write_text(
        f"listeners={url}\n"
        f"kafkastore.bootstrap.servers=PLAINTEXT://{samsa_broker.bootstrap_servers}\n"
        "kafkastore.topic=_my_schemas\n"
        "schema.compatibility.level=full\n"
        "host.name=127.0.0.1\n")
    process = _run([str(properties)])
    try:
        wait_for(lambda: Http(url).get("/config").status == 200 if _listening(port) else
                 process.poll() is not None, timeout=60, what="the registry's listener")
        assert Http(url).get("/config").body == {"compatibilityLevel": "FULL"}
    finally:
        _serve_and_stop(process, url)
    admin = AdminClient({"bootstrap.servers": samsa_broker.bootstrap_servers})
    assert "_my_schemas" in admin.list_topics(timeout=10).topics


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _primary_url(bootstrap: str) -> str | None:
    """The member of the registries' group that holds _schemas' partition: its client.id is
    its URL."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    group = admin.describe_consumer_groups(["schema-registry"])["schema-registry"].result(30)
    for member in group.members:
        assignment = member.assignment.topic_partitions if member.assignment else []
        if any(p.topic == "_schemas" for p in assignment):
            return str(member.client_id)
    return None


def test_a_killed_primary_is_replaced(samsa_broker: Broker) -> None:
    """SIGKILL: no LeaveGroup; the group notices when the session times out (10 s)."""
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    processes = {url: _run(["--bootstrap-server", samsa_broker.bootstrap_servers,
                            "--listeners", url]) for url in urls}
    try:
        for url in urls:
            wait_for(lambda url=url: _listening(int(url.rsplit(":", 1)[1])), timeout=60,
                     what=f"{url} listening")
        primary = wait_for(lambda: _primary_url(samsa_broker.bootstrap_servers), timeout=60,
                           what="a primary")
        (secondary,) = [u for u in urls if u != primary]
        assert Http(secondary).register("k", record("R", ("a", "int"))).body == {"id": 1}
        processes[primary].kill()
        processes[primary].wait(30)
        wait_for(lambda: _primary_url(samsa_broker.bootstrap_servers) == secondary,
                 timeout=60, what="the survivor elected")
        answer = Http(secondary).register("k", record("R", ("a", "int"), ("b", "int", 0)))
        assert answer.body == {"id": 2}
        assert Http(secondary).get("/subjects/k/versions").body == [1, 2]
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.communicate(timeout=60)
