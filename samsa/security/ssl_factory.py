"""TLS contexts from Kafka's ``ssl.*`` keys (Kafka's DefaultSslEngineFactory): the server side
of an SSL listener, and the client side of the broker's own connections to other brokers.

Every key is read as the listener sees it: ``listener.name.<listener>.ssl.<key>`` first, the
broker's ``ssl.<key>`` otherwise (``BrokerConfig.listener_get``).

* Key store: ``ssl.keystore.type`` PEM (``ssl.keystore.location``: one file with the private
  key and the certificate chain; or ``ssl.keystore.certificate.chain`` and
  ``ssl.keystore.key`` inline) or PKCS12 (``ssl.keystore.password``, ``ssl.key.password``).
  JKS, Kafka's default type, is refused with a message that says what to use instead.
* Trust store: ``ssl.truststore.type`` PEM (``ssl.truststore.location`` or
  ``ssl.truststore.certificates`` inline) or PKCS12; none: the system's CAs.
* ``ssl.client.auth`` none / requested / required; ``ssl.enabled.protocols`` and
  ``ssl.protocol`` give the TLS versions; ``ssl.cipher.suites`` the TLS 1.2 suites (Kafka's
  IANA names or OpenSSL's); ``ssl.endpoint.identification.algorithm`` (https or empty) whether
  the broker's client checks the host name in the other broker's certificate.

Python's ``ssl`` loads a key and certificate chain only from a file: a key store that is not
already such a file (PKCS12, inline PEM) is written, its key encrypted with a one-time
password, to a private temporary file that is removed as soon as it is loaded.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from samsa.config import BrokerConfig, ConfigError

if TYPE_CHECKING:  # imported where a store is loaded: cryptography's import takes a while
    from cryptography import x509

Get = Callable[[str], Any]

_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
             "TLS": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}
# Kafka (the JDK) names cipher suites as IANA does; OpenSSL has names of its own
_IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
}
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                           "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                           "TLS_AES_128_CCM_8_SHA256"})
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def listener_getter(config: BrokerConfig, listener: str) -> Get:
    return lambda key: config.listener_get(listener, key)


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of an SSL (or SASL_SSL) listener."""
    get = listener_getter(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions_and_suites(context, get)
    if not _load_keystore(context, get):
        raise ConfigError(
            f"Invalid configuration of listener {listener}: an SSL listener needs a key store "
            "(ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key)")
    client_auth = get("ssl.client.auth")
    if client_auth != "none" and not _load_truststore(context, get):
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    context.verify_mode = _CLIENT_AUTH[client_auth]
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The broker's client side on ``listener`` (the inter-broker one), as Kafka's
    inter-broker client: the same key store (its certificate, should the other broker ask for
    one), the same trust store, and ``ssl.endpoint.identification.algorithm``."""
    get = listener_getter(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions_and_suites(context, get)
    _load_keystore(context, get)
    if not _load_truststore(context, get):
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    algorithm = (get("ssl.endpoint.identification.algorithm") or "").strip().lower()
    if algorithm not in ("", "https"):
        raise ConfigError(f"Invalid value {algorithm} for configuration "
                          "ssl.endpoint.identification.algorithm: must be https or empty")
    context.check_hostname = algorithm == "https"
    return context


# --- versions and cipher suites -------------------------------------------------------------

def _versions_and_suites(context: ssl.SSLContext, get: Get) -> None:
    top = _VERSIONS[get("ssl.protocol")]
    enabled = [_VERSIONS[v] for v in get("ssl.enabled.protocols") if _VERSIONS[v] <= top]
    if not enabled:
        raise ConfigError(
            f"Invalid value {','.join(get('ssl.enabled.protocols'))} for configuration "
            f"ssl.enabled.protocols: no TLS version up to ssl.protocol={get('ssl.protocol')}")
    context.minimum_version = min(enabled)
    context.maximum_version = max(enabled)
    suites = get("ssl.cipher.suites") or []
    if not suites:
        return
    available = {c["name"] for c in context.get_ciphers()}
    openssl: list[str] = []
    tls13_only = True
    for suite in suites:
        if suite in _TLS13_SUITES:
            continue  # OpenSSL's TLS 1.3 suites cannot be chosen through Python's ssl
        tls13_only = False
        name = _IANA_TO_OPENSSL.get(suite, suite)
        if name not in available:
            raise ConfigError(f"Invalid value {suite} for configuration ssl.cipher.suites: "
                              "not a cipher suite this OpenSSL offers")
        openssl.append(name)
    if tls13_only:  # no TLS 1.2 suite allowed: TLS 1.3 only
        if ssl.TLSVersion.TLSv1_3 not in enabled:
            raise ConfigError("Invalid value for configuration ssl.cipher.suites: only TLS 1.3 "
                              "suites, and TLS 1.3 is not enabled")
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    context.set_ciphers(":".join(openssl))


# --- key store ------------------------------------------------------------------------------

def _read(location: str, what: str, store_type: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise ConfigError(f"Failed to load SSL {what} {location} of type {store_type}: "
                          f"{exc.strerror or exc}") from None


def _refuse_jks(store_type: str, key: str) -> None:
    if store_type == "JKS":
        raise ConfigError(f"Invalid value JKS for configuration {key}: JKS stores are not "
                          f"supported, use PEM or PKCS12 (set {key}=PEM or PKCS12; keytool "
                          "-importkeystore converts a JKS store to PKCS12)")


def pem_blocks(text: str, kinds: tuple[str, ...]) -> list[str]:
    """The PEM blocks of ``kinds`` in ``text``, each written out anew (64-column base64),
    so that a PEM written on one line, as Kafka accepts it in a properties file, loads too."""
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        if any(match.group(1).endswith(k) for k in kinds):
            body = "".join(match.group(2).split())
            lines = [body[i:i + 64] for i in range(0, len(body), 64)]
            blocks.append("\n".join([f"-----BEGIN {match.group(1)}-----", *lines,
                                     f"-----END {match.group(1)}-----", ""]))
    return blocks


def _pem_key(text: str, password: str | None, source: str) -> Any:
    from cryptography.hazmat.primitives import serialization

    blocks = pem_blocks(text, ("PRIVATE KEY",))
    if not blocks:
        raise ConfigError(f"Invalid SSL key store {source}: no private key in it")
    try:
        return serialization.load_pem_private_key(
            blocks[0].encode(), password.encode() if password else None)
    except TypeError:
        raise ConfigError(f"Invalid SSL key store {source}: the private key is encrypted and "
                          "ssl.key.password is not set") from None
    except ValueError as exc:
        raise ConfigError(f"Invalid SSL key store {source}: cannot read the private key "
                          f"(wrong ssl.key.password?): {exc}") from None


def _pem_certificates(text: str, source: str) -> list[x509.Certificate]:
    from cryptography import x509

    blocks = pem_blocks(text, ("CERTIFICATE",))
    if not blocks:
        raise ConfigError(f"Invalid SSL key store {source}: no certificate in it")
    try:
        return [x509.load_pem_x509_certificate(b.encode()) for b in blocks]
    except ValueError as exc:
        raise ConfigError(f"Invalid SSL key store {source}: {exc}") from None


def _load_keystore(context: ssl.SSLContext, get: Get) -> bool:
    """Load the key store into ``context``; False where none is configured."""
    found = _keystore(get)
    if found is None:
        return False
    _load_chain(context, *found)
    return True


def keystore_identity(config: BrokerConfig, listener: str) -> tuple[str, tuple[str, ...]] | None:
    """The subject and subject alternative names of the certificate in the listener's key
    store (None: no key store); ConfigError when it cannot be read."""
    from cryptography import x509

    found = _keystore(listener_getter(config, listener))
    if found is None:
        return None
    certificate = found[1][0]
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        alternatives = tuple(sorted(str(n.value) for n in names.value))
    except x509.ExtensionNotFound:
        alternatives = ()
    return certificate.subject.rfc4514_string(), alternatives


def _keystore(get: Get) -> tuple[Any, list[x509.Certificate], str] | None:
    """(private key, certificate chain, where it was read) of the key store; None where none
    is configured."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    store_type = get("ssl.keystore.type")
    location = get("ssl.keystore.location")
    chain, inline_key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    store_password, key_password = get("ssl.keystore.password"), get("ssl.key.password")
    if chain or inline_key:
        if store_type != "PEM":
            raise ConfigError(
                "Invalid configuration: ssl.keystore.certificate.chain and ssl.keystore.key "
                f"can be specified only for PEM, but ssl.keystore.type is {store_type}")
        if not (chain and inline_key):
            raise ConfigError("Invalid configuration: ssl.keystore.certificate.chain and "
                              "ssl.keystore.key must be set together")
        if location:
            raise ConfigError("Invalid configuration: both ssl.keystore.location and "
                              "ssl.keystore.certificate.chain are set; use one")
        source = "ssl.keystore.key"
        key = _pem_key(inline_key, key_password, source)
        certificates = _pem_certificates(chain, "ssl.keystore.certificate.chain")
    elif location:
        _refuse_jks(store_type, "ssl.keystore.type")
        data = _read(location, "keystore", store_type)
        source = location
        if store_type == "PEM":
            if store_password:
                raise ConfigError("Invalid configuration: SSL key store password cannot be "
                                  "specified with PEM format, only key password may be "
                                  "specified (ssl.key.password)")
            text = data.decode("utf-8", errors="replace")
            key = _pem_key(text, key_password, location)
            certificates = _pem_certificates(text, location)
        else:
            password = key_password or store_password  # the JDK's: the key's, else the store's
            try:
                loaded = pkcs12.load_key_and_certificates(
                    data, password.encode() if password else None)
            except ValueError as exc:
                raise ConfigError(f"Failed to load SSL keystore {location} of type PKCS12 "
                                  f"(wrong ssl.keystore.password?): {exc}") from None
            key, certificate, extra = loaded
            if key is None or certificate is None:
                raise ConfigError(f"Invalid SSL key store {location}: no private key entry")
            certificates = [certificate, *extra]
    else:
        return None
    return key, certificates, source


def _load_chain(context: ssl.SSLContext, key: Any, certificates: list[x509.Certificate],
                source: str) -> None:
    from cryptography.hazmat.primitives import serialization

    once = secrets.token_urlsafe(24)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(once.encode()))
    pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certificates)
    descriptor, path = tempfile.mkstemp(prefix="samsa-keystore-", suffix=".pem")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(pem)
        context.load_cert_chain(path, password=once)
    except ssl.SSLError as exc:
        raise ConfigError(f"Invalid SSL key store {source}: {exc.reason or exc} (does the "
                          "private key belong to the first certificate?)") from None
    finally:
        os.unlink(path)


# --- trust store ----------------------------------------------------------------------------

def _load_truststore(context: ssl.SSLContext, get: Get) -> bool:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    store_type = get("ssl.truststore.type")
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    password = get("ssl.truststore.password")
    if inline:
        if store_type != "PEM":
            raise ConfigError("Invalid configuration: ssl.truststore.certificates can be "
                              f"specified only for PEM, but ssl.truststore.type is {store_type}")
        if location:
            raise ConfigError("Invalid configuration: both ssl.truststore.location and "
                              "ssl.truststore.certificates are set; use one")
        pem = "".join(pem_blocks(inline, ("CERTIFICATE",)))
        source = "ssl.truststore.certificates"
    elif location:
        _refuse_jks(store_type, "ssl.truststore.type")
        data = _read(location, "truststore", store_type)
        source = location
        if store_type == "PEM":
            if password:
                raise ConfigError("Invalid configuration: SSL trust store password cannot be "
                                  "specified for PEM format.")
            pem = "".join(pem_blocks(data.decode("utf-8", errors="replace"), ("CERTIFICATE",)))
        else:
            try:
                store = pkcs12.load_pkcs12(data, password.encode() if password else None)
            except ValueError as exc:
                raise ConfigError(f"Failed to load SSL truststore {location} of type PKCS12 "
                                  f"(wrong ssl.truststore.password?): {exc}") from None
            found = ([store.cert] if store.cert is not None else []) + list(
                store.additional_certs)
            pem = "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode()
                          for c in found)
    else:
        return False
    if not pem:
        raise ConfigError(f"Invalid SSL trust store {source}: no certificate in it")
    try:
        context.load_verify_locations(cadata=pem)
    except ssl.SSLError as exc:
        raise ConfigError(f"Invalid SSL trust store {source}: {exc.reason or exc}") from None
    return True
