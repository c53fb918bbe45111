"""The admin client the topics and configs tools share."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata

from samsa.tools.common import (
    METADATA_TIMEOUT_S,
    ToolError,
    check_reachable,
    client_config,
    describe_error,
    serve_client_log,
)

# Kafka's ConfigSource ids and names (confluent-kafka hands back the bare ids).
CONFIG_SOURCES = {
    0: "UNKNOWN", 1: "DYNAMIC_TOPIC_CONFIG", 2: "DYNAMIC_BROKER_CONFIG",
    3: "DYNAMIC_DEFAULT_BROKER_CONFIG", 4: "STATIC_BROKER_CONFIG", 5: "DEFAULT_CONFIG",
    6: "DYNAMIC_BROKER_LOGGER_CONFIG", 7: "CLIENT_METRICS_CONFIG", 8: "GROUP_CONFIG",
}


def source_id(source: Any) -> int:
    """A config entry's source as Kafka's id, whether given as an int or a ConfigSource."""
    return int(getattr(source, "value", source))


def source_name(source: Any) -> str:
    return CONFIG_SOURCES.get(source_id(source), "UNKNOWN")


def connect_admin(
    bootstrap: str, client_id: str, extra: Mapping[str, str] | None = None
) -> tuple[AdminClient, ClusterMetadata]:
    """An admin client and the cluster's metadata; one-line errors when unreachable."""
    config = client_config(bootstrap, client_id, extra)
    check_reachable(bootstrap)
    admin: AdminClient | None = None
    try:
        admin = AdminClient(config)
        metadata = admin.list_topics(timeout=METADATA_TIMEOUT_S)
    except KafkaException as exc:
        if admin is not None:
            serve_client_log(admin)
        raise ToolError(f"cannot get metadata from {bootstrap}: {describe_error(exc)}") from exc
    return admin, metadata


def results(futures: Mapping[Any, Future[Any]], timeout: float) -> tuple[dict[Any, Any], list[str]]:
    """Wait for every future; (results by key, one error text per failed key)."""
    done: dict[Any, Any] = {}
    errors: list[str] = []
    for key, future in futures.items():
        try:
            done[key] = future.result(timeout=timeout)
        except KafkaException as exc:
            errors.append(describe_error(exc))
        except TimeoutError:
            errors.append(f"REQUEST_TIMED_OUT: no answer within {timeout:g} s")
    return done, errors


def raise_errors(errors: list[str]) -> None:
    if errors:
        raise ToolError("; ".join(errors))
