"""The confluent-kafka clients of a mirror, built from mm2.properties."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from samsa.mirror.config import MirrorMakerConfig
from samsa.tools.common import client_config


def config_for(config: MirrorMakerConfig, alias: str, kind: str, client_id: str,
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
    own = config.client_config(alias, kind)
    bootstrap = own.pop("bootstrap.servers")
    own.setdefault("client.id", client_id)
    return client_config(bootstrap, own.pop("client.id"), {**(extra or {}), **own},
                         short_timeouts=False)


def admin(config: MirrorMakerConfig, alias: str, client_id: str) -> AdminClient:
    return AdminClient(config_for(config, alias, "admin", client_id))


def producer(config: MirrorMakerConfig, alias: str, client_id: str,
             extra: dict[str, Any] | None = None) -> Producer:
    base = {"enable.idempotence": True, "linger.ms": 5, "compression.type": "none"}
    return Producer(config_for(config, alias, "producer", client_id, {**base, **(extra or {})}))


def consumer(config: MirrorMakerConfig, alias: str, client_id: str,
             extra: dict[str, Any] | None = None) -> Consumer:
    base = {"enable.auto.commit": False, "auto.offset.reset": "earliest",
            "enable.auto.offset.store": False}
    return Consumer(config_for(config, alias, "consumer", client_id, {**base, **(extra or {})}))
