"""Compatibility levels (Confluent's names) and the check of a new schema against a subject's
earlier versions.

BACKWARD: the new schema reads data written with the latest version; FORWARD: the latest
version reads data written with the new schema; FULL: both. The _TRANSITIVE forms check
against every earlier (not deleted) version instead of the latest only; NONE checks nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from samsa.registry.parsed import ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


def valid_level(level: object) -> bool:
    return isinstance(level, str) and level.upper() in LEVELS


def incompatibilities(level: str, new: ParsedSchema,
                      previous: Sequence[ParsedSchema]) -> list[str]:
    """Why ``new`` may not follow ``previous`` (oldest first) at ``level`` ([] when it may)."""
    level = level.upper()
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    found: list[str] = []
    for old in reversed(against):
        if old.schema_type != new.schema_type:
            found.append(f"{{errorType:'TYPE_CHANGED', description:'the schema type changed "
                         f"from {old.schema_type} to {new.schema_type}'}}")
            continue
        if base in ("BACKWARD", "FULL"):
            found += new.read_incompatibilities(old)
        if base in ("FORWARD", "FULL"):
            found += old.read_incompatibilities(new)
    return found
