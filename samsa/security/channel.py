"""What a connection's security is, per listener (Kafka's ChannelBuilders): built once when the
broker is built, so that a bad key store or rule fails the start with one line.

* ``ListenerSecurity``: a listener's endpoint, its TLS server context (SSL), and how a
  connection's principal is found (``ssl.principal.mapping.rules``). A connection on it starts
  with the TLS handshake (SSL), then is authenticated; SASL listeners (SASL_PLAINTEXT,
  SASL_SSL) are refused for now: their connections will add the SASL exchange as a state
  before any other API, and their principal is the SASL user.
* ``InterBrokerSecurity``: how this broker connects to others (replica fetchers, transaction
  markers): the inter-broker listener's name, whose endpoints it connects to, and the TLS
  client context when that listener is SSL.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from samsa.config import BrokerConfig, ConfigError
from samsa.security.listeners import EndPoint, ListenerConfig
from samsa.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    SslPrincipalMapper,
    ssl_principal,
)
from samsa.security.ssl_factory import client_context, server_context


@dataclass(frozen=True)
class ListenerSecurity:
    endpoint: EndPoint
    ssl_context: ssl.SSLContext | None = None
    mapper: SslPrincipalMapper | None = None

    @property
    def listener_name(self) -> str:
        return self.endpoint.listener_name

    @property
    def security_protocol(self) -> str:
        return self.endpoint.security_protocol

    @classmethod
    def build(cls, config: BrokerConfig, endpoint: EndPoint) -> ListenerSecurity:
        if endpoint.uses_sasl:
            raise ConfigError(
                f"Invalid value {endpoint} for configuration listeners: SASL listeners are "
                f"not supported yet ({endpoint.listener_name} is {endpoint.security_protocol})")
        if not endpoint.uses_tls:
            return cls(endpoint)
        name = endpoint.listener_name
        return cls(endpoint, server_context(config, name),
                   SslPrincipalMapper(config.listener_get(name, "ssl.principal.mapping.rules")))

    def tls_principal(self, peer_certificate_der: bytes | None) -> KafkaPrincipal:
        """The principal of a TLS connection (NoMatchingRule: refused)."""
        assert self.mapper is not None
        return ssl_principal(peer_certificate_der, self.mapper)

    def plaintext_principal(self) -> KafkaPrincipal:
        return ANONYMOUS


@dataclass(frozen=True)
class InterBrokerSecurity:
    listener_name: str
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None

    @classmethod
    def build(cls, config: BrokerConfig, listeners: ListenerConfig) -> InterBrokerSecurity:
        name, protocol = listeners.inter_broker_listener, listeners.inter_broker_protocol
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            raise ConfigError(f"Invalid value {protocol} for the inter-broker listener "
                              f"{name}: SASL listeners are not supported yet")
        context = client_context(config, name) if protocol == "SSL" else None
        return cls(name, protocol, context)
