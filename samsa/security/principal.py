"""Who a connection is: Kafka's ``KafkaPrincipal`` (``User:name``), as its
``DefaultKafkaPrincipalBuilder`` makes it.

* PLAINTEXT, and TLS without a client certificate: ``User:ANONYMOUS``.
* TLS with a client certificate: ``User:`` + the certificate's subject name, in the form the
  JDK's ``X500Principal.getName()`` gives Kafka (RFC 2253: the most specific name first,
  ``CN=client,OU=eng,O=Example,C=US``), passed through ``ssl.principal.mapping.rules``
  (``SslPrincipalMapper``: ``RULE:pattern/replacement/[LU]`` rules, the first that matches the
  whole name wins, ``DEFAULT`` keeps the name as it is; no rule matching fails the
  authentication).

* SASL (SASL_PLAINTEXT, SASL_SSL, ``samsa.server.sasl``): ``User:`` + the authorization id of
  the exchange (the user name; an OAUTHBEARER token's subject), on SASL_SSL too, whatever
  certificate the client showed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from samsa.config import ConfigError

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


class NoMatchingRule(Exception):
    """No rule of ssl.principal.mapping.rules applies to a certificate's name."""


# --- SslPrincipalMapper ---------------------------------------------------------------------

_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)")

Part = str | int  # a literal, or a group of the match


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if self.pattern.fullmatch(name) is None:
            return None
        parts = _java_replacement(
            _escape_literal_back_references(self.replacement, self.pattern.groups),
            self.pattern.groups)
        result = self.pattern.sub(_substitute(parts), name)
        if self.lower:
            return result.lower()
        return result.upper() if self.upper else result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = "/L" if self.lower else "/U" if self.upper else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{case}"


def _escape_literal_back_references(text: str, groups: int) -> str:
    """Kafka's (from NiFi): ``$4`` with fewer groups is the literal ``$4``, ``$12`` with 1 to
    11 groups is ``$1`` then ``2``."""
    if groups == 0:
        return text
    value = text
    for match in _BACK_REFERENCE.finditer(text):
        digits = match.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:  # (positions in the original text, as Kafka's loop has them)
            start = match.start(1) - 1
            value = value[:start] + "\\" + value[start:]
    return value


def _java_replacement(text: str, groups: int) -> list[Part]:
    """A java.util.regex replacement string: ``\\x`` is a literal x, ``$n`` a group (the
    longest number that names one), anything else itself."""
    parts: list[Part] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            literal.append(text[i + 1])
            i += 2
            continue
        if c == "$":
            j = i + 1
            if j >= len(text) or not text[j].isdigit():
                raise ConfigError(f"Invalid value {text} for configuration "
                                  "ssl.principal.mapping.rules: illegal group reference")
            number = int(text[j])
            j += 1
            while j < len(text) and text[j].isdigit() and number * 10 + int(text[j]) <= groups:
                number = number * 10 + int(text[j])
                j += 1
            if number > groups:
                raise ConfigError(f"Invalid value {text} for configuration "
                                  f"ssl.principal.mapping.rules: no group {number}")
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(number)
            i = j
            continue
        literal.append(c)
        i += 1
    if literal:
        parts.append("".join(literal))
    return parts


def _substitute(parts: list[Part]) -> Callable[[re.Match[str]], str]:
    def build(match: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in parts)

    return build


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``, parsed as Kafka's SslPrincipalMapper parses them."""

    def __init__(self, rules: str | None = "DEFAULT") -> None:
        text = "DEFAULT" if rules is None else rules
        self.rules: list[_Rule] = []
        for match in _RULE_SPLITTER.finditer(text.strip()):
            rule = match.group(1)
            self.rules.extend(_parse_rule(rule))

    def name(self, distinguished_name: str) -> str:
        for rule in self.rules:
            found = rule.apply(distinguished_name)
            if found is not None:
                return found
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules "
                             f"[{', '.join(str(r) for r in self.rules)}]")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(str(r) for r in self.rules)}])"


def _parse_rule(rule: str) -> list[_Rule]:
    key = "ssl.principal.mapping.rules"
    match = _RULE_PARSER.match(rule)
    if match is None:
        raise ConfigError(f"Invalid value {rule} for configuration {key}: invalid rule")
    if match.end() != len(rule):
        raise ConfigError(f"Invalid value {rule} for configuration {key}: invalid rule, "
                          f"unmatched substring: `{rule[match.end():]}`")
    if match.group(1) is not None:
        return [_Rule(None)]
    if match.group(2) is None:
        return []  # empty rules are ignored
    try:
        pattern = re.compile(match.group(2))
    except re.error as exc:
        raise ConfigError(f"Invalid value {rule} for configuration {key}: {exc}") from None
    parsed = _Rule(pattern, match.group(4), match.group(6) == "L", match.group(6) == "U")
    # a replacement that refers to a group the pattern lacks fails here, not at a handshake
    _java_replacement(_escape_literal_back_references(parsed.replacement, pattern.groups),
                      pattern.groups)
    return [parsed]


# --- the subject name as the JDK writes it (X500Principal.getName(), RFC 2253) --------------

# the attribute types the JDK writes by keyword in RFC 2253 (AVAKeyword); others as OIDs
_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types and how their bytes read (AVA.isDerString, non-canonical)
_STRING_TAGS = {0x0C: "utf-8", 0x13: "ascii", 0x14: "latin-1", 0x16: "ascii", 0x1B: "ascii",
                0x1E: "utf-16-be"}
_ESCAPED = set(',=+<>#;"\\')


def _tlv(data: bytes, at: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at ``at``."""
    tag = data[at]
    length = data[at + 1]
    at += 2
    if length & 0x80:
        count = length & 0x7F
        length = int.from_bytes(data[at:at + count], "big")
        at += count
    return tag, at, at + length


def _oid(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(a) for a in head + arcs[1:])


def _value_string(value: str) -> str:
    out: list[str] = []
    for c in value:
        if c in _ESCAPED:
            out.append("\\" + c)
        elif c == "\0":
            out.append("\\00")
        else:
            out.append(c)
    # leading and trailing spaces (and CRs) escaped
    lead = 0
    while lead < len(out) and out[lead] in (" ", "\r"):
        lead += 1
    trail = len(out) - 1
    while trail >= 0 and out[trail] in (" ", "\r"):
        trail -= 1
    return "".join("\\" + c if i < lead or i > trail else c for i, c in enumerate(out))


def _attribute(der: bytes, start: int, end: int) -> tuple[bool, str]:
    """One AttributeTypeAndValue in RFC 2253 form, and whether its type has a keyword."""
    _, oid_start, oid_end = _tlv(der, start)
    oid = _oid(der[oid_start:oid_end])
    value_tag, value_start, value_end = _tlv(der, oid_end)
    keyword = _KEYWORDS.get(oid)
    encoding = _STRING_TAGS.get(value_tag)
    if keyword is None or encoding is None:
        return keyword is not None, f"{keyword or oid}=#{der[oid_end:value_end].hex()}"
    text = der[value_start:value_end].decode(encoding, errors="replace")
    return True, f"{keyword}={_value_string(text)}"


def rfc2253_name(name_der: bytes) -> str:
    """An X.500 Name (DER) as ``X500Principal.getName()`` writes it: the RDNs in reverse
    order, joined by commas; the AVAs of a multi-valued RDN joined by ``+``."""
    _, at, end = _tlv(name_der, 0)
    rdns: list[str] = []
    while at < end:
        _, set_start, set_end = _tlv(name_der, at)
        avas: list[tuple[bool, str]] = []
        inner = set_start
        while inner < set_end:
            _, ava_start, ava_end = _tlv(name_der, inner)
            avas.append(_attribute(name_der, ava_start, ava_end))
            inner = ava_end
        if len(avas) > 1:  # the JDK's AVAComparator: keyword types first, then by text
            avas.sort(key=lambda a: (not a[0], a[1].lower()))
        rdns.append("+".join(text for _, text in avas))
        at = set_end
    return ",".join(reversed(rdns))


def certificate_subject(certificate_der: bytes) -> str:
    """The subject of a DER certificate as Kafka's principal builder sees it."""
    from cryptography import x509  # only with TLS: its import takes a while

    certificate = x509.load_der_x509_certificate(certificate_der)
    return rfc2253_name(certificate.subject.public_bytes())


def ssl_principal(peer_certificate_der: bytes | None, mapper: SslPrincipalMapper
                  ) -> KafkaPrincipal:
    """DefaultKafkaPrincipalBuilder for a TLS connection (NoMatchingRule: refused)."""
    if peer_certificate_der is None:
        return ANONYMOUS
    return KafkaPrincipal(USER_TYPE, mapper.name(certificate_subject(peer_certificate_der)))
