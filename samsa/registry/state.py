"""The registry's state, as the ``_schemas`` topic's records build it: every instance that
reads the same records holds the same subjects, versions, ids, configs and modes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from samsa.registry import records
from samsa.registry.parsed import Reference


@dataclass(frozen=True)
class SchemaKey:
    """What makes two registrations the same schema (and so the same id)."""

    schema_type: str
    schema: str
    references: tuple[Reference, ...]


@dataclass(frozen=True)
class SchemaVersion:
    subject: str
    version: int
    id: int
    key: SchemaKey
    deleted: bool


class RegistryState:
    def __init__(self) -> None:
        self.subjects: dict[str, dict[int, SchemaVersion]] = {}
        # id -> the schema and the (subject, version)s that hold it (soft-deleted included)
        self.schemas: dict[int, SchemaKey] = {}
        self.holders: dict[int, set[tuple[str, int]]] = {}
        self.ids: dict[SchemaKey, int] = {}
        self.configs: dict[str | None, str] = {}
        self.modes: dict[str | None, str] = {}
        self.max_id = 0

    # --- applying records -----------------------------------------------------------------

    def apply(self, key_bytes: bytes | None, value_bytes: bytes | None) -> None:
        key = records.decode(key_bytes)
        if key is None:
            return
        value = records.decode(value_bytes)
        keytype = key.get("keytype")
        subject = key.get("subject")
        if keytype == records.SCHEMA and isinstance(subject, str):
            version = key.get("version")
            if isinstance(version, int):
                self._apply_schema(subject, version, value)
        elif keytype == records.CONFIG:
            self._apply_setting(self.configs, subject, value, "compatibilityLevel")
        elif keytype == records.MODE:
            self._apply_setting(self.modes, subject, value, "mode")
        elif keytype == records.DELETE_SUBJECT and value is not None and isinstance(
                subject, str):
            upto = value.get("version")
            for v, found in self.subjects.get(subject, {}).items():
                if isinstance(upto, int) and v <= upto:
                    self.subjects[subject][v] = replace(found, deleted=True)
        elif keytype == records.CLEAR_SUBJECT and value is not None and isinstance(
                subject, str):
            for v in [v for v, f in self.subjects.get(subject, {}).items() if f.deleted]:
                self._remove(subject, v)

    @staticmethod
    def _apply_setting(settings: dict[str | None, str], subject: Any,
                       value: dict[str, Any] | None, field: str) -> None:
        if subject is not None and not isinstance(subject, str):
            return
        if value is None or not isinstance(value.get(field), str):
            settings.pop(subject, None)
        else:
            settings[subject] = value[field]

    def _apply_schema(self, subject: str, version: int, value: dict[str, Any] | None) -> None:
        if value is None:
            self._remove(subject, version)
            return
        schema_id = value.get("id")
        text = value.get("schema")
        if not isinstance(schema_id, int) or not isinstance(text, str):
            return
        refs = tuple(Reference(r["name"], r["subject"], int(r["version"]))
                     for r in value.get("references") or [])
        key = SchemaKey(value.get("schemaType") or "AVRO", text, refs)
        self._remove(subject, version)
        self.subjects.setdefault(subject, {})[version] = SchemaVersion(
            subject, version, schema_id, key, bool(value.get("deleted", False)))
        self.schemas[schema_id] = key
        self.holders.setdefault(schema_id, set()).add((subject, version))
        self.ids.setdefault(key, schema_id)
        self.max_id = max(self.max_id, schema_id)

    def _remove(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject)
        if versions is None or version not in versions:
            return
        old = versions.pop(version)
        if not versions:
            del self.subjects[subject]
        holders = self.holders.get(old.id, set())
        holders.discard((subject, version))
        if not holders:
            self.holders.pop(old.id, None)
            self.schemas.pop(old.id, None)
            if self.ids.get(old.key) == old.id:
                del self.ids[old.key]

    # --- reading --------------------------------------------------------------------------

    def versions(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        """A subject's versions, oldest first (soft-deleted ones only with ``deleted``)."""
        found = self.subjects.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))
