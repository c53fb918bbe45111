"""What every schema type gives the registry: a parsed schema, its canonical text (what is
stored, compared and answered) and the reasons a reader cannot read a writer's data."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Reference:
    """A schema reference as registered: ``name`` (how the referring schema names it: an
    Avro full name, a JSON Schema $ref URL, a .proto import path), and the referenced
    subject's version."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class ResolvedReference:
    """A reference with its schema's text, ready for a parser (dependencies first)."""

    name: str
    schema_type: str
    schema: str


class SchemaInvalid(ValueError):
    """The text does not parse as a schema of its type (the registry's 42201)."""


def parse_json(text: str, problem: str = "not JSON") -> Any:
    """``text`` as JSON (an Avro or JSON Schema document); else SchemaInvalid(``problem: why``)."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise SchemaInvalid(f"{problem}: {exc}") from exc


def compact_json(document: Any) -> str:
    """A JSON document's canonical text: compact, its fields in the order written (as a
    registry answers it)."""
    return json.dumps(document, separators=(",", ":"))


class ParsedSchema(Protocol):
    schema_type: str

    @property
    def canonical(self) -> str:
        """The text the registry stores and answers for this schema."""
        ...

    def read_incompatibilities(self, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with this schema ([] if it can)."""
        ...
