"""Raw DescribeClientQuotas / AlterClientQuotas frames for the quota tests."""

from __future__ import annotations

from typing import Any

from kafka_frames import FrameClient

DESCRIBE, ALTER = 48, 49
USER, CLIENT_ID = "user", "client-id"
Entity = list[tuple[str, str | None]]  # (entity type, name; None: the default)


def entity(*components: tuple[str, str | None]) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in components]


def op(key: str, value: float | None) -> dict[str, Any]:
    return {"key": key, "value": 0.0 if value is None else value, "remove": value is None}


def alter(client: FrameClient, entries: list[tuple[Entity, dict[str, float | None]]],
          validate_only: bool = False, version: int = 1) -> list[tuple[int, str | None, Entity]]:
    """(error code, message, entity as answered) of each entry."""
    response = client.request(ALTER, version, {
        "entries": [{"entity": entity(*e), "ops": [op(k, v) for k, v in ops.items()]}
                    for e, ops in entries],
        "validate_only": validate_only})
    return [(r.error_code, r.error_message, [(x.entity_type, x.entity_name) for x in r.entity])
            for r in response.entries]


def set_quotas(client: FrameClient, components: Entity, **quotas: float | None) -> None:
    ((code, message, _),) = alter(client, [(components, quotas)])
    assert code == 0, message


def describe(client: FrameClient, components: list[tuple[str, int, str | None]] = (),
             strict: bool = False, version: int = 1) -> Any:
    """The raw response (components: (entity type, match type, match))."""
    return client.request(DESCRIBE, version, {
        "components": [{"entity_type": t, "match_type": m, "match": n}
                       for t, m, n in components], "strict": strict})


def described(client: FrameClient, components: list[tuple[str, int, str | None]] = (),
              strict: bool = False) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    """Entity (sorted components) -> its quotas."""
    response = describe(client, components, strict)
    assert response.error_code == 0, response.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in response.entries}
