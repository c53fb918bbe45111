"""kcat (librdkafka's command-line client) against samsa: produce lines, read them back, list
metadata."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.timeout(60)

TIMEOUT = 30


def kcat(broker, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    # `make test` installs the Debian package; a missing kcat is a failure, not a skip.
    assert shutil.which("kcat"), "kcat is not installed: run `make test` (apt package kcat)"
    result = subprocess.run(
        ["kcat", "-b", broker.bootstrap_servers, *args],
        input=stdin, capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert result.returncode == 0, f"kcat {' '.join(args)} failed: {result.stderr}"
    return result


def test_produce_lines_and_consume_them(broker):
    lines = [f"line {i}" for i in range(20)]
    kcat(broker, "-P", "-t", "lines", stdin="\n".join(lines) + "\n")
    out = kcat(broker, "-C", "-t", "lines", "-o", "beginning", "-e", "-f", "%o %s\\n")
    assert out.stdout.splitlines() == [f"{i} {line}" for i, line in enumerate(lines)]


def test_produce_with_keys(broker):
    rows = ["alpha:one", "beta:two", "alpha:three", "gamma:with:colons"]
    kcat(broker, "-P", "-t", "keyed", "-K:", stdin="\n".join(rows) + "\n")
    out = kcat(broker, "-C", "-t", "keyed", "-o", "beginning", "-e", "-f", "%k %s\\n")
    assert out.stdout.splitlines() == [
        "alpha one", "beta two", "alpha three", "gamma with:colons"
    ]


def test_consume_from_offset_with_headers_and_compression(broker):
    kcat(broker, "-P", "-t", "hdr", "-z", "zstd", "-H", "origin=kcat", "-H", "n=1",
         stdin="a\nb\nc\n")
    out = kcat(broker, "-C", "-t", "hdr", "-o", "1", "-e", "-f", "%o %s %h\\n")
    assert out.stdout.splitlines() == ["1 b origin=kcat,n=1", "2 c origin=kcat,n=1"]


def test_consume_tail_offsets(broker):
    kcat(broker, "-P", "-t", "tail", stdin="".join(f"m{i}\n" for i in range(10)))
    out = kcat(broker, "-C", "-t", "tail", "-o", "-3", "-e", "-f", "%o %s\\n")
    assert out.stdout.splitlines() == ["7 m7", "8 m8", "9 m9"]


def test_metadata_listing(broker):
    kcat(broker, "-P", "-t", "listed", stdin="x\n")
    out = kcat(broker, "-L").stdout
    node_id = broker.server.broker_id
    assert "1 brokers:" in out
    assert f"broker {node_id} at {broker.bootstrap_servers}" in out
    assert 'topic "listed" with 1 partitions:' in out
    assert f"partition 0, leader {node_id}, replicas: {node_id}, isrs: {node_id}" in out


def test_metadata_listing_json(broker_factory):
    broker = broker_factory(num_partitions=4)
    kcat(broker, "-P", "-t", "four", "-p", "3", stdin="x\n")
    listing = json.loads(kcat(broker, "-L", "-J").stdout)
    (node,) = listing["brokers"]
    assert (node["id"], node["name"]) == (broker.server.broker_id, broker.bootstrap_servers)
    (topic,) = [t for t in listing["topics"] if t["topic"] == "four"]
    assert sorted(p["partition"] for p in topic["partitions"]) == [0, 1, 2, 3]
    out = kcat(broker, "-C", "-t", "four", "-p", "3", "-o", "beginning", "-e", "-f", "%p %s\\n")
    assert out.stdout.splitlines() == ["3 x"]
