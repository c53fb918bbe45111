"""The Confluent Schema Registry REST API as a Starlette app over a ``Registry``.

Reads are answered by this instance. Writes (register, delete, config, mode) run on the
primary; a secondary forwards them to the primary over HTTP, relays its answer, and reads the
schemas topic up to its end before answering, so that its own next read sees the write.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from samsa.registry import errors
from samsa.registry.election import PrimaryElection
from samsa.registry.errors import RegistryError
from samsa.registry.schema_types import SCHEMA_TYPES
from samsa.registry.service import Registry

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# set on a forwarded request: its receiver answers it or fails, never forwards it again
FORWARDED_HEADER = "x-samsa-registry-forwarded"
_FORWARD_TIMEOUT_S = 30.0
# how long a write waits for the group to have a primary
_ELECTION_WAIT_S = 10.0


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, separators=(",", ":")), status_code=status,
                    media_type=CONTENT_TYPE)


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").strip().lower() == "true"


async def _body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise RegistryError(400, f"Unrecognized request body: {exc}", status=400) from exc


def _schema_id(request: Request) -> int:
    try:
        return int(request.path_params["id"])
    except ValueError:
        raise RegistryError(404, "HTTP 404 Not Found", status=404) from None


class RegistryApp:
    def __init__(self, registry: Registry, election: PrimaryElection | None) -> None:
        self.registry = registry
        self.election = election
        r = self._read
        routes = [
            Route("/", r(lambda q: {}), methods=["GET"]),
            Route("/schemas/types", r(lambda q: list(SCHEMA_TYPES)), methods=["GET"]),
            Route("/schemas/ids/{id}", r(lambda q: registry.schema_by_id(
                _schema_id(q), q.query_params.get("subject"), q.query_params.get("format"))),
                methods=["GET"]),
            Route("/schemas/ids/{id}/schema", self._raw_by_id, methods=["GET"]),
            Route("/schemas/ids/{id}/subjects", r(lambda q: registry.id_subjects(
                _schema_id(q), _flag(q, "deleted"))), methods=["GET"]),
            Route("/schemas/ids/{id}/versions", r(lambda q: registry.id_versions(
                _schema_id(q), _flag(q, "deleted"))), methods=["GET"]),
            Route("/subjects", r(lambda q: registry.subjects(
                _flag(q, "deleted"), q.query_params.get("subjectPrefix", ""))),
                methods=["GET"]),
            Route("/subjects/{subject:path}/versions/{version}/schema", self._raw_version,
                  methods=["GET"]),
            Route("/subjects/{subject:path}/versions/{version}/referencedby",
                  r(lambda q: registry.referenced_by(q.path_params["subject"],
                                                     q.path_params["version"])),
                  methods=["GET"]),
            Route("/subjects/{subject:path}/versions/{version}", self._version,
                  methods=["GET", "DELETE"]),
            Route("/subjects/{subject:path}/versions", self._versions,
                  methods=["GET", "POST"]),
            Route("/subjects/{subject:path}", self._subject, methods=["POST", "DELETE"]),
            Route("/config", self._config, methods=["GET", "PUT", "DELETE"]),
            Route("/config/{subject:path}", self._config, methods=["GET", "PUT", "DELETE"]),
            Route("/mode", self._mode, methods=["GET", "PUT"]),
            Route("/mode/{subject:path}", self._mode, methods=["GET", "PUT", "DELETE"]),
            Route("/compatibility/subjects/{subject:path}/versions/{version}",
                  self._compatibility, methods=["POST"]),
            Route("/compatibility/subjects/{subject:path}/versions", self._compatibility,
                  methods=["POST"]),
        ]
        self.app = Starlette(routes=routes, exception_handlers={
            HTTPException: self._http_error, RegistryError: self._registry_error,
            Exception: self._internal_error})

    # --- plumbing -------------------------------------------------------------------------

    @staticmethod
    async def _http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        reason = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, exc.detail)
        return _json({"error_code": exc.status_code,
                      "message": f"HTTP {exc.status_code} {reason}"}, exc.status_code)

    @staticmethod
    async def _registry_error(request: Request, exc: Exception) -> Response:
        # every RegistryError an endpoint raises is answered here
        assert isinstance(exc, RegistryError)
        return _json(exc.body(), exc.status)

    @staticmethod
    async def _internal_error(request: Request, exc: Exception) -> Response:
        return _json({"error_code": errors.STORE_ERROR, "message": f"Internal error: {exc}"},
                     500)

    @staticmethod
    def _read(answer: Callable[[Request], Any]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return _json(answer(request))
        return endpoint

    async def _write(self, request: Request, operation: Callable[[], Any]) -> Response:
        """Run a write here when this instance is the primary, else forward it."""
        election = self.election
        if election is not None and election.eligible and not election.is_primary:
            # just started, or a rebalance under way: give the group a moment to settle
            await asyncio.to_thread(election.wait_for_primary, _ELECTION_WAIT_S)
        if election is not None and not election.is_primary:
            return await self._forward(request)
        if election is not None and election.needs_catch_up.is_set():
            await asyncio.to_thread(self.registry.store.catch_up)
            election.needs_catch_up.clear()
        return _json(await asyncio.to_thread(self._as_primary, operation))

    def _as_primary(self, operation: Callable[[], Any]) -> Any:
        # the group may have moved the primary while this request waited for its thread
        if self.election is not None and not self.election.is_primary:
            raise RegistryError(errors.UNKNOWN_LEADER, "This instance is no longer the "
                                "primary schema registry; retry the request")
        return operation()

    async def _forward(self, request: Request) -> Response:
        assert self.election is not None
        if request.headers.get(FORWARDED_HEADER):
            raise RegistryError(errors.UNKNOWN_LEADER, "Error while forwarding the request: "
                                "this instance is not the primary")
        primary = await asyncio.to_thread(self.election.wait_for_primary, _ELECTION_WAIT_S)
        if primary is None or primary == self.election.url:
            raise RegistryError(errors.UNKNOWN_LEADER, "Error while forwarding the request: no "
                                "primary schema registry is known")
        url = primary.rstrip("/") + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        body = await request.body()
        status, payload = await asyncio.to_thread(_send, request.method, url, body)
        if status is None:
            raise RegistryError(errors.REQUEST_FORWARDING_FAILED,
                                f"Error while forwarding the request to the primary {primary}: "
                                f"{payload.decode(errors='replace')}")
        if status < 300:
            await asyncio.to_thread(self.registry.store.catch_up)
        return Response(payload, status_code=status, media_type=CONTENT_TYPE)

    # --- resources ------------------------------------------------------------------------

    async def _raw_by_id(self, request: Request) -> Response:
        found = self.registry.schema_by_id(_schema_id(request),
                                           request.query_params.get("subject"))
        return Response(found["schema"], media_type=CONTENT_TYPE)

    async def _raw_version(self, request: Request) -> Response:
        found = self.registry.version(request.path_params["subject"],
                                      request.path_params["version"], _flag(request, "deleted"))
        return Response(found["schema"], media_type=CONTENT_TYPE)

    async def _version(self, request: Request) -> Response:
        subject, version = request.path_params["subject"], request.path_params["version"]
        if request.method == "GET":
            return _json(self.registry.version(subject, version, _flag(request, "deleted"),
                                               request.query_params.get("format")))
        permanent = _flag(request, "permanent")
        return await self._write(request, lambda: self.registry.delete_version(
            subject, version, permanent))

    async def _versions(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        if request.method == "GET":
            return _json(self.registry.versions(subject, _flag(request, "deleted")))
        body = await _body(request)
        return await self._write(request, lambda: self.registry.register(subject, body))

    async def _subject(self, request: Request) -> Response:
        subject = request.path_params["subject"]
        if request.method == "POST":
            body = await _body(request)
            return _json(self.registry.lookup(subject, body, _flag(request, "deleted")))
        permanent = _flag(request, "permanent")
        return await self._write(request, lambda: self.registry.delete_subject(
            subject, permanent))

    async def _config(self, request: Request) -> Response:
        subject = request.path_params.get("subject")
        if request.method == "GET":
            return _json(self.registry.config(subject, _flag(request, "defaultToGlobal")))
        if request.method == "DELETE":
            return await self._write(request, lambda: self.registry.delete_config(subject))
        body = await _body(request)
        return await self._write(request, lambda: self.registry.set_config(subject, body))

    async def _mode(self, request: Request) -> Response:
        subject = request.path_params.get("subject")
        if request.method == "GET":
            return _json(self.registry.mode(subject, _flag(request, "defaultToGlobal")))
        if request.method == "DELETE":
            assert subject is not None
            return await self._write(request, lambda: self.registry.delete_mode(subject))
        body = await _body(request)
        force = _flag(request, "force")
        return await self._write(request, lambda: self.registry.set_mode(subject, body, force))

    async def _compatibility(self, request: Request) -> Response:
        body = await _body(request)
        return _json(self.registry.check_compatibility(
            request.path_params["subject"], request.path_params.get("version"), body,
            _flag(request, "verbose")))


def _send(method: str, url: str, body: bytes) -> tuple[int | None, bytes]:
    """One HTTP request to the primary: (status, body), or (None, why) when none came back."""
    request = urllib.request.Request(url, data=body or None, method=method, headers={
        "Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE, FORWARDED_HEADER: "1"})
    try:
        with urllib.request.urlopen(request, timeout=_FORWARD_TIMEOUT_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        return None, str(getattr(exc, "reason", exc)).encode()
