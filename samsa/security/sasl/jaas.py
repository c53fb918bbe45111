"""Kafka's ``sasl.jaas.config``: one JAAS login module, its control flag and its options, parsed
as Kafka's ``JaasConfig`` parses it (a ``java.io.StreamTokenizer`` with Kafka's syntax table).

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

* Whitespace (every character up to the space) separates tokens; ``;`` and ``=`` are tokens of
  their own; everything else up to them is a word (so ``user_alice=alice-secret`` needs no
  quotes).
* ``"..."`` and ``'...'`` quote a value; inside, a backslash escapes (``\\"``, ``\\\\``, and
  Java's ``\\n``, ``\\t``, ``\\r``, ``\\b``, ``\\f``, ``\\a``, ``\\v`` and octal ``\\ddd``);
  a quoted value ends at its closing quote or at the end of the line.
* ``/`` starts a comment (``//`` and ``/* */`` too): a value with a slash, such as a URL, must
  be quoted.
* The entry ends with ``;``; the control flag is required, requisite, sufficient or optional
  (any case). Kafka's ``sasl.jaas.config`` takes exactly one login module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from samsa.config import ConfigError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
CONTROL_FLAGS = ("required", "requisite", "sufficient", "optional")

_WORD, _QUOTED, _EOF = "word", "quoted", "eof"
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class JaasError(ConfigError):
    """A sasl.jaas.config value that Kafka would refuse."""


@dataclass(frozen=True)
class LoginModule:
    """One entry: the login module's class name, its control flag (lower case), its options."""

    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value) of every token: words, quoted strings, and ``;`` / ``=`` as themselves."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c <= " ":
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # a comment character and '//' alike: to the end of the line
                end = text.find("\n", i)
                i = n if end < 0 else end + 1
        elif c in ";=":
            tokens.append((c, c))
            i += 1
        elif c in "\"'":
            value, i = _quoted(text, i + 1, c)
            tokens.append((_QUOTED, value))
        else:
            start = i
            while i < n and text[i] > " " and text[i] not in ";=\"'/":
                i += 1
            tokens.append((_WORD, text[start:i]))
    return tokens


def _quoted(text: str, i: int, quote: str) -> tuple[str, int]:
    """The string after an opening quote at ``i``, and where the text goes on (StreamTokenizer:
    it ends at the quote, or at the end of the line, which is then the next character)."""
    out: list[str] = []
    n = len(text)
    while i < n:
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c in "\n\r":
            return "".join(out), i
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if "0" <= nxt <= "7":  # octal: up to three digits, the first up to 3
                j = i + 1
                digits = ""
                limit = 3 if nxt <= "3" else 2
                while j < n and len(digits) < limit and "0" <= text[j] <= "7":
                    digits += text[j]
                    j += 1
                out.append(chr(int(digits, 8)))
                i = j
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out), i


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> list[LoginModule]:
    """Every login module entry of ``text`` (Kafka's JaasConfig); JaasError names ``key``."""

    def fail(message: str) -> JaasError:
        return JaasError(f"Invalid value for configuration {key}: {message}")

    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0

    def take() -> tuple[str, str]:
        nonlocal i
        if i >= len(tokens):
            return _EOF, ""
        token = tokens[i]
        i += 1
        return token

    while i < len(tokens):
        kind, name = take()
        if kind not in (_WORD, _QUOTED):
            raise fail(f"a login module class name was expected, found '{name}'")
        kind, flag = take()
        if kind == _EOF:
            raise fail("Login module control flag not specified in JAAS config")
        if kind not in (_WORD, _QUOTED) or flag.lower() not in CONTROL_FLAGS:
            raise fail(f"Invalid login module control flag '{flag}' in JAAS config")
        options: dict[str, str] = {}
        while True:
            kind, option = take()
            if kind in (_EOF, ";"):
                break
            if kind == "=":
                raise fail("an option name was expected before '='")
            if take()[0] != "=":
                raise fail(f"Value not specified for key '{option}' in JAAS config")
            kind, value = take()
            if kind not in (_WORD, _QUOTED):
                raise fail(f"Value not specified for key '{option}' in JAAS config")
            options[option] = value
        if kind != ";":
            raise fail("JAAS config entry not terminated by semi-colon")
        modules.append(LoginModule(name, flag.lower(), options))
    if not modules:
        raise fail("Login module not specified in JAAS config")
    return modules


def parse_login_module(text: str, key: str = "sasl.jaas.config") -> LoginModule:
    """The one login module of a ``sasl.jaas.config`` value (Kafka's JaasContext.load)."""
    modules = parse_jaas_config(text, key)
    if len(modules) != 1:
        raise JaasError(f"Invalid value for configuration {key}: JAAS config property contains "
                        f"{len(modules)} login modules, should be 1 module")
    return modules[0]


def quote(value: str) -> str:
    """``value`` as a quoted JAAS option value that parses back to itself."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped.replace("\r", "\\r") + '"'


def jaas_config(module: str, options: dict[str, str], flag: str = "required") -> str:
    """A ``sasl.jaas.config`` value: ``module flag key="value" ...;``."""
    parts = [module, flag, *(f"{k}={quote(v)}" for k, v in options.items())]
    return " ".join(parts) + ";"
