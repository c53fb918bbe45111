"""What a connection's security is, per listener (Kafka's ChannelBuilders): built once when the
broker is built, so that a bad key store or rule fails the start with one line.

* ``ListenerSecurity``: a listener's endpoint, its TLS server context (SSL, SASL_SSL), how a
  connection's principal is found (``ssl.principal.mapping.rules``) and, on SASL_PLAINTEXT and
  SASL_SSL, its SASL mechanisms (``samsa.security.sasl.listener.ListenerSasl``). A connection
  starts with the TLS handshake (SSL, SASL_SSL), then is authenticated: by its certificate
  (SSL), or by the SASL exchange, a state before any other API (``samsa.server.sasl``), whose
  user is the principal (on SASL_SSL too: the SASL principal wins over a certificate).
* ``InterBrokerSecurity``: how this broker connects to others (replica fetchers, transaction
  markers): the inter-broker listener's name, whose endpoints it connects to, the TLS client
  context when that listener is SSL or SASL_SSL, and its SASL mechanism and credentials when
  it is SASL_PLAINTEXT or SASL_SSL.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass

from samsa.config import BrokerConfig
from samsa.security.listeners import EndPoint, ListenerConfig
from samsa.security.principal import (
    ANONYMOUS,
    KafkaPrincipal,
    SslPrincipalMapper,
    ssl_principal,
)
from samsa.security.sasl.listener import ListenerSasl, SaslClientSettings
from samsa.security.ssl_factory import client_context, server_context


@dataclass(frozen=True)
class ListenerSecurity:
    endpoint: EndPoint
    ssl_context: ssl.SSLContext | None = None
    mapper: SslPrincipalMapper | None = None
    sasl: ListenerSasl | None = None

    @property
    def listener_name(self) -> str:
        return self.endpoint.listener_name

    @property
    def security_protocol(self) -> str:
        return self.endpoint.security_protocol

    @classmethod
    def build(cls, config: BrokerConfig, endpoint: EndPoint) -> ListenerSecurity:
        name = endpoint.listener_name
        sasl = ListenerSasl.build(config, name) if endpoint.uses_sasl else None
        if not endpoint.uses_tls:
            return cls(endpoint, sasl=sasl)
        return cls(endpoint, server_context(config, name),
                   SslPrincipalMapper(config.listener_get(name, "ssl.principal.mapping.rules")),
                   sasl)

    def tls_principal(self, peer_certificate_der: bytes | None) -> KafkaPrincipal:
        """The principal of a TLS connection (NoMatchingRule: refused); on SASL_SSL the
        SASL exchange names it: anonymous until then."""
        if self.sasl is not None:
            return ANONYMOUS
        assert self.mapper is not None
        return ssl_principal(peer_certificate_der, self.mapper)

    def plaintext_principal(self) -> KafkaPrincipal:
        return ANONYMOUS


@dataclass(frozen=True)
class InterBrokerSecurity:
    listener_name: str
    security_protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslClientSettings | None = None

    @classmethod
    def build(cls, config: BrokerConfig, listeners: ListenerConfig,
              security: Mapping[str, ListenerSecurity] | None = None) -> InterBrokerSecurity:
        """``security``: the listeners' own (the inter-broker listener's SASL mechanisms)."""
        name, protocol = listeners.inter_broker_listener, listeners.inter_broker_protocol
        context = client_context(config, name) if protocol in ("SSL", "SASL_SSL") else None
        sasl = None
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            own = (security or {}).get(name)
            enabled = (own.sasl.mechanisms if own is not None and own.sasl is not None
                       else ListenerSasl.build(config, name).mechanisms)
            sasl = SaslClientSettings.build(config, name, enabled)
        return cls(name, protocol, context, sasl)
