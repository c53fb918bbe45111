"""What a quiet pipeline session keeps of its JVM's and Python workers' stderr."""

from __future__ import annotations

from samsa.pipeline.session import StderrNoiseFilter

DAEMON_TEARDOWN = (
    b"Traceback (most recent call last):\n"
    b'  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/'
    b'daemon.py", line 264, in manager\n'
    b'  File "/venv/lib/python3.11/site-packages/pyspark/python/lib/pyspark.zip/pyspark/'
    b'daemon.py", line 95, in worker\n'
    b"BrokenPipeError: [Errno 32] Broken pipe\n"
)
OTHER_TRACEBACK = (
    b"Traceback (most recent call last):\n"
    b'  File "/job.py", line 3, in <module>\n'
    b"ValueError: a real failure\n"
)


def filtered(*chunks: bytes) -> bytes:
    noise = StderrNoiseFilter()
    return b"".join(noise.feed(c) for c in chunks) + noise.close()


def test_the_worker_daemons_broken_pipe_at_teardown_is_dropped() -> None:
    assert filtered(b"before\n", DAEMON_TEARDOWN, b"after\n") == b"before\nafter\n"


def test_the_traceback_is_dropped_whatever_the_pipe_split_it_into() -> None:
    stream = b"a\n" + DAEMON_TEARDOWN + b"b\n"
    for size in (1, 7, 64):
        chunks = [stream[i:i + size] for i in range(0, len(stream), size)]
        assert filtered(*chunks) == b"a\nb\n"


def test_any_other_traceback_is_kept_whole() -> None:
    assert filtered(OTHER_TRACEBACK) == OTHER_TRACEBACK
    assert filtered(DAEMON_TEARDOWN.replace(b"BrokenPipeError", b"MemoryError")) == (
        DAEMON_TEARDOWN.replace(b"BrokenPipeError", b"MemoryError"))


def test_an_unfinished_traceback_and_a_partial_line_come_out_at_the_end() -> None:
    assert filtered(b"Traceback (most recent call last):\n  File x\n") == (
        b"Traceback (most recent call last):\n  File x\n")
    assert filtered(b"no newline") == b"no newline"


def test_the_jvm_start_up_lines_are_dropped_and_the_progress_bar_kept() -> None:
    out = filtered(b"Using Spark's default log4j profile: x\n",
                   b"[Stage 0:>   (0 + 1) / 1]\r", b"[Stage 0:=> (1 + 0) / 1]\r\n")
    assert out == b"[Stage 0:>   (0 + 1) / 1]\r[Stage 0:=> (1 + 0) / 1]\r\n"
