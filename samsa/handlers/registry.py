"""The table of APIs the broker serves: one entry per API key, registered by its handler.

ApiVersions advertises exactly this table, so what is advertised is what is implemented.
A handler is an async function (context, decoded request) -> response fields as a dict, or
None when the request gets no response (Produce with acks=0).

The request is typed as kio's class of the newest version the handler serves. An older version
decodes to its own class: a field it lacks is read with ``getattr`` and a default; a field that
a later version removed is read behind a version check, through a ``cast`` to the class of the
last version that has it.

What ApiVersions advertises is what is served, with one exception that Kafka 4 makes too
(KAFKA-18659): Produce is advertised from v0 while only v3 and later are served. librdkafka
before 2.11.1 sends gzip, snappy and lz4 batches uncompressed unless the broker advertises a
Produce range reaching down to v0; a request of v0-v2 closes the connection, as one of any
version that is not served does (Kafka's SocketServer, an unsupported version).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from samsa.handlers.context import RequestContext

Handler = Callable[["RequestContext", Any], Awaitable[dict[str, Any] | None]]
# Any handler, whatever kio class its request has; ``api`` returns it with its own signature.
HandlerT = TypeVar("HandlerT", bound=Handler)


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handle: Handler
    advertised_min_version: int  # min_version but for Produce (see above)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


APIS: dict[int, Api] = {}


def api(
    key: int, name: str, min_version: int, max_version: int, *,
    advertised_min_version: int | None = None,
) -> Callable[[HandlerT], HandlerT]:
    """Register the decorated coroutine as the handler of ``key`` for these versions;
    ApiVersions advertises them from ``advertised_min_version`` (default: ``min_version``)."""
    advertised = min_version if advertised_min_version is None else advertised_min_version
    if advertised > min_version:
        raise ValueError(f"api key {key}: a served version would not be advertised")

    def register(handle: HandlerT) -> HandlerT:
        if key in APIS:
            raise RuntimeError(f"api key {key} registered twice")
        APIS[key] = Api(key, name, min_version, max_version, handle, advertised)
        return handle

    return register
