"""The registry's operations on its state: what the REST API's resources call. Reads answer
from the state this instance has read; writes (on the primary) check, then append records to
the store and return once they are read back.

Each method returns the JSON-ready answer or raises ``RegistryError`` with Confluent's code.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import Any

from samsa.registry import errors, records
from samsa.registry.compatibility import DEFAULT_LEVEL, LEVELS, incompatibilities, valid_level
from samsa.registry.errors import RegistryError
from samsa.registry.parsed import ParsedSchema, Reference, ResolvedReference, SchemaInvalid
from samsa.registry.protobuf_schema import ProtobufSchema
from samsa.registry.schema_types import DEFAULT_TYPE, SCHEMA_TYPES, parse_schema
from samsa.registry.state import RegistryState, SchemaKey, SchemaVersion
from samsa.registry.store import KafkaStore

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_MODE = "READWRITE"
_MAX_VERSION = 2**31 - 1
# a reference chain longer than this is a cycle
_MAX_REFERENCE_DEPTH = 32


def parse_version(text: str) -> int | None:
    """A version in a path: a number in [1, 2^31-1], or latest / -1 (None); else 42202."""
    if text == "latest" or text == "-1":
        return None
    try:
        version = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if not 1 <= version <= _MAX_VERSION:
        raise errors.invalid_version(text)
    return version


class Registry:
    def __init__(self, store: KafkaStore, default_level: str = DEFAULT_LEVEL) -> None:
        self.store = store
        self.default_level = default_level.upper()
        self._write_lock = threading.Lock()
        self._parse = functools.lru_cache(maxsize=4096)(self._parse_key)

    @property
    def state(self) -> RegistryState:
        return self.store.state

    # --- schemas --------------------------------------------------------------------------

    def _resolve(self, references: tuple[Reference, ...], depth: int = 0
                 ) -> list[ResolvedReference]:
        """The referenced schemas' texts, each one's own references before it."""
        if depth > _MAX_REFERENCE_DEPTH:
            raise errors.invalid_schema("schema references are nested too deeply (a cycle?)")
        resolved: list[ResolvedReference] = []
        for ref in references:
            found = self.state.subjects.get(ref.subject, {}).get(ref.version)
            if found is None:
                raise errors.invalid_schema(
                    f"reference {ref.name} to subject {ref.subject} version {ref.version} "
                    "not found")
            resolved += self._resolve(found.key.references, depth + 1)
            resolved.append(ResolvedReference(ref.name, found.key.schema_type, found.key.schema))
        return resolved

    def _parse_key(self, key: SchemaKey) -> ParsedSchema:
        try:
            return parse_schema(key.schema_type, key.schema, self._resolve(key.references))
        except SchemaInvalid as exc:
            raise errors.invalid_schema(str(exc)) from exc

    def _request_schema(self, body: Mapping[str, Any]) -> tuple[SchemaKey, ParsedSchema]:
        """The schema of a request body ({"schema", "schemaType", "references"}), parsed."""
        if not isinstance(body, Mapping):
            raise errors.invalid_schema("the request body is not a JSON object")
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise RegistryError(errors.INVALID_SCHEMA, "Empty schema")
        schema_type = body.get("schemaType") or DEFAULT_TYPE
        if not isinstance(schema_type, str) or schema_type.upper() not in SCHEMA_TYPES:
            raise RegistryError(errors.INVALID_SCHEMA, f"Invalid schema type {schema_type}")
        try:
            refs = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                         for r in body.get("references") or [])
        except (KeyError, TypeError, ValueError) as exc:
            raise errors.invalid_schema(f"malformed references: {exc}") from exc
        with self.store.lock:
            parsed = self._parse(SchemaKey(schema_type.upper(), text, refs))
        return SchemaKey(parsed.schema_type, parsed.canonical, refs), parsed

    def _versions(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        return self.state.versions(subject, deleted)

    def _find_version(self, subject: str, version_text: str, deleted: bool) -> SchemaVersion:
        version = parse_version(version_text)
        all_versions = self._versions(subject, deleted=True)
        if not all_versions:
            raise errors.subject_not_found(subject)
        if not deleted and not self._versions(subject):
            raise errors.subject_not_found(subject)
        if version is None:
            live = self._versions(subject, deleted)
            if not live:
                raise errors.version_not_found(subject, -1)
            return live[-1]
        for found in all_versions:
            if found.version == version and (deleted or not found.deleted):
                return found
        raise errors.version_not_found(subject, version)

    def _answer(self, found: SchemaVersion, fmt: str | None = None) -> dict[str, Any]:
        answer: dict[str, Any] = {"subject": found.subject, "version": found.version,
                                  "id": found.id}
        answer.update(self._schema_fields(found.key, fmt))
        return answer

    def _schema_fields(self, key: SchemaKey, fmt: str | None) -> dict[str, Any]:
        """schemaType (where not AVRO), references, and the schema, in ``fmt``: ``serialized``
        gives a Protobuf schema as a base64 FileDescriptorProto (confluent-kafka's
        ProtobufDeserializer asks for it); other formats are the stored text."""
        fields: dict[str, Any] = {}
        if key.schema_type != DEFAULT_TYPE:
            fields["schemaType"] = key.schema_type
        if key.references:
            fields["references"] = [r.to_json() for r in key.references]
        fields["schema"] = key.schema
        if fmt == "serialized" and key.schema_type == "PROTOBUF":
            parsed = self._parse(key)
            assert isinstance(parsed, ProtobufSchema)
            fields["schema"] = parsed.serialized("default.proto")
        return fields

    # --- reads ----------------------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        with self.store.lock:
            return [s for s in self.state.subject_names(deleted) if s.startswith(prefix)]

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        with self.store.lock:
            found = self._versions(subject, deleted)
        if not found:
            raise errors.subject_not_found(subject)
        return [v.version for v in found]

    def version(self, subject: str, version: str, deleted: bool = False,
                fmt: str | None = None) -> dict[str, Any]:
        with self.store.lock:
            return self._answer(self._find_version(subject, version, deleted), fmt)

    def referenced_by(self, subject: str, version: str) -> list[int]:
        with self.store.lock:
            found = self._find_version(subject, version, deleted=True)
            return self._referrers(found)

    def _referrers(self, found: SchemaVersion) -> list[int]:
        return sorted({v.id for name in self.state.subjects
                       for v in self._versions(name)
                       for r in v.key.references
                       if r.subject == found.subject and r.version == found.version})

    def schema_by_id(self, schema_id: int, subject: str | None = None,
                     fmt: str | None = None) -> dict[str, Any]:
        with self.store.lock:
            key: SchemaKey | None = self.state.schemas.get(schema_id)
            if key is None or subject is not None and not any(
                    s == subject for s, _ in self.state.holders.get(schema_id, ())):
                raise errors.schema_not_found(schema_id)
            return self._schema_fields(key, fmt)

    def id_versions(self, schema_id: int, deleted: bool = False) -> list[dict[str, Any]]:
        with self.store.lock:
            if schema_id not in self.state.schemas:
                raise errors.schema_not_found(schema_id)
            found = sorted(self.state.holders.get(schema_id, ()))
            return [{"subject": s, "version": v} for s, v in found
                    if deleted or not self.state.subjects[s][v].deleted]

    def id_subjects(self, schema_id: int, deleted: bool = False) -> list[str]:
        return sorted({h["subject"] for h in self.id_versions(schema_id, deleted)})

    def lookup(self, subject: str, body: Mapping[str, Any], deleted: bool = False
               ) -> dict[str, Any]:
        """``POST /subjects/{subject}``: the version of ``subject`` holding this schema."""
        with self.store.lock:
            if not self._versions(subject, deleted=True):
                raise errors.subject_not_found(subject)
        key, _ = self._request_schema(body)
        with self.store.lock:
            for found in reversed(self._versions(subject, deleted)):
                if found.key == key:
                    return self._answer(found)
        raise errors.schema_not_found()

    def config(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        with self.store.lock:
            level = self.state.configs.get(subject)
            if level is None and subject is not None:
                if not default_to_global:
                    raise RegistryError(
                        errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                        f"Subject '{subject}' does not have subject-level compatibility "
                        "configured")
                level = self.state.configs.get(None)
        return {"compatibilityLevel": level or self.default_level}

    def mode(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        with self.store.lock:
            mode = self.state.modes.get(subject)
            if mode is None and subject is not None:
                if not default_to_global:
                    raise RegistryError(errors.SUBJECT_MODE_NOT_CONFIGURED,
                                        f"Subject '{subject}' does not have subject-level "
                                        "mode configured")
                mode = self.state.modes.get(None)
        return {"mode": mode or DEFAULT_MODE}

    def _level(self, subject: str | None) -> str:
        return self.state.configs.get(subject) or self.state.configs.get(None) or (
            self.default_level)

    def _mode(self, subject: str) -> str:
        return self.state.modes.get(subject) or self.state.modes.get(None) or DEFAULT_MODE

    def check_compatibility(self, subject: str, version: str | None, body: Mapping[str, Any],
                            verbose: bool = False) -> dict[str, Any]:
        """``POST /compatibility/subjects/{subject}/versions[/{version}]``."""
        number = parse_version(version) if version is not None else None
        _, parsed = self._request_schema(body)
        with self.store.lock:
            live = self._versions(subject)
            level = self._level(subject)
            if not live:
                if version is None or number is None:
                    return _compatible([], verbose)
                raise errors.subject_not_found(subject)
            if version is None:
                against = live
            elif number is None:
                against = live[-1:]
                level = level.removesuffix("_TRANSITIVE")
            else:
                against = [v for v in live if v.version == number]
                if not against:
                    raise errors.version_not_found(subject, number)
                level = level.removesuffix("_TRANSITIVE")
            previous = [self._parse(v.key) for v in against]
        return _compatible(incompatibilities(level, parsed, previous), verbose)

    # --- writes (on the primary) ----------------------------------------------------------

    def register(self, subject: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """``POST /subjects/{subject}/versions``: {"id": ...} of the schema in ``subject``."""
        _check_subject(subject)
        key, parsed = self._request_schema(body)
        wanted_id = body.get("id")
        wanted_version = body.get("version")
        with self._write_lock:
            with self.store.lock:
                self._check_writable(subject)
                importing = self._mode(subject) == "IMPORT"
                if wanted_id is not None and wanted_id != -1 and not importing:
                    raise errors.not_permitted(f"Subject {subject} is not in import mode")
                every = self._versions(subject, deleted=True)
                live = [v for v in every if not v.deleted]
                for found in live:
                    if found.key == key and (wanted_id in (None, -1, found.id)):
                        return {"id": found.id}
                if not importing:
                    level = self._level(subject)
                    previous = [self._parse(v.key) for v in live]
                    problems = incompatibilities(level, parsed, previous)
                    if problems:
                        raise RegistryError(
                            errors.INCOMPATIBLE_SCHEMA,
                            "Schema being registered is incompatible with an earlier schema "
                            f"for subject \"{subject}\", details: [{', '.join(problems)}]")
                schema_id = self._new_id(key, wanted_id if importing else None)
                if importing and isinstance(wanted_version, int) and wanted_version > 0:
                    version = wanted_version
                    if any(v.version == version for v in every):
                        raise errors.not_permitted(
                            f"Version {version} of subject {subject} already exists")
                else:
                    version = max((v.version for v in every), default=0) + 1
            self.store.write([(
                records.schema_key(subject, version),
                records.schema_value(subject, version, schema_id, key.schema_type, key.schema,
                                     [r.to_json() for r in key.references], False),
            )])
        return {"id": schema_id}

    def _new_id(self, key: SchemaKey, wanted: Any) -> int:
        existing: int | None = self.state.ids.get(key)
        if isinstance(wanted, int) and wanted >= 0:
            holder = self.state.schemas.get(wanted)
            if holder is not None and holder != key:
                raise errors.not_permitted(
                    f"Overwrite new schema with id {wanted} is not permitted.")
            return wanted
        if existing is not None:
            return existing
        return int(self.state.max_id) + 1

    def _check_writable(self, subject: str) -> None:
        if self._mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.not_permitted(f"Subject {subject} is in read-only mode")

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        with self._write_lock:
            with self.store.lock:
                self._check_writable(subject)
                every = self._versions(subject, deleted=True)
                if not every:
                    raise errors.subject_not_found(subject)
                live = [v for v in every if not v.deleted]
                if not permanent:
                    if not live:
                        raise RegistryError(errors.SUBJECT_SOFT_DELETED,
                                            f"Subject '{subject}' was soft deleted.Set "
                                            "permanent=true to delete permanently")
                    self._check_unreferenced(live)
                    entries: list[tuple[bytes, bytes | None]] = [(
                        records.delete_subject_key(subject),
                        records.delete_subject_value(subject, every[-1].version))]
                    answer = [v.version for v in live]
                else:
                    if live:
                        raise RegistryError(errors.SUBJECT_NOT_SOFT_DELETED,
                                            f"Subject '{subject}' was not deleted first before "
                                            "being permanently deleted")
                    entries = [(records.schema_key(subject, v.version), None) for v in every]
                    entries.append((records.delete_subject_key(subject), None))
                    if subject in self.state.configs:
                        entries.append((records.config_key(subject), None))
                    if subject in self.state.modes:
                        entries.append((records.mode_key(subject), None))
                    answer = [v.version for v in every]
            self.store.write(entries)
        return answer

    def delete_version(self, subject: str, version_text: str, permanent: bool = False) -> int:
        with self._write_lock:
            with self.store.lock:
                self._check_writable(subject)
                specific = parse_version(version_text) is not None
                found = self._find_version(subject, version_text, permanent or specific)
                if not permanent:
                    if found.deleted:
                        raise RegistryError(errors.SCHEMA_VERSION_SOFT_DELETED,
                                            f"Subject '{subject}' Version {found.version} was "
                                            "soft deleted.Set permanent=true to delete "
                                            "permanently")
                    self._check_unreferenced([found])
                    entry: tuple[bytes, bytes | None] = (
                        records.schema_key(subject, found.version), records.schema_value(
                        subject, found.version, found.id, found.key.schema_type,
                        found.key.schema, [r.to_json() for r in found.key.references], True))
                elif not found.deleted:
                    raise RegistryError(errors.SCHEMA_VERSION_NOT_SOFT_DELETED,
                                        f"Subject '{subject}' Version {found.version} was not "
                                        "deleted first before being permanently deleted")
                else:
                    entry = (records.schema_key(subject, found.version), None)
            self.store.write([entry])
        return found.version

    def _check_unreferenced(self, versions: list[SchemaVersion]) -> None:
        for found in versions:
            if self._referrers(found):
                raise RegistryError(errors.REFERENCE_EXISTS,
                                    f"One or more references exist to the schema "
                                    f"{{subject={found.subject},version={found.version}}}.")

    def set_config(self, subject: str | None, body: Mapping[str, Any]) -> dict[str, Any]:
        level = body.get("compatibility") if isinstance(body, Mapping) else None
        if not valid_level(level):
            raise RegistryError(
                errors.INVALID_COMPATIBILITY_LEVEL,
                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                "backward_transitive, forward_transitive, and full_transitive")
        assert isinstance(level, str)
        level = level.upper()
        if subject is not None:
            _check_subject(subject)
        with self._write_lock:
            self.store.write([(records.config_key(subject), records.config_value(level))])
        return {"compatibility": level}

    def delete_config(self, subject: str | None) -> dict[str, Any]:
        with self._write_lock:
            with self.store.lock:
                if subject is not None and subject not in self.state.configs and not (
                        self._versions(subject, deleted=True)):
                    raise errors.subject_not_found(subject)
                old = self._level(subject)
            self.store.write([(records.config_key(subject), None)])
        return {"compatibilityLevel": old}

    def set_mode(self, subject: str | None, body: Mapping[str, Any], force: bool = False
                 ) -> dict[str, Any]:
        mode = body.get("mode") if isinstance(body, Mapping) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise RegistryError(errors.INVALID_MODE, "Invalid mode. Valid values are "
                                "READWRITE, READONLY, READONLY_OVERRIDE, and IMPORT.")
        mode = mode.upper()
        if subject is not None:
            _check_subject(subject)
        with self._write_lock:
            with self.store.lock:
                if mode == "IMPORT" and not force:
                    held = self._versions(subject, deleted=True) if subject is not None else (
                        self.state.subjects)
                    if held:
                        raise errors.not_permitted(
                            "Cannot import since found existing subjects")
            self.store.write([(records.mode_key(subject), records.mode_value(mode))])
        return {"mode": mode}

    def delete_mode(self, subject: str) -> dict[str, Any]:
        with self._write_lock:
            with self.store.lock:
                if subject not in self.state.modes and not self._versions(subject, True):
                    raise errors.subject_not_found(subject)
                old = self._mode(subject)
            self.store.write([(records.mode_key(subject), None)])
        return {"mode": old}


def _compatible(problems: list[str], verbose: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {"is_compatible": not problems}
    if verbose:
        answer["messages"] = problems
    return answer


def _check_subject(subject: str) -> None:
    if not subject.strip() or any(ord(c) < 0x20 for c in subject):
        raise RegistryError(errors.INVALID_SUBJECT, f"Invalid subject {subject!r}")


__all__ = ["LEVELS", "MODES", "Registry", "parse_version"]
