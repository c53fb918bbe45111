"""TLS configuration without a socket: Kafka's listener keys, the ssl.* key stores and trust
stores (real certificates made here), ssl.principal.mapping.rules (Kafka's SslPrincipalMapper
cases) and the certificate subject as Kafka's principal builder writes it."""

from __future__ import annotations

import datetime
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from samsa.config import BrokerConfig, ConfigError
from samsa.security.ca import LOCAL_HOSTS, CertificateAuthority
from samsa.security.channel import InterBrokerSecurity
from samsa.security.listeners import EndPoint, ListenerConfig
from samsa.security.principal import (
    ANONYMOUS,
    NoMatchingRule,
    SslPrincipalMapper,
    certificate_subject,
    rfc2253_name,
    ssl_principal,
)
from samsa.security.ssl_factory import client_context, server_context
from samsa.server.kafka_server import KafkaServer

# --- ssl.principal.mapping.rules ----------------------------------------------------------


def test_mapping_rules_as_kafka_applies_them() -> None:
    """Kafka's SslPrincipalMapperTest cases: the first rule matching the whole name wins."""
    mapper = SslPrincipalMapper(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,"
        "DEFAULT")
    assert mapper.name("CN=kafka-server1,OU=ServiceUsers,O=Org,C=US") == "kafka-server1"
    assert mapper.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Sunnyvale,ST=CA,C=US") == (
        "duke@javasoft")
    assert mapper.name("cn=duke,ou=javasoft,dc=oracle,dc=com") == "DUKE@JAVASOFT"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    default = "OU=JavaSoft,O=Sun Microsystems,C=US"
    assert mapper.name(default) == default


def test_mapping_rules_escapes_back_references_and_errors() -> None:
    # a group the pattern lacks is a literal, as Kafka (NiFi's escaping) has it
    assert SslPrincipalMapper("RULE:^CN=(.*),OU=(.*)$/$1@$4/").name("CN=a,OU=b") == "a@$4"
    # an escaped slash inside the pattern and the replacement
    assert SslPrincipalMapper(r"RULE:^CN=(.*)\/x$/$1\/y/").name("CN=a/x") == "a/y"
    assert SslPrincipalMapper("").rules == []  # no rule: nothing maps
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x"):
        SslPrincipalMapper("RULE:^CN=y$/y/").name("CN=x")
    for bad in ("RULE:^CN=(.*)$/$1/LX", "RULE:^CN=(.*)$/$1", "DEFAULTX", "RULE:[/x/"):
        with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
            SslPrincipalMapper(bad)


def _certificate(name: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    from cryptography.hazmat.primitives.serialization import Encoding

    return (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()).public_bytes(Encoding.DER))


def test_subject_is_written_as_the_jdk_writes_it() -> None:
    """X500Principal.getName() (RFC 2253): most specific name first, no spaces, keywords only
    for CN, C, L, ST, O, OU, STREET, DC, UID; other types as OID=#hex of their DER value;
    special characters escaped with a backslash, as the JDK escapes them."""
    name = x509.Name([
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "CA"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme, Inc."),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "a+b=c"),
        x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "example"),
        x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b"),
        x509.NameAttribute(NameOID.COMMON_NAME, " client #1 "),
    ])
    assert certificate_subject(_certificate(name)) == (
        "CN=\\ client \\#1\\ ,1.2.840.113549.1.9.1=#1603614062,DC=example,"
        "OU=a\\+b\\=c,O=Acme\\, Inc.,ST=CA,C=US")
    assert rfc2253_name(x509.Name([]).public_bytes()) == ""
    mapper = SslPrincipalMapper("RULE:^CN=([^,]*),.*$/$1/L,DEFAULT")
    simple = _certificate(x509.Name.from_rfc4514_string("CN=Alice,OU=eng,O=Example"))
    assert str(ssl_principal(simple, mapper)) == "User:alice"
    assert ssl_principal(None, mapper) is ANONYMOUS
    assert str(ANONYMOUS) == "User:ANONYMOUS"


# --- listeners --------------------------------------------------------------------------------


def listeners(props: dict[str, str], cluster: bool = False) -> ListenerConfig:
    return ListenerConfig.from_config(BrokerConfig(props), cluster)


def test_listener_names_map_to_protocols() -> None:
    found = listeners({"listeners": "PLAINTEXT://127.0.0.1:0,SSL://:9093"})
    assert found.listeners == (EndPoint("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 0),
                               EndPoint("SSL", "SSL", "", 9093))
    assert found.advertised == found.listeners
    assert (found.inter_broker_listener, found.inter_broker_protocol) == ("PLAINTEXT",
                                                                          "PLAINTEXT")
    named = listeners({
        "listeners": "INTERNAL://127.0.0.1:9093,EXTERNAL://[::1]:9092",
        "advertised.listeners": "EXTERNAL://broker.example.com:19092,INTERNAL://10.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "internal"}, cluster=False)
    assert [(e.listener_name, e.security_protocol, e.host) for e in named.listeners] == [
        ("INTERNAL", "SSL", "127.0.0.1"), ("EXTERNAL", "PLAINTEXT", "::1")]
    assert str(named.listeners[1]) == "EXTERNAL://[::1]:9092"
    assert named.advertised == (EndPoint("EXTERNAL", "PLAINTEXT", "broker.example.com", 19092),
                                EndPoint("INTERNAL", "SSL", "10.0.0.1", 0))
    assert (named.inter_broker_listener, named.inter_broker_protocol) == ("INTERNAL", "SSL")


@pytest.mark.parametrize(("props", "cluster", "message"), [
    ({"listeners": "INTERNAL://:9093"}, False, "no security protocol defined for listener "
     "INTERNAL"),
    ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, False, "different name"),
    ({"listeners": "PLAINTEXT:9092"}, False, "expected NAME://host:port"),
    ({"listeners": "PLAINTEXT://:99999"}, False, "outside 0..65535"),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://h:9093"}, False,
     "not in listeners"),
    ({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://0.0.0.0:9092"},
     False, "0.0.0.0 is not a valid address"),
    ({"listener.security.protocol.map": "A:TLS"}, False, "listener.security.protocol.map"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SSL"},
     False, "Only one of inter.broker.listener.name and security.inter.broker.protocol"),
    ({"listeners": "SSL://:9093"}, True, "must be a listener name defined in "
     "advertised.listeners"),
    ({"listeners": "SSL://:9093", "inter.broker.listener.name": "PLAINTEXT"}, False,
     "must be a listener name defined in advertised.listeners"),
])
def test_listener_errors_name_the_key(props: dict[str, str], cluster: bool,
                                      message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        listeners(props, cluster)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT://127.0.0.1:0", "SASL_SSL://127.0.0.1:0"])
def test_sasl_listeners_need_a_mechanism_samsa_has(tmp_path: Path, listener: str) -> None:
    # parsed into the model...
    assert listeners({"listeners": listener}).listeners[0].uses_sasl
    # ...and Kafka's default mechanism, GSSAPI, is refused with a line that says what to do
    # (tests/security/test_sasl_config.py has the rest)
    with pytest.raises(ConfigError, match="samsa has no GSSAPI"):
        KafkaServer({"log.dirs": str(tmp_path), "listeners": listener})


def test_listener_prefixed_keys() -> None:
    config = BrokerConfig({"ssl.client.auth": "none",
                           "listener.name.INTERNAL.ssl.client.auth": "required",
                           "listener.name.external.ssl.keystore.type": "PKCS12"})
    assert config.listener_get("INTERNAL", "ssl.client.auth") == "required"
    assert config.listener_get("EXTERNAL", "ssl.client.auth") == "none"
    assert config.listener_get("EXTERNAL", "ssl.keystore.type") == "PKCS12"
    assert config.listener_get("INTERNAL", "ssl.keystore.type") == "JKS"  # Kafka's default
    with pytest.raises(ConfigError, match="Unknown broker configuration"):
        BrokerConfig({"listener.name.internal.log.dirs": "x"})
    with pytest.raises(ConfigError, match="ssl.client.auth"):
        BrokerConfig({"listener.name.internal.ssl.client.auth": "maybe"})


# --- key stores and trust stores ------------------------------------------------------------


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority()


def ssl_config(**props: str) -> BrokerConfig:
    return BrokerConfig({k.replace("_", "."): v for k, v in props.items()})


def test_key_store_formats(tmp_path: Path, ca: CertificateAuthority) -> None:
    broker = ca.issue("CN=broker", hosts=LOCAL_HOSTS)
    pem = broker.write_keystore(tmp_path / "plain.pem")
    encrypted = broker.write_keystore(tmp_path / "encrypted.pem", key_password="s3cret")
    p12 = broker.write_pkcs12(tmp_path / "broker.p12", "p12pass")
    trust = ca.write(tmp_path / "ca.pem")
    cases = [
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pem)},
        {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(encrypted),
         "ssl.key.password": "s3cret"},
        {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(p12),
         "ssl.keystore.password": "p12pass"},
        # inline PEM, written on one line as a properties file may have it
        {"ssl.keystore.type": "PEM",
         "ssl.keystore.certificate.chain": broker.chain_pem().decode().replace("\n", " "),
         "ssl.keystore.key": broker.key_pem().decode()},
    ]
    for props in cases:
        context = server_context(BrokerConfig({**props, "ssl.client.auth": "required",
                                               "ssl.truststore.type": "PEM",
                                               "ssl.truststore.location": str(trust)}), "SSL")
        assert context.verify_mode == ssl.CERT_REQUIRED
        assert context.minimum_version == ssl.TLSVersion.TLSv1_2
        assert context.maximum_version == ssl.TLSVersion.TLSv1_3


@pytest.mark.parametrize(("props", "message"), [
    ({}, "an SSL listener needs a key store"),
    ({"ssl.keystore.location": "KS"}, "JKS stores are not supported, use PEM or PKCS12"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nonexistent/ks.pem"},
     "Failed to load SSL keystore /nonexistent/ks.pem of type PEM"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "ENC"},
     "the private key is encrypted and ssl.key.password is not set"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "ENC", "ssl.key.password": "no"},
     "wrong ssl.key.password"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KS",
      "ssl.keystore.password": "x"}, "password cannot be specified with PEM"),
    ({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": "P12",
      "ssl.keystore.password": "wrong"}, "wrong ssl.keystore.password"),
    ({"ssl.keystore.certificate.chain": "x", "ssl.keystore.key": "y"},
     "can be specified only for PEM"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KS", "ssl.client.auth": "required",
      "ssl.truststore.location": "CA"}, "JKS stores are not supported"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KS", "ssl.client.auth": "required",
      "ssl.truststore.type": "PEM", "ssl.truststore.location": "CA",
      "ssl.truststore.password": "x"}, "trust store password cannot be specified for PEM"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KS",
      "ssl.cipher.suites": "TLS_NOT_A_SUITE"}, "not a cipher suite"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KS",
      "ssl.protocol": "TLSv1.2", "ssl.enabled.protocols": "TLSv1.3"}, "no TLS version"),
])
def test_key_store_errors_are_one_line(tmp_path: Path, ca: CertificateAuthority,
                                       props: dict[str, str], message: str) -> None:
    broker = ca.issue("CN=broker")
    files = {"KS": str(broker.write_keystore(tmp_path / "ks.pem")),
             "ENC": str(broker.write_keystore(tmp_path / "enc.pem", key_password="s3cret")),
             "P12": str(broker.write_pkcs12(tmp_path / "ks.p12", "right")),
             "CA": str(ca.write(tmp_path / "ca.pem"))}
    resolved = {k: files.get(v, v) for k, v in props.items()}
    with pytest.raises(ConfigError, match=message) as error:
        server_context(BrokerConfig(resolved), "SSL")
    assert "\n" not in str(error.value)


def test_per_listener_stores_versions_and_suites(tmp_path: Path,
                                                 ca: CertificateAuthority) -> None:
    internal = ca.issue("CN=internal").write_keystore(tmp_path / "internal.pem")
    config = BrokerConfig({
        "ssl.keystore.type": "PEM",
        "listener.name.internal.ssl.keystore.location": str(internal),
        "listener.name.internal.ssl.enabled.protocols": "TLSv1.2",
        "listener.name.internal.ssl.cipher.suites":
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,ECDHE-ECDSA-AES256-GCM-SHA384",
        "listener.name.internal.ssl.client.auth": "requested",
    })
    context = server_context(config, "INTERNAL")
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_OPTIONAL
    names = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert names == {"ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES256-GCM-SHA384"}
    with pytest.raises(ConfigError, match="needs a key store"):
        server_context(config, "EXTERNAL")  # no keystore for it


def test_inter_broker_client_context(tmp_path: Path, ca: CertificateAuthority) -> None:
    keystore = ca.issue("CN=broker").write_keystore(tmp_path / "ks.pem")
    inline_ca = ca.certificate_pem().decode()
    config = BrokerConfig({"listeners": "SSL://127.0.0.1:0",
                           "security.inter.broker.protocol": "SSL",
                           "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore),
                           "ssl.truststore.type": "PEM",
                           "ssl.truststore.certificates": inline_ca})
    inter = InterBrokerSecurity.build(config, ListenerConfig.from_config(config, True))
    assert (inter.listener_name, inter.security_protocol) == ("SSL", "SSL")
    assert inter.ssl_context is not None and inter.ssl_context.check_hostname
    no_check = BrokerConfig({"ssl.endpoint.identification.algorithm": "",
                             "ssl.truststore.type": "PEM",
                             "ssl.truststore.location": str(ca.write(tmp_path / "ca.pem"))})
    assert not client_context(no_check, "SSL").check_hostname
    plain = BrokerConfig({})
    assert InterBrokerSecurity.build(plain, ListenerConfig.from_config(plain, True)
                                     ).ssl_context is None
