"""AVRO: parsed by the Apache Avro package, checked by its reader/writer compatibility checker
(Avro's schema resolution rules)."""

from __future__ import annotations

import json

import avro.errors
import avro.name
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from samsa.registry.parsed import ParsedSchema, ResolvedReference, SchemaInvalid

SCHEMA_TYPE = "AVRO"


class AvroSchema:
    schema_type = SCHEMA_TYPE

    def __init__(self, text: str, references: list[ResolvedReference]) -> None:
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise SchemaInvalid(f"not JSON: {exc}") from exc
        names = avro.name.Names()
        try:
            # referenced named types first, into the same namespace of names
            for ref in references:
                avro.schema.make_avsc_object(json.loads(ref.schema), names)
            self.schema = avro.schema.make_avsc_object(document, names)
        except (avro.errors.AvroException, ValueError, TypeError, KeyError,
                AttributeError) as exc:
            raise SchemaInvalid(str(exc) or type(exc).__name__) from exc
        # compact JSON of the text as written (field order kept, as a registry answers it)
        self._canonical = json.dumps(document, separators=(",", ":"))

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
