"""What a SASL listener offers and how the broker logs in to others, from Kafka's keys (built
once when the broker is built, so that a bad key fails the start with one line).

Every key is read as Kafka's ConfigurationUtils reads it for one mechanism of one listener:
``listener.name.<listener>.<mechanism>.<key>``, else ``listener.name.<listener>.<key>``, else
the broker's ``<key>`` (listener and mechanism in lower case, e.g.
``listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config``).

* ``sasl.enabled.mechanisms`` (per listener): PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.
  Kafka's default is GSSAPI, which samsa does not have: a listener left with only GSSAPI is a
  configuration error; GSSAPI beside others is not offered (a warning says so).
* ``sasl.jaas.config``: one login module. PLAIN needs Kafka's PlainLoginModule with a
  ``user_<name>="<password>"`` option per user. SCRAM needs none (credentials live in the
  credential store); OAUTHBEARER's unsecured validator reads its ``unsecuredValidator*``
  options. ``username`` / ``password`` (PLAIN, SCRAM) and ``unsecuredLoginStringClaim_sub``
  (OAUTHBEARER) are the broker's own credentials on the inter-broker listener. Kafka reads a
  broker's JAAS configs only with the listener and mechanism prefix (it ignores an unprefixed
  ``sasl.jaas.config``); samsa also takes the listener's or the broker's when its login module
  is the mechanism's.
* ``connections.max.reauth.ms`` (per mechanism), ``sasl.server.max.receive.size``,
  ``connection.failed.authentication.delay.ms``.
* OAUTHBEARER's validator: ``sasl.server.callback.handler.class`` (see ``oauthbearer``).
* The inter-broker client: ``sasl.mechanism.inter.broker.protocol`` (Kafka's default GSSAPI is
  refused: name PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER), which the inter-broker
  listener must enable.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from samsa.config import SASL_MECHANISMS, BrokerConfig, ConfigError
from samsa.security.sasl.errors import SaslError
from samsa.security.sasl.jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    LoginModule,
    parse_login_module,
)
from samsa.security.sasl.oauthbearer import (
    JWKS_VALIDATOR_CLASSES,
    OAUTHBEARER,
    UNSECURED_VALIDATOR_CLASSES,
    JwksValidator,
    OAuthBearerServer,
    UnsecuredValidator,
    Validator,
    initial_response,
    unsecured_token,
)
from samsa.security.sasl.plain import PLAIN, PlainServer, plain_client_message, plain_users
from samsa.security.sasl.scram import (
    SCRAM_MECHANISMS,
    CredentialLookup,
    ScramClient,
    ScramMechanism,
    ScramServer,
)

log = logging.getLogger(__name__)

GSSAPI = "GSSAPI"
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS, OAUTHBEARER)
LOGIN_MODULES = {PLAIN: PLAIN_LOGIN_MODULE, "SCRAM-SHA-256": SCRAM_LOGIN_MODULE,
                 "SCRAM-SHA-512": SCRAM_LOGIN_MODULE, OAUTHBEARER: OAUTHBEARER_LOGIN_MODULE}
assert set(SUPPORTED_MECHANISMS) | {GSSAPI} == set(SASL_MECHANISMS)


class SaslServer(Protocol):
    """One mechanism's side of one exchange (Kafka's javax.security.sasl.SaslServer)."""

    mechanism_name: str
    complete: bool
    authorization_id: str  # who the client is, once complete
    credential_expiration_ms: int | None  # when its credential expires (OAUTHBEARER)

    async def evaluate(self, response: bytes) -> bytes:
        """The answer to the client's message (SaslError: the exchange failed)."""


def login_module(config: BrokerConfig, listener: str, mechanism: str) -> LoginModule | None:
    """The JAAS login module of ``mechanism`` on ``listener`` (see the module docstring)."""
    key = "sasl.jaas.config"
    text = config.mechanism_get(listener, mechanism, key)
    if text is None:
        return None
    source = config.mechanism_source(listener, mechanism, key) or key
    module = parse_login_module(text, source)
    expected = LOGIN_MODULES[mechanism]
    if module.name != expected:
        if source.endswith(f".{mechanism.lower()}.{key}"):
            raise ConfigError(f"Invalid value for configuration {source}: the login module of "
                              f"{mechanism} is {expected}, not {module.name}")
        return None  # a listener's or the broker's config for another mechanism
    return module


def _enabled(config: BrokerConfig, listener: str) -> tuple[str, ...]:
    enabled = list(dict.fromkeys(config.listener_get(listener, "sasl.enabled.mechanisms")))
    where = (f"listener.name.{listener.lower()}.sasl.enabled.mechanisms or "
             "sasl.enabled.mechanisms")
    if not enabled:
        raise ConfigError(f"Invalid value for configuration {where}: no SASL mechanism is "
                          f"enabled on listener {listener}")
    offered = tuple(m for m in enabled if m != GSSAPI)
    if GSSAPI in enabled:
        if not offered:
            raise ConfigError(
                f"Invalid value GSSAPI for configuration {where} (listener {listener}; GSSAPI "
                f"is Kafka's default): samsa has no GSSAPI (Kerberos); enable one or more of "
                f"{', '.join(SUPPORTED_MECHANISMS)}")
        log.warning("listener %s: GSSAPI is not offered (samsa has no Kerberos); offered: %s",
                    listener, ", ".join(offered))
    return offered


def _oauth_validator(config: BrokerConfig, listener: str,
                     module: LoginModule | None) -> Validator:
    def get(key: str):  # noqa: ANN202
        return config.mechanism_get(listener, OAUTHBEARER, key)

    handler = get("sasl.server.callback.handler.class")
    if handler is None or handler in UNSECURED_VALIDATOR_CLASSES:
        return UnsecuredValidator.from_options(module.options if module else {})
    if handler in JWKS_VALIDATOR_CLASSES:
        url = get("sasl.oauthbearer.jwks.endpoint.url")
        if not url:
            raise ConfigError(f"listener {listener}: {handler} needs "
                              "sasl.oauthbearer.jwks.endpoint.url (a file:// or https:// JWKS)")
        return JwksValidator(
            url, get("sasl.oauthbearer.jwks.endpoint.refresh.ms"),
            get("sasl.oauthbearer.expected.audience"), get("sasl.oauthbearer.expected.issuer"),
            get("sasl.oauthbearer.sub.claim.name"), get("sasl.oauthbearer.scope.claim.name"),
            get("sasl.oauthbearer.clock.skew.seconds"))
    source = config.mechanism_source(listener, OAUTHBEARER, "sasl.server.callback.handler.class")
    raise ConfigError(
        f"Invalid value {handler} for configuration {source}: samsa's OAUTHBEARER validators "
        f"are {UNSECURED_VALIDATOR_CLASSES[0]} (unsecured tokens, the default) and "
        f"{JWKS_VALIDATOR_CLASSES[0]} (signed JWTs, sasl.oauthbearer.jwks.endpoint.url)")


@dataclass(frozen=True)
class ListenerSasl:
    """One SASL listener's mechanisms and how each checks a client."""

    listener_name: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    oauth_validator: Validator | None = None
    reauth_ms: Mapping[str, int] = field(default_factory=dict)  # per mechanism; 0: none
    max_receive_size: int = 524288
    failed_delay_ms: int = 100

    @classmethod
    def build(cls, config: BrokerConfig, listener: str) -> ListenerSasl:
        mechanisms = _enabled(config, listener)
        users: dict[str, str] = {}
        validator: Validator | None = None
        for mechanism in mechanisms:
            module = login_module(config, listener, mechanism)
            if mechanism == PLAIN:
                if module is None:
                    raise ConfigError(
                        f"listener {listener} enables PLAIN but has no users: set "
                        f"listener.name.{listener.lower()}.plain.sasl.jaas.config to "
                        f'{PLAIN_LOGIN_MODULE} required user_<name>="<password>" ...;')
                users = plain_users(module.options)
            elif mechanism == OAUTHBEARER:
                validator = _oauth_validator(config, listener, module)
            for key in ("sasl.server.callback.handler.class",):
                if mechanism != OAUTHBEARER and config.mechanism_source(
                        listener, mechanism, key) == (
                        f"listener.name.{listener.lower()}.{mechanism.lower()}.{key}"):
                    raise ConfigError(f"listener {listener}: samsa has no pluggable callback "
                                      f"handler for {mechanism} ({key})")
        return cls(
            listener, mechanisms, users, validator,
            {m: config.mechanism_get(listener, m, "connections.max.reauth.ms")
             for m in mechanisms},
            config.listener_get(listener, "sasl.server.max.receive.size"),
            config.get("connection.failed.authentication.delay.ms"))

    def server(self, mechanism: str, credentials: CredentialLookup) -> SaslServer:
        """A server for one exchange of ``mechanism`` (one of ``mechanisms``)."""
        if mechanism == PLAIN:
            return PlainServer(self.plain_users)
        if mechanism == OAUTHBEARER:
            assert self.oauth_validator is not None
            return OAuthBearerServer(self.oauth_validator)
        scram = ScramMechanism.by_name(mechanism)
        assert scram is not None, mechanism
        return ScramServer(scram, credentials)


# --- the broker's own client side (inter-broker connections) ---------------------------------


class SaslClient(Protocol):
    mechanism_name: str
    complete: bool

    def first_message(self) -> bytes: ...

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The answer to the server's message; None: nothing more to send."""


class _OneMessageClient:
    """PLAIN and OAUTHBEARER: one message; an empty answer completes the exchange."""

    def __init__(self, mechanism: str, message: bytes) -> None:
        self.mechanism_name = mechanism
        self._message = message
        self.complete = False

    def first_message(self) -> bytes:
        return self._message

    def evaluate(self, challenge: bytes) -> bytes | None:
        if challenge:
            raise SaslError(f"{self.mechanism_name} authentication failed: {challenge!r}")
        self.complete = True
        return None


@dataclass(frozen=True)
class SaslClientSettings:
    """How this broker logs in to the others (Kafka's inter-broker SaslClientAuthenticator):
    the mechanism and the credentials from the inter-broker listener's JAAS config."""

    mechanism: str
    username: str
    password: str = field(repr=False, default="")
    token_lifetime_s: float = 3600.0  # OAUTHBEARER: unsecured tokens made for each login

    @classmethod
    def build(cls, config: BrokerConfig, listener: str, enabled: tuple[str, ...]
              ) -> SaslClientSettings:
        mechanism = config.get("sasl.mechanism.inter.broker.protocol")
        key = "sasl.mechanism.inter.broker.protocol"
        if mechanism == GSSAPI:
            raise ConfigError(
                f"Invalid value GSSAPI for configuration {key} (Kafka's default; the "
                f"inter-broker listener {listener} is SASL): samsa has no GSSAPI (Kerberos); "
                f"set it to one of {', '.join(SUPPORTED_MECHANISMS)}")
        if mechanism not in enabled:
            raise ConfigError(
                f"{key} must be included in sasl.enabled.mechanisms when SASL is used for "
                f"inter-broker communication ({mechanism} is not enabled on listener "
                f"{listener}: {', '.join(enabled)})")
        module = login_module(config, listener, mechanism)
        options = module.options if module is not None else {}
        where = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
        if mechanism == OAUTHBEARER:
            subject = options.get("unsecuredLoginStringClaim_sub")
            if not subject:
                raise ConfigError(f"{where} needs unsecuredLoginStringClaim_sub (the broker's "
                                  "principal in its unsecured OAUTHBEARER tokens)")
            lifetime = float(options.get("unsecuredLoginLifetimeSeconds", "3600"))
            return cls(mechanism, subject, "", lifetime)
        user, password = options.get("username"), options.get("password")
        if not user or password is None:
            raise ConfigError(f"{where} needs username and password options: the broker's own "
                              f"credentials toward the other brokers ({mechanism})")
        return cls(mechanism, user, password)

    def new_client(self) -> SaslClient:
        if self.mechanism == PLAIN:
            return _OneMessageClient(PLAIN, plain_client_message(self.username, self.password))
        if self.mechanism == OAUTHBEARER:
            token = unsecured_token(self.username, self.token_lifetime_s)
            return _OneMessageClient(OAUTHBEARER, initial_response(token))
        scram = ScramMechanism.by_name(self.mechanism)
        assert scram is not None
        return ScramClient(scram, self.username, self.password)


NewClient = Callable[[], SaslClient]
