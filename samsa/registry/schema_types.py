"""The schema types the registry serves (``GET /schemas/types``) and their parsers."""

from __future__ import annotations

from collections.abc import Callable

from samsa.registry.avro_schema import AvroSchema
from samsa.registry.json_schema import JsonSchema
from samsa.registry.parsed import ParsedSchema, ResolvedReference, SchemaInvalid
from samsa.registry.protobuf_schema import ProtobufSchema

_PARSERS: dict[str, Callable[[str, list[ResolvedReference]], ParsedSchema]] = {
    "AVRO": AvroSchema,
    "JSON": JsonSchema,
    "PROTOBUF": ProtobufSchema,
}
SCHEMA_TYPES = tuple(_PARSERS)
DEFAULT_TYPE = "AVRO"


def parse_schema(schema_type: str, text: str,
                 references: list[ResolvedReference] | None = None) -> ParsedSchema:
    """Parse ``text`` as a schema of ``schema_type``; SchemaInvalid if it is not one."""
    parser = _PARSERS.get(schema_type)
    if parser is None:
        raise SchemaInvalid(f"unknown schema type {schema_type!r} (one of "
                            f"{', '.join(SCHEMA_TYPES)})")
    if not isinstance(text, str) or not text.strip():
        raise SchemaInvalid("empty schema")
    return parser(text, references or [])
