"""The coordinators' state machines are tables: for each state, the states it may be entered
from (Kafka's ``validPreviousStates``). A move the table does not allow is a bug in the
coordinator, raised as ``IllegalStateTransition`` rather than acted on."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import TypeVar

S = TypeVar("S", bound=Enum)


class IllegalStateTransition(RuntimeError):
    pass


def check_transition(what: str, table: Mapping[S, frozenset[S]], old: S, new: S) -> None:
    if old not in table[new]:
        raise IllegalStateTransition(
            f"{what}: {old.name} -> {new.name} is not allowed (only from "
            f"{', '.join(sorted(s.name for s in table[new]))})")
