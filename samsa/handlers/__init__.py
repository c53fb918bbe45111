"""Request handlers, one module per API family; importing a module registers its APIs."""

from __future__ import annotations

import importlib

_MODULES = (
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "offsets",
    "topics",
    "configs",
    "log_dirs",
    "groups",
    "consumer_groups",
    "transactions",
    "cluster_admin",
    "acls",
    "sasl",
    "client_quotas",
)


def load_handlers() -> None:
    for name in _MODULES:
        importlib.import_module(f"samsa.handlers.{name}")
