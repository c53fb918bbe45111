"""How a SASL exchange fails, as Kafka's SaslServer implementations fail.

* ``SaslAuthenticationError`` (Kafka's SaslAuthenticationException): its message is what the
  client is told, e.g. "Authentication failed: Invalid username or password".
* ``SaslError`` (Kafka's javax SaslException): the reason stays in the broker's log; the
  client is told only "Authentication failed during authentication due to invalid credentials
  with SASL mechanism <mechanism>", so that it cannot learn, say, which users exist.
"""

from __future__ import annotations


class SaslError(Exception):
    """A failed exchange whose reason the client is not told."""


class SaslAuthenticationError(SaslError):
    """A failed exchange whose message the client is told."""
