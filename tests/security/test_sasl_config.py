"""SASL configuration as Kafka reads it: ``sasl.jaas.config`` parsed as Kafka's JaasConfig
(quotes, escapes, comments, its errors), the keys of one mechanism of one listener, the
mechanisms a listener offers (GSSAPI, Kafka's default, refused with a line that says what to
do), OAUTHBEARER's validators by Kafka's class names, and the inter-broker client's mechanism
and credentials."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from samsa.config import BrokerConfig, ConfigError
from samsa.security.channel import InterBrokerSecurity, ListenerSecurity
from samsa.security.listeners import ListenerConfig
from samsa.security.sasl.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasError,
    jaas_config,
    parse_jaas_config,
    parse_login_module,
)
from samsa.security.sasl.listener import ListenerSasl, SaslClientSettings
from samsa.security.sasl.oauthbearer import JwksValidator, UnsecuredValidator
from samsa.server.kafka_server import KafkaServer

PLAIN_USERS = (f'{PLAIN_LOGIN_MODULE} required username="admin" password="admin-secret" '
               'user_admin="admin-secret" user_alice="alice-secret";')

# --- JAAS -----------------------------------------------------------------------------------------


def test_kafkas_jaas_examples() -> None:
    module = parse_login_module(PLAIN_USERS)
    assert module.name == PLAIN_LOGIN_MODULE and module.flag == "required"
    assert module.options == {"username": "admin", "password": "admin-secret",
                              "user_admin": "admin-secret", "user_alice": "alice-secret"}
    text = f"""{SCRAM_LOGIN_MODULE} REQUIRED
        username='broker'   // a comment
        password="p\\"a\\\\ss/w=rd;" /* another
        comment */ tokenauth=true user_x=a-b_c.d@e;"""
    module = parse_login_module(text)
    assert module.flag == "required"
    assert module.options == {"username": "broker", "password": 'p"a\\ss/w=rd;',
                              "tokenauth": "true", "user_x": "a-b_c.d@e"}
    # Java's escapes in quoted strings, octal included
    assert parse_login_module('M optional k="a\\tb\\nc\\101\\z";').options == {"k": "a\tb\ncAz"}
    # '/' starts a comment: a URL must be quoted, as in Kafka
    assert parse_login_module('M sufficient url="http://x";').options == {"url": "http://x"}
    with pytest.raises(JaasError, match="not terminated by semi-colon"):
        parse_login_module("M sufficient url=http://x;")


@pytest.mark.parametrize(("text", "message"), [
    ("", "Login module not specified"),
    ("M", "Login module control flag not specified"),
    ("M maybe;", "Invalid login module control flag 'maybe'"),
    ("M required k;", "Value not specified for key 'k'"),
    ("M required k=;", "Value not specified for key 'k'"),
    ("M required k=v", "not terminated by semi-colon"),
    ("M required =v;", "option name was expected"),
])
def test_jaas_errors_are_kafkas(text: str, message: str) -> None:
    with pytest.raises(JaasError, match=message) as error:
        parse_jaas_config(text, "listener.name.x.plain.sasl.jaas.config")
    assert "listener.name.x.plain.sasl.jaas.config" in str(error.value)


def test_one_login_module_per_config() -> None:
    assert len(parse_jaas_config("A required; B optional k=v;")) == 2
    with pytest.raises(JaasError, match="contains 2 login modules, should be 1 module"):
        parse_login_module("A required; B optional k=v;")


def test_quoted_values_round_trip() -> None:
    options = {"user_alice": 'we"ird\\pass word;/*', "username": "x", "password": "line\nbreak"}
    assert parse_login_module(jaas_config(PLAIN_LOGIN_MODULE, options)).options == options


# --- listeners -----------------------------------------------------------------------------------


def sasl_of(props: dict[str, Any], listener: str = "SASL_PLAINTEXT") -> ListenerSasl:
    config = BrokerConfig({"listeners": f"{listener}://127.0.0.1:0", **props})
    endpoint = ListenerConfig.from_config(config, cluster=False).listeners[0]
    security = ListenerSecurity.build(config, endpoint)
    assert security.sasl is not None
    return security.sasl


def test_mechanisms_and_plain_users() -> None:
    sasl = sasl_of({"sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS,
                    "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": 5000})
    assert sasl.mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert sasl.plain_users == {"admin": "admin-secret", "alice": "alice-secret"}
    assert sasl.reauth_ms == {"SCRAM-SHA-512": 5000, "PLAIN": 0}
    assert sasl.max_receive_size == 524288 and sasl.failed_delay_ms == 100


def test_a_listener_overrides_the_broker() -> None:
    sasl = sasl_of({"sasl.enabled.mechanisms": "PLAIN",
                    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
                    "connections.max.reauth.ms": 1000,
                    "listener.name.sasl_plaintext.connections.max.reauth.ms": 2000})
    assert sasl.mechanisms == ("SCRAM-SHA-256",) and sasl.reauth_ms == {"SCRAM-SHA-256": 2000}


def test_gssapi_is_refused_with_what_to_do(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigError, match="samsa has no GSSAPI") as error:
        sasl_of({})  # Kafka's default
    assert "sasl.enabled.mechanisms" in str(error.value) and "PLAIN" in str(error.value)
    caplog.set_level(logging.WARNING, logger="samsa.security.sasl.listener")
    assert sasl_of({"sasl.enabled.mechanisms": "GSSAPI,SCRAM-SHA-256"}).mechanisms == (
        "SCRAM-SHA-256",)
    assert "GSSAPI is not offered" in caplog.text


@pytest.mark.parametrize(("props", "message"), [
    ({"sasl.enabled.mechanisms": "PLAIN"}, "enables PLAIN but has no users"),
    ({"sasl.enabled.mechanisms": "FOO"}, "must be one of GSSAPI, PLAIN"),
    ({"sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": f"{SCRAM_LOGIN_MODULE} required;"},
     "the login module of PLAIN is org.apache.kafka.common.security.plain.PlainLoginModule"),
    ({"sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": "nonsense"},
     "Login module control flag not specified"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER",
      "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "x.Y"},
     "Invalid value x.Y for configuration listener.name.sasl_plaintext.oauthbearer.sasl.server"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER",
      "sasl.server.callback.handler.class":
          "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"},
     "needs sasl.oauthbearer.jwks.endpoint.url"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256",
      "listener.name.sasl_plaintext.scram-sha-256.sasl.server.callback.handler.class": "x.Y"},
     "no pluggable callback handler for SCRAM-SHA-256"),
])
def test_listener_errors(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        sasl_of(props)
    assert "\n" not in str(error.value)


def test_the_broker_jaas_config_serves_the_mechanism_it_names() -> None:
    # Kafka ignores an unprefixed sasl.jaas.config on a broker; samsa takes it for the
    # mechanism whose login module it names
    sasl = sasl_of({"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                    "sasl.jaas.config": PLAIN_USERS})
    assert sasl.plain_users["alice"] == "alice-secret"


def test_oauthbearer_validators_by_kafkas_class_names(tmp_path: Path) -> None:
    sasl = sasl_of({"sasl.enabled.mechanisms": "OAUTHBEARER"})
    assert isinstance(sasl.oauth_validator, UnsecuredValidator)
    jwks = tmp_path / "jwks.json"
    jwks.write_text('{"keys": []}')
    for handler in ("org.apache.kafka.common.security.oauthbearer."
                    "OAuthBearerValidatorCallbackHandler",
                    "org.apache.kafka.common.security.oauthbearer.secured."
                    "OAuthBearerValidatorCallbackHandler"):  # (its name in Kafka 3.1 to 3.3)
        sasl = sasl_of({
            "sasl.enabled.mechanisms": "OAUTHBEARER",
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                handler,
            "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url":
                jwks.as_uri(),
            "sasl.oauthbearer.expected.audience": "kafka,other",
            "sasl.oauthbearer.expected.issuer": "https://issuer",
            "sasl.oauthbearer.sub.claim.name": "client_id",
            "sasl.oauthbearer.clock.skew.seconds": 5,
        })
        assert isinstance(sasl.oauth_validator, JwksValidator), handler
    validator = sasl.oauth_validator
    assert isinstance(validator, JwksValidator)
    assert validator.audiences == ["kafka", "other"] and validator.issuer == "https://issuer"
    assert validator.sub_claim == "client_id" and validator.clock_skew_s == 5


# --- the inter-broker client -------------------------------------------------------------------


def inter_broker(props: dict[str, Any]) -> InterBrokerSecurity:
    config = BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                           "security.inter.broker.protocol": "SASL_PLAINTEXT", **props})
    listeners = ListenerConfig.from_config(config, cluster=False)
    security = {e.listener_name: ListenerSecurity.build(config, e) for e in listeners.listeners}
    return InterBrokerSecurity.build(config, listeners, security)


def test_inter_broker_credentials_from_the_listeners_jaas_config() -> None:
    found = inter_broker({
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config":
            f'{SCRAM_LOGIN_MODULE} required username="broker" password="broker-secret";'})
    assert found.sasl == SaslClientSettings("SCRAM-SHA-512", "broker", "broker-secret")
    assert "broker-secret" not in repr(found.sasl)
    plain = inter_broker({"sasl.enabled.mechanisms": "PLAIN",
                          "sasl.mechanism.inter.broker.protocol": "PLAIN",
                          "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS})
    assert plain.sasl is not None and plain.sasl.username == "admin"
    assert plain.ssl_context is None


@pytest.mark.parametrize(("props", "message"), [
    ({"sasl.enabled.mechanisms": "PLAIN",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS},
     "Invalid value GSSAPI for configuration sasl.mechanism.inter.broker.protocol"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
      "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS},
     "must be included in sasl.enabled.mechanisms"),
    ({"sasl.enabled.mechanisms": "SCRAM-SHA-256",
      "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
     "needs username and password options"),
    ({"sasl.enabled.mechanisms": "OAUTHBEARER",
      "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"},
     "needs unsecuredLoginStringClaim_sub"),
])
def test_inter_broker_errors(props: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        inter_broker(props)


def test_a_broker_refuses_a_sasl_listener_without_a_mechanism(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="samsa has no GSSAPI"):
        KafkaServer({"log.dirs": str(tmp_path), "listeners": "SASL_SSL://127.0.0.1:0"})
