"""What the pages show and take: the Jinja filters (sizes, rates, times) and the parsing of
query parameters and form fields (a value the page cannot use is a ``BadRequest``)."""

from __future__ import annotations

import datetime as dt
import re

from samsa.console.model import BadRequest


def human_bytes(value: int | float | None) -> str:
    if value is None:
        return "–"
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def human_rate(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.1f}/s"


def human_count(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def timestamp_text(ms: int | None) -> str:
    if ms is None or ms < 0:
        return "–"
    moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}Z"


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 date/time (UTC when no zone is given)."""
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadRequest(f"timestamp takes milliseconds since the epoch or an ISO date/time "
                         f"(2026-01-31T12:00:00Z), got {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def parse_int(value: str | None, name: str, *, default: int | None = None,
              minimum: int | None = None) -> int | None:
    if value is None or not value.strip():
        return default
    try:
        number = int(value.strip())
    except ValueError as exc:
        raise BadRequest(f"{name} takes a whole number, got {value!r}") from exc
    if minimum is not None and number < minimum:
        raise BadRequest(f"{name} must be at least {minimum}, got {number}")
    return number


def parse_lines(text: str, name: str) -> list[tuple[str, str]]:
    """``key=value`` lines (blank lines and ``#`` comments ignored) -> pairs."""
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise BadRequest(f"{name} takes key=value lines, got {line!r}")
        pairs.append((key.strip(), value.strip()))
    return pairs


def header_text(value: bytes | None) -> str:
    if value is None:
        return "null"
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.hex(" ")
