"""Listeners as Kafka configures them: ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map`` and the inter-broker listener (``inter.broker.listener.name``
or ``security.inter.broker.protocol``), checked as Kafka's KafkaConfig checks them.

A listener has a name (``PLAINTEXT``, ``SSL``, ``INTERNAL``, ...) and the security protocol the
map gives that name; a name that is a protocol maps to itself by default. Clients are told the
endpoints of the listener they connected on; brokers reach each other on the inter-broker one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from samsa.config import SECURITY_PROTOCOLS, BrokerConfig, ConfigError

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})
SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT, SASL_SSL})

# Kafka's EndPoint.uriParseExp: NAME://host:port, the host may be empty, a name or [IPv6]
_URI = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One listener: its name, its security protocol, host ("" = every interface) and port."""

    listener_name: str
    security_protocol: str
    host: str
    port: int

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in SASL_PROTOCOLS

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


def parse_protocol_map(items: Sequence[str]) -> dict[str, str]:
    """``listener.security.protocol.map``: NAME:PROTOCOL pairs."""
    found: dict[str, str] = {}
    for item in items:
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(
                f"Invalid value {item} for configuration listener.security.protocol.map: "
                f"expected NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        if name in found:
            raise ConfigError(f"Invalid value {item} for configuration "
                              f"listener.security.protocol.map: listener {name} given twice")
        found[name] = protocol
    return found


def parse_endpoints(uris: Sequence[str], protocols: dict[str, str], key: str) -> list[EndPoint]:
    """The listener URIs of configuration ``key``, each name mapped to its protocol, each
    name at most once (Kafka's ``listenerListToEndPoints``)."""
    endpoints: list[EndPoint] = []
    for uri in uris:
        match = _URI.match(uri.strip())
        if match is None:
            raise ConfigError(f"Invalid value {uri} for configuration {key}: expected "
                              "NAME://host:port (e.g. PLAINTEXT://127.0.0.1:9092)")
        name = match.group(1).upper()
        port = int(match.group(3))
        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid value {uri} for configuration {key}: port {port} "
                              "outside 0..65535")
        protocol = protocols.get(name)
        if protocol is None:
            raise ConfigError(
                f"Invalid value {uri} for configuration {key}: no security protocol defined "
                f"for listener {name} (add {name}:PROTOCOL to listener.security.protocol.map)")
        if any(e.listener_name == name for e in endpoints):
            raise ConfigError(f"Invalid value {','.join(uris)} for configuration {key}: "
                              f"each listener must have a different name ({name} repeats)")
        endpoints.append(EndPoint(name, protocol, match.group(2), port))
    return endpoints


@dataclass(frozen=True)
class ListenerConfig:
    listeners: tuple[EndPoint, ...]
    # what other brokers and clients are told, by listener name (a port of 0 is the bound one)
    advertised: tuple[EndPoint, ...]
    inter_broker_listener: str
    inter_broker_protocol: str
    protocols: dict[str, str]

    @classmethod
    def from_config(cls, config: BrokerConfig, cluster: bool) -> ListenerConfig:
        """Kafka's checks of these keys; ``cluster``: the inter-broker listener must be
        advertised (Kafka requires it of every broker; a single node has no inter-broker
        traffic, so it is only required where ``inter.broker.listener.name`` names one)."""
        # as Kafka's: a map that is set replaces the default one (each protocol to itself)
        protocols = parse_protocol_map(config.get("listener.security.protocol.map"))
        listeners = parse_endpoints(config.get("listeners"), protocols, "listeners")
        if not listeners:
            raise ConfigError("Invalid value for configuration listeners: no listener given")
        advertised_uris = config.get("advertised.listeners")
        advertised = (parse_endpoints(advertised_uris, protocols, "advertised.listeners")
                      if advertised_uris else list(listeners))
        names = {e.listener_name for e in listeners}
        for endpoint in advertised:
            if endpoint.listener_name not in names:
                raise ConfigError(
                    f"Invalid value {','.join(advertised_uris)} for configuration "
                    f"advertised.listeners: listener {endpoint.listener_name} is not in "
                    "listeners (advertised listener names must be a subset of them)")
            if endpoint.host == "0.0.0.0":
                raise ConfigError(
                    f"Invalid value {','.join(advertised_uris)} for configuration "
                    "advertised.listeners: 0.0.0.0 is not a valid address to advertise")
        if config.is_set("inter.broker.listener.name") and config.is_set(
                "security.inter.broker.protocol"):
            raise ConfigError("Only one of inter.broker.listener.name and "
                              "security.inter.broker.protocol should be set.")
        explicit = config.is_set("inter.broker.listener.name")
        if explicit:
            inter = config.get("inter.broker.listener.name").upper()
            if inter not in protocols:
                raise ConfigError(
                    f"Invalid value {inter} for configuration inter.broker.listener.name: "
                    "no security protocol defined for it in listener.security.protocol.map")
            inter_protocol = protocols[inter]
        else:  # the listener named after the protocol, as Kafka's ListenerName.forSecurityProtocol
            inter = inter_protocol = config.get("security.inter.broker.protocol")
        if (cluster or explicit) and not any(a.listener_name == inter for a in advertised):
            raise ConfigError(
                f"Invalid value {inter} for configuration "
                f"{'inter.broker.listener.name' if explicit else 'security.inter.broker.protocol'}"
                f": inter.broker.listener.name must be a listener name defined in "
                f"advertised.listeners (the listeners advertised are "
                f"{', '.join(a.listener_name for a in advertised)})")
        return cls(tuple(listeners), tuple(advertised), inter, inter_protocol, protocols)
