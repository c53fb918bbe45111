"""Kafka's connection quotas, decided when a connection is accepted (Kafka's
``ConnectionQuotas``): ``max.connections.per.ip`` (``max.connections.per.ip.overrides``:
``host:count,...`` for some hosts), ``max.connections`` for the whole broker, from which the
inter-broker listener of a cluster is exempt, so that replication goes on whatever clients do,
and ``listener.name.<listener>.max.connections`` for one listener (the inter-broker one too).

Where Kafka's acceptor stops accepting until a connection closes (clients wait in the listen
backlog), samsa closes the connection over the broker-wide limit at once with a log line, as
Kafka does over a per-ip limit: clients reconnect with their back-off either way, and an
event loop that stops accepting would also stop the inter-broker listener's accepts.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from samsa.config import BrokerConfig, ConfigError


def parse_overrides(value: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma separated."""
    overrides: dict[str, int] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ConfigError(f"Invalid value {value!r} for configuration "
                              f"max.connections.per.ip.overrides: expected host:count,...")
        overrides[host.strip()] = int(count)
    return overrides


@dataclass
class ConnectionLimits:
    per_ip: int
    total: int
    inter_broker_listener: str | None  # exempt from max.connections (None: none is)
    overrides: dict[str, int] = field(default_factory=dict)
    config: BrokerConfig | None = None  # where the listeners' own limits are read
    _by_host: collections.Counter[str] = field(default_factory=collections.Counter)
    _by_listener: collections.Counter[str] = field(default_factory=collections.Counter)
    # id(connection) -> (host, listener)
    _admitted: dict[int, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: BrokerConfig, inter_broker_listener: str | None
                    ) -> ConnectionLimits:
        return cls(config.get("max.connections.per.ip"), config.get("max.connections"),
                   inter_broker_listener,
                   parse_overrides(config.get("max.connections.per.ip.overrides")), config)

    @staticmethod
    def check(config: BrokerConfig) -> None:
        """ConfigError unless the limits of ``config`` can be taken."""
        parse_overrides(config.get("max.connections.per.ip.overrides"))

    def update(self, config: BrokerConfig) -> None:
        """The limits as the config sets them now (dynamic broker configs): connections open
        beyond a lowered limit stay, new ones are refused until the count is under it."""
        self.per_ip = config.get("max.connections.per.ip")
        self.total = config.get("max.connections")
        self.overrides = parse_overrides(config.get("max.connections.per.ip.overrides"))
        self.config = config

    @property
    def count(self) -> int:
        return len(self._admitted)

    def admit(self, connection: object, host: str, listener: str) -> str | None:
        """None (and the connection counted) or why it is refused."""
        limit = self.overrides.get(host, self.per_ip)
        if self._by_host[host] >= limit:
            return f"address already has the configured maximum of {limit} connections"
        own = (None if self.config is None
               else self.config.listener_override(listener, "max.connections"))
        if own is not None and self._by_listener[listener] >= int(own):
            return f"listener {listener} has the configured maximum of {own} connections"
        if listener != self.inter_broker_listener and self.count >= self.total:
            return f"the broker has the configured maximum of {self.total} connections"
        self._by_host[host] += 1
        self._by_listener[listener] += 1
        self._admitted[id(connection)] = (host, listener)
        return None

    def release(self, connection: object) -> None:
        admitted = self._admitted.pop(id(connection), None)
        if admitted is not None:
            host, listener = admitted
            for counts, key in ((self._by_host, host), (self._by_listener, listener)):
                counts[key] -= 1
                if not counts[key]:
                    del counts[key]
