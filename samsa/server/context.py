"""What a handler gets besides the decoded request body."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.protocol.codec import Request

if TYPE_CHECKING:
    from samsa.server.connection import Connection
    from samsa.server.kafka_server import KafkaServer


@dataclass(frozen=True, slots=True)
class RequestContext:
    server: KafkaServer
    request: Request
    connection: Connection | None

    @property
    def version(self) -> int:
        return self.request.api_version

    @property
    def client_id(self) -> str:
        return self.request.client_id
