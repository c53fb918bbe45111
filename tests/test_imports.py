"""What importing the client-side packages costs a Spark executor: no broker code, no kazoo.
(import-linter checks the import graph in make test; this checks what a real import loads.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

BROKER = ("samsa.server", "samsa.handlers", "samsa.coordinator", "samsa.cluster",
          "samsa.storage", "samsa.embedded", "kazoo")


@pytest.mark.parametrize("module", ["samsa.spark", "samsa.pipeline", "samsa.pipeline.load",
                                    "samsa.pipeline.stream", "samsa.pipeline.cli"])
def test_client_packages_import_no_broker_code(module: str) -> None:
    loaded = json.loads(subprocess.run(
        [sys.executable, "-c", f"import json, sys, {module}; print(json.dumps(list(sys.modules)))"],
        capture_output=True, text=True, check=True, timeout=120).stdout)
    assert module in loaded
    assert [m for m in loaded if m.startswith(BROKER)] == []


def test_the_broker_is_still_one_attribute_away() -> None:
    out = subprocess.run([sys.executable, "-c", "import samsa; print(samsa.Broker.__name__)"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "Broker"


def test_the_package_graph_has_no_cycle_and_server_is_above_its_services() -> None:
    from import_graph import levels, package_graph

    edges = package_graph()
    height = levels(edges)  # raises graphlib.CycleError on a cycle
    assert height["server"] > max(height[p] for p in ("handlers", "coordinator", "zk", "cluster"))
    assert height["protocol"] < height["cluster"] and height["records"] < height["storage"]
    for client in ("spark", "pipeline"):
        assert not edges[client] & {"server", "handlers", "coordinator", "zk", "cluster",
                                    "storage", "embedded"}, client
