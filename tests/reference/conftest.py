"""Kafka's own Java client and command-line tools, run as processes against samsa.

The release is pinned in ``pom.xml``; ``make reference`` (a prerequisite of ``make test``)
resolves it with Maven and compiles the small client driver of ``src/main/java`` into
``build/reference``. The ``kafka`` fixture runs that build first when it is missing or older
than its sources, then runs ``java -cp <classpath> <main class> <args>``: Kafka's tools under
the names of their ``bin/`` scripts, and the driver's scenarios.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import built
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build" / "reference"
CLASSPATH = BUILD / "classpath.txt"
RUN_TIMEOUT_S = 90

# Each bin/kafka-*.sh script of the release and the main class it runs.
TOOLS = {
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
}
CLIENTS = "samsa.reference.Clients"

# Short-lived JVMs: the C1 compiler only and the serial collector start quickest; Kafka's
# scripts give the tools 256 MB of heap. The clients' logs (slf4j-simple) go to stderr, WARN
# and above.
JVM_OPTIONS = [
    "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx256m", "-Djava.awt.headless=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
]


@dataclass(frozen=True)
class Run:
    args: list[str]
    rc: int
    stdout: str
    stderr: str

    def ok(self) -> str:
        """Assert exit code 0; the stdout."""
        program = " ".join(self.args[self.args.index("-cp") + 2:])  # the classpath is long
        assert self.rc == 0, (
            f"{program} exited {self.rc}\nstdout:\n{self.stdout[-3000:]}"
            f"\nstderr:\n{self.stderr[-3000:]}")
        return self.stdout


class Kafka:
    """Runs Kafka's Java programs from the pinned release."""

    def __init__(self, java: str, classpath: str) -> None:
        self.java = java
        self.classpath = classpath

    def command(self, main: str, *args: object) -> list[str]:
        return [self.java, *JVM_OPTIONS, "-cp", self.classpath, main, *map(str, args)]

    def run(self, main: str, *args: object, stdin: str | None = None,
            timeout: float = RUN_TIMEOUT_S) -> Run:
        command = self.command(main, *args)
        done = subprocess.run(command, input=stdin, capture_output=True, text=True,
                              errors="replace", timeout=timeout, check=False)
        return Run(command, done.returncode, done.stdout, done.stderr)

    def tool(self, script: str, *args: object, stdin: str | None = None,
             timeout: float = RUN_TIMEOUT_S) -> Run:
        """One of Kafka's tools by its script's name (``kafka-topics``)."""
        return self.run(TOOLS[script], *args, stdin=stdin, timeout=timeout)

    def clients(self, scenario: str, *args: object, timeout: float = RUN_TIMEOUT_S) -> Run:
        """A scenario of the Java client driver (src/main/java/samsa/reference/Clients.java)."""
        return self.run(CLIENTS, scenario, *args, timeout=timeout)

    def popen(self, main: str, *args: object) -> subprocess.Popen[str]:
        return subprocess.Popen(self.command(main, *args), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace")


def build() -> str:
    """The classpath, after ``make`` brought the build up to date."""
    return built.classpath(CLASSPATH, "Kafka's Java client and tools (make reference)")


@pytest.fixture(scope="session")
def kafka() -> Kafka:
    java = shutil.which("java")
    assert java is not None, "a Java runtime is needed (make apt installs one)"
    return Kafka(java, build())
