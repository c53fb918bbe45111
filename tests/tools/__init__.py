"""Tests of the client tools (``samsa topics/configs/produce/consume``): the installed console
script run as a subprocess against an embedded broker."""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
import uuid
from pathlib import Path

_SCRIPT = Path(sys.executable).parent / "samsa"
# Every tool invocation is bounded; a hang fails the test instead of blocking the run.
RUN_TIMEOUT_S = 60


def samsa(
    *args: str | int | Path, stdin: bytes | str | None = None, timeout: float = RUN_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run the ``samsa`` console script; stdout and stderr as text (utf-8, replacement)."""
    command = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "samsa.cli"]
    data = stdin.encode() if isinstance(stdin, str) else stdin
    done = subprocess.run(
        [*command, *map(str, args)], input=data, capture_output=True, timeout=timeout,
        check=False,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """Assert the tool failed with exactly one ``samsa:`` line on stderr, and return it."""
    assert result.returncode != 0, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("samsa: "), result.stderr
    return lines[0]


def ok(result: subprocess.CompletedProcess[str]) -> str:
    """Assert success; the stdout."""
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result.stdout


def free_port() -> int:
    """A loopback port with nothing listening on it (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def kafka_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")
