"""The pipeline's Avro schemas in a schema registry (Confluent's REST API, confluent-kafka's
``SchemaRegistryClient``).

Subjects follow Confluent's RecordNameStrategy (the record's full name): a topic keeps its
subject when the mirror renames it ``live1.page_views``, and every cluster's frontends share one
subject per record. The activity subject is BACKWARD compatible, so the version that adds a
field with a default (``events.ACTIVITY_SCHEMA_V2``) registers as version 2 mid-run.

The load job resolves schemas on its driver: :func:`registered_schemas` asks the registry once
for each schema id of the pipeline's subjects and hands the parsed writer schemas to the tasks.
"""

from __future__ import annotations

import json
from typing import Any

from fastavro import parse_schema

from samsa.pipeline.events import ACTIVITY_SCHEMA, MONITORING_SCHEMA

ACTIVITY_SUBJECT = f"{ACTIVITY_SCHEMA['namespace']}.{ACTIVITY_SCHEMA['name']}"
MONITORING_SUBJECT = f"{MONITORING_SCHEMA['namespace']}.{MONITORING_SCHEMA['name']}"
SUBJECTS = (ACTIVITY_SUBJECT, MONITORING_SUBJECT)


class RegistryClientError(RuntimeError):
    """The schema registry refused a schema or did not answer."""


def _client(url: str) -> Any:
    from confluent_kafka.schema_registry import SchemaRegistryClient

    return SchemaRegistryClient({"url": url})


def register(url: str, subject: str, schema: dict[str, Any],
             compatibility: str | None = None) -> int:
    """Register ``schema`` under ``subject`` (setting its compatibility level first, when
    given) and return its id; registering the same schema again returns the same id."""
    from confluent_kafka.schema_registry import Schema
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    client = _client(url)
    try:
        if compatibility is not None:
            client.set_compatibility(subject, compatibility)
        return int(client.register_schema(subject, Schema(json.dumps(schema), "AVRO")))
    except SchemaRegistryError as exc:
        raise RegistryClientError(f"schema registry {url}, subject {subject}: {exc}") from exc


def registered_schemas(url: str, subjects: tuple[str, ...] = SUBJECTS) -> dict[int, Any]:
    """Every version's schema of ``subjects``, parsed, by schema id: one lookup per id."""
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    client = _client(url)
    found: dict[int, Any] = {}
    try:
        present = set(client.get_subjects())
        for subject in subjects:
            if subject not in present:
                continue
            for version in client.get_versions(subject):
                schema_id = int(client.get_version(subject, version).schema_id)
                if schema_id not in found:
                    text = client.get_schema(schema_id).schema_str
                    found[schema_id] = parse_schema(json.loads(text))
    except SchemaRegistryError as exc:
        raise RegistryClientError(f"schema registry {url}: {exc}") from exc
    if not found:
        raise RegistryClientError(f"schema registry {url} has none of the subjects "
                                  f"{', '.join(subjects)}: run the frontends first")
    return found
