"""The registry tests' helpers: an HTTP client of the REST API (the standard library's, so
what is sent is plain to see), a registry beside a real embedded broker, Avro records."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from samsa.embedded import Broker
from samsa.registry import SchemaRegistry

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


@dataclass
class Answer:
    status: int
    body: Any
    text: str
    content_type: str

    @property
    def error_code(self) -> int | None:
        return self.body.get("error_code") if isinstance(self.body, dict) else None


class Http:
    """A tiny client of one registry's REST API."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             content_type: str = CONTENT_TYPE) -> Answer:
        data = raw if raw is not None else (
            None if body is None else json.dumps(body).encode())
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, text = response.status, response.read().decode()
                kind = response.headers.get("Content-Type", "")
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read().decode()
            kind = exc.headers.get("Content-Type", "")
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        return Answer(status, parsed, text, kind)

    def get(self, path: str) -> Answer:
        return self.call("GET", path)

    def post(self, path: str, body: Any = None, **kw: Any) -> Answer:
        return self.call("POST", path, body, **kw)

    def put(self, path: str, body: Any = None) -> Answer:
        return self.call("PUT", path, body)

    def delete(self, path: str) -> Answer:
        return self.call("DELETE", path)

    def register(self, subject: str, schema: Any, schema_type: str | None = None,
                 **extra: Any) -> Answer:
        body: dict[str, Any] = {
            "schema": schema if isinstance(schema, str) else json.dumps(schema), **extra}
        if schema_type is not None:
            body["schemaType"] = schema_type
        return self.post(f"/subjects/{subject}/versions", body)


def start_registry(broker: Broker, **settings: str) -> SchemaRegistry:
    registry = SchemaRegistry({"kafkastore.bootstrap.servers": broker.bootstrap_servers,
                               "listeners": "http://127.0.0.1:0", **settings})
    registry.start()
    return registry


def record(name: str, *fields: tuple[str, Any] | tuple[str, Any, Any]) -> dict[str, Any]:
    """An Avro record schema: fields as (name, type) or (name, type, default)."""
    found = []
    for f in fields:
        entry: dict[str, Any] = {"name": f[0], "type": f[1]}
        if len(f) == 3:
            entry["default"] = f[2]
        found.append(entry)
    return {"type": "record", "name": name, "fields": found}
