"""AVRO: parsed by the Apache Avro package, checked by its reader/writer compatibility checker
(Avro's schema resolution rules)."""

from __future__ import annotations

import json

import avro.errors
import avro.name
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from samsa.registry.parsed import (
    ParsedSchema,
    ResolvedReference,
    SchemaInvalid,
    compact_json,
    parse_json,
)

SCHEMA_TYPE = "AVRO"


class AvroSchema:
    schema_type = SCHEMA_TYPE

    def __init__(self, text: str, references: list[ResolvedReference]) -> None:
        document = parse_json(text)
        names = avro.name.Names()
        try:
            # referenced named types first, into the same namespace of names
            for ref in references:
                avro.schema.make_avsc_object(json.loads(ref.schema), names)
            self.schema = avro.schema.make_avsc_object(document, names)
        except (avro.errors.AvroException, ValueError, TypeError, KeyError,
                AttributeError) as exc:
            raise SchemaInvalid(str(exc) or type(exc).__name__) from exc
        self._canonical = compact_json(document)

    @property
    def canonical(self) -> str:
        return self._canonical

    def read_incompatibilities(self, writer: ParsedSchema) -> list[str]:
        assert isinstance(writer, AvroSchema)
        result = ReaderWriterCompatibilityChecker().get_compatibility(self.schema, writer.schema)
        if result.compatibility is not SchemaCompatibilityType.incompatible:
            return []
        kinds = ", ".join(sorted({i.name.upper() for i in result.incompatibilities}))
        return [f"{{errorType:'{kinds}', description:'{message}', "
                f"additionalInfo:'{', '.join(sorted(result.locations))}'}}"
                for message in sorted(result.messages)]
