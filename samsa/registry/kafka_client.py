"""The registry's confluent-kafka clients' settings: librdkafka's log lines go to the
``samsa.registry.librdkafka`` logger, not to stderr, and are dropped unless ``SAMSA_CLIENT_LOG``
names a level to show them from (as the samsa command's tools do)."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

CLIENT_LOG_ENV = "SAMSA_CLIENT_LOG"
CLIENT_LOGGER = logging.getLogger("samsa.registry.librdkafka")
CLIENT_LOGGER.addHandler(logging.NullHandler())
# the env var's values -> librdkafka's log_level (syslog's levels); 0 (emergency): nothing
_LOG_LEVELS = {"debug": 7, "info": 6, "warning": 4, "error": 3}


def client_config(bootstrap: str, client_id: str,
                  extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    level = _LOG_LEVELS.get(os.environ.get(CLIENT_LOG_ENV, "").strip().lower(), 0)
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "client.id": client_id,
        "logger": CLIENT_LOGGER,
        "log_level": level,
    }
    config.update(extra or {})
    return config
