"""The local SparkSession the pipeline's jobs run in, with ``format("samsa")`` registered."""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# What the JVM prints on stderr at every start of a local session, which a command's user
# has no use for (and which would break the commands' one-line errors).
_JVM_START_NOISE = re.compile(
    rb"WARNING: Using incubator modules|Using Spark's default log4j profile|"
    rb"Setting default log level to|To adjust logging level use|WARN NativeCodeLoader:|"
    rb"WARN Utils: (?:Your hostname|Set SPARK_LOCAL_IP)"
)
# A PySpark worker daemon's traceback when the JVM it serves has gone (see StderrNoiseFilter).
_WORKER_TEARDOWN = re.compile(
    rb"pyspark[/\\]daemon\.py.*\n(?:BrokenPipeError|ConnectionResetError|EOFError)[^\n]*\n?\Z", re.S
)


def spark_session(
    master: str = "local[*]",
    app: str = "samsa-pipeline",
    progress: bool = False,
    quiet: bool = False,
    jars: Sequence[str] = (),
) -> SparkSession:
    """A SparkSession (Spark's UI off, UTC, loopback) that can read and write samsa topics.

    ``progress`` turns on Spark's console progress bar for the stages of long jobs; ``quiet``
    keeps the JVM's start-up lines and Spark's log off stderr (the progress bar still shows).
    ``jars`` go on the JVM's classpath (``spark.jars``): Spark's own Kafka connector, say.
    """
    from pyspark.sql import SparkSession

    import samsa.spark

    # Python workers must run this interpreter: the one with samsa, fastavro and confluent-kafka.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver and tasks stay on loopback
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "true" if progress else "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if quiet and SparkSession.getActiveSession() is None:
        session = _with_filtered_child_stderr(builder.getOrCreate)
    else:
        session = builder.getOrCreate()
    # quiet: a failed job's error reaches the command as an exception, told in one line;
    # Spark's own log of it (a task's whole traceback) would only bury that line
    session.sparkContext.setLogLevel("OFF" if quiet else "ERROR")
    samsa.spark.register(session)
    return session


def _with_filtered_child_stderr(start: object) -> SparkSession:
    """Run ``start`` (which launches the JVM) with stderr, as the JVM inherits it, a pipe whose
    reader forwards everything to the real stderr except the start-up noise."""
    read_end, write_end = os.pipe()
    saved = os.dup(2)
    sys.stderr.flush()
    os.dup2(write_end, 2)
    try:
        session = start()  # type: ignore[operator]
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(write_end)
    threading.Thread(
        target=_forward, args=(read_end, saved), name="jvm-stderr", daemon=True
    ).start()
    return session


def _forward(read_end: int, out: int) -> None:
    noise = StderrNoiseFilter()
    while chunk := os.read(read_end, 65536):
        if kept := noise.feed(chunk):
            os.write(out, kept)
    if kept := noise.close():
        os.write(out, kept)
    os.close(read_end)


class StderrNoiseFilter:
    """What the JVM and its Python workers write on stderr, less what a user has no use for:
    the start-up lines, and the traceback a PySpark worker daemon prints when the JVM closes
    its socket as a failed job's session stops (``BrokenPipeError`` in ``pyspark/daemon.py``),
    which would come before, and bury, the command's one-line error.

    Lines end with ``\\n``; the progress bar redraws itself with ``\\r``. A traceback is held
    until its last line (the first that is not indented) and dropped only if it is that one.
    """

    def __init__(self) -> None:
        self._pending = b""
        self._traceback: list[bytes] = []

    def feed(self, chunk: bytes) -> bytes:
        self._pending += chunk
        *pieces, self._pending = re.split(rb"(?<=[\r\n])", self._pending)
        return b"".join(self._line(p) for p in pieces)

    def close(self) -> bytes:
        """What is left at the end of the stream: a partial line, an unfinished traceback."""
        rest = b"".join(self._traceback) + self._pending
        self._traceback, self._pending = [], b""
        return b"" if _JVM_START_NOISE.search(rest) else rest

    def _line(self, line: bytes) -> bytes:
        if self._traceback:
            self._traceback.append(line)
            if line[:1] in (b" ", b"\t"):
                return b""
            block, self._traceback = b"".join(self._traceback), []
            return b"" if _WORKER_TEARDOWN.search(block) else block
        if line.startswith(b"Traceback (most recent call last):"):
            self._traceback = [line]
            return b""
        return b"" if _JVM_START_NOISE.search(line) else line
