"""The table of APIs the broker serves: one entry per API key, registered by its handler.

ApiVersions advertises exactly this table, so what is advertised is what is implemented.
A handler is an async function (context, decoded request) -> response fields as a dict, or
None when the request gets no response (Produce with acks=0).

The request is typed as kio's class of the newest version the handler serves. An older version
decodes to its own class: a field it lacks is read with ``getattr`` and a default; a field that
a later version removed is read behind a version check, through a ``cast`` to the class of the
last version that has it.
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

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


APIS: dict[int, Api] = {}


def api(key: int, name: str, min_version: int, max_version: int) -> Callable[[HandlerT], HandlerT]:
    """Register the decorated coroutine as the handler of ``key`` for these versions."""

    def register(handle: HandlerT) -> HandlerT:
        if key in APIS:
            raise RuntimeError(f"api key {key} registered twice")
        APIS[key] = Api(key, name, min_version, max_version, handle)
        return handle

    return register
