"""Throwaway certificate authorities, for the embedded broker's TLS and for tests: a CA, and
certificates it signs for brokers (names and addresses in the subject alternative names) and
clients (any subject name), with any validity, written as PEM files.

    ca = CertificateAuthority()
    broker = ca.issue("CN=localhost", hosts=["127.0.0.1", "localhost"])
    broker.write_keystore(tmp / "broker.pem")          # ssl.keystore.type=PEM
    ca.write(tmp / "ca.pem")                            # ssl.truststore.location / ssl.ca.location
    client = ca.issue("CN=alice,OU=eng,O=Example")
    cert_file, key_file = client.write(tmp, "alice")    # ssl.certificate/key.location

Keys are EC P-256 (fast to make); nothing here is meant for production.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _private(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class Issued:
    """A certificate, its private key, and the CA certificate that signed it."""

    certificate: x509.Certificate
    key: Any  # ec.EllipticCurvePrivateKey
    ca_certificate: x509.Certificate

    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def chain_pem(self) -> bytes:
        """The certificate, then the CA's (ssl.keystore.certificate.chain)."""
        return self.certificate_pem() + self.ca_certificate.public_bytes(
            serialization.Encoding.PEM)

    def key_pem(self, password: str | None = None) -> bytes:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode()) if password
            else serialization.NoEncryption())
        return self.key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8, encryption)

    def write(self, directory: Path, name: str, password: str | None = None
              ) -> tuple[Path, Path]:
        """``<name>.pem`` (the certificate and the CA's) and ``<name>.key``."""
        directory.mkdir(parents=True, exist_ok=True)
        cert = directory / f"{name}.pem"
        cert.write_bytes(self.chain_pem())
        return cert, _private(directory / f"{name}.key", self.key_pem(password))

    def write_keystore(self, path: Path, key_password: str | None = None) -> Path:
        """One PEM file with the key and the chain (ssl.keystore.type=PEM)."""
        return _private(path, self.key_pem(key_password) + self.chain_pem())

    def write_pkcs12(self, path: Path, password: str) -> Path:
        """A PKCS12 key store (ssl.keystore.type=PKCS12)."""
        data = pkcs12.serialize_key_and_certificates(
            b"samsa", self.key, self.certificate, [self.ca_certificate],
            serialization.BestAvailableEncryption(password.encode()))
        return _private(path, data)


class CertificateAuthority:
    def __init__(self, subject: str = "CN=samsa throwaway CA") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        name = x509.Name.from_rfc4514_string(subject)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.key.public_key()),
                           critical=False)
            .sign(self.key, hashes.SHA256())
        )

    def certificate_pem(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.PEM)

    def write(self, path: Path) -> Path:
        """The CA certificate (a PEM trust store)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.certificate_pem())
        return path

    def write_pkcs12_truststore(self, path: Path, password: str) -> Path:
        data = pkcs12.serialize_java_truststore(
            [pkcs12.PKCS12Certificate(self.certificate, b"ca")],
            serialization.BestAvailableEncryption(password.encode()))
        path.write_bytes(data)
        return path

    def issue(self, subject: str, hosts: Iterable[str] = (), *,
              not_before: datetime.datetime | None = None,
              not_after: datetime.datetime | None = None) -> Issued:
        """A certificate for ``subject`` (RFC 4514, e.g. ``CN=alice,O=Example``), good for
        both TLS server and client authentication, naming ``hosts`` (IP addresses or DNS
        names) as subject alternative names. Valid from a minute ago for 30 days unless
        ``not_before`` / ``not_after`` say otherwise (in the past: an expired one)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = _now()
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name.from_rfc4514_string(subject))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - datetime.timedelta(minutes=1))
            .not_valid_after(not_after or now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                self.key.public_key()), critical=False)
        )
        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return Issued(builder.sign(self.key, hashes.SHA256()), key, self.certificate)
