"""The confluent-kafka clients of a mirror, built from mm2.properties."""

from __future__ import annotations

import logging
import re
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from samsa.mirror.config import MirrorMakerConfig
from samsa.tools.common import client_config

log = logging.getLogger(__name__)

# Java client configs librdkafka has no name for; dropped (with a warning) so that an existing
# mm2.properties still starts. sasl.jaas.config's username and password are carried over.
JAVA_ONLY = {"max.poll.records", "key.serializer", "value.serializer", "key.deserializer",
             "value.deserializer", "buffer.memory", "max.block.ms", "default.api.timeout.ms",
             "sasl.jaas.config", "ssl.truststore.location", "ssl.truststore.password",
             "ssl.truststore.type", "ssl.keystore.location", "ssl.keystore.password",
             "ssl.keystore.type", "interceptor.classes", "partitioner.class"}
_JAAS_OPTION = re.compile(r'(username|password)\s*=\s*"([^"]*)"')


def _librdkafka_names(config: dict[str, Any]) -> dict[str, Any]:
    jaas = config.get("sasl.jaas.config")
    if isinstance(jaas, str):
        for name, value in _JAAS_OPTION.findall(jaas):
            config.setdefault(f"sasl.{name}", value)
    for key in sorted(JAVA_ONLY & set(config)):
        if key != "sasl.jaas.config":
            log.warning("%s is a Java client config librdkafka does not have; ignored", key)
        del config[key]
    return config


def config_for(config: MirrorMakerConfig, alias: str, kind: str, client_id: str,
               extra: dict[str, Any] | None = None) -> dict[str, Any]:
    own = _librdkafka_names(config.client_config(alias, kind))
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
