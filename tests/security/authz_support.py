"""What the authorization tests share: a broker with the ACL authorizer, raw protocol
connections as a chosen principal, and ACLs created and removed over the wire.

The matrix runs over PLAINTEXT, where every client is ``User:ANONYMOUS``. For its admin the
tests stand in for authentication the way the broker does it: the broker's connection object
of a test's socket gets its ``principal`` (what the TLS handshake, and SASL when it lands, set
per connection). ``User:admin`` (a super user) creates and deletes ACLs over the wire; the
requests under test run as ``User:ANONYMOUS`` with ACLs granted and revoked for it. Real
principals from TLS client certificates are tested in test_acl_apis.py; with SASL the matrix
can connect with credentials instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kafka_frames import FrameClient
from waiting import wait_for

import samsa
from samsa.security.acl import (
    ANONYMOUS_PRINCIPAL,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.security.principal import KafkaPrincipal

ADMIN = "User:admin"
ANONYMOUS = ANONYMOUS_PRINCIPAL
AUTHORIZER = "samsa.security.AclAuthorizer"
CREATE_ACLS, DESCRIBE_ACLS, DELETE_ACLS = 30, 29, 31
ACL_VERSION = 2  # the version the Java admin client sends to Kafka 3.x (librdkafka 2.x: 1)
AUTHORIZATION_ERRORS = frozenset({29, 30, 31, 53})


def authorizing_broker(data_dir: Any, **config: Any) -> samsa.Broker:
    """An embedded broker with the ACL authorizer and ``User:admin`` as its super user."""
    settings = {"authorizer.class.name": AUTHORIZER, "super.users": ADMIN,
                "auto.create.topics.enable": "true"}
    settings.update(config)
    return samsa.Broker(data_dir, config=settings)


def connect_as(broker: samsa.Broker, principal: str | None = None) -> FrameClient:
    """A raw connection; ``principal``: what the broker's connection is marked as (the
    stand-in for authentication), else it stays anonymous."""
    client = FrameClient(broker.bootstrap_servers)
    if principal is not None:
        local = f":{client.sock.getsockname()[1]}"

        def connection() -> Any:
            return next((c for c in list(broker.server.connections)
                         if c.peer.endswith(local)), None)

        kind, name = principal.split(":", 1)
        wait_for(connection, timeout=10, what="the broker to accept the connection").principal \
            = KafkaPrincipal(kind, name)
    return client


@dataclass(frozen=True)
class Acl:
    """An ACL to grant (ALLOW, LITERAL, any host, to ``User:ANONYMOUS`` unless told)."""

    resource_type: ResourceType
    name: str
    operation: AclOperation
    principal: str = ANONYMOUS
    permission: AclPermissionType = AclPermissionType.ALLOW
    pattern_type: PatternType = PatternType.LITERAL
    host: str = "*"

    def creation(self) -> dict[str, Any]:
        return {"resource_type": int(self.resource_type), "resource_name": self.name,
                "resource_pattern_type": int(self.pattern_type), "principal": self.principal,
                "host": self.host, "operation": int(self.operation),
                "permission_type": int(self.permission)}


MATCH_ALL = {"resource_type_filter": int(ResourceType.ANY), "resource_name_filter": None,
             "pattern_type_filter": int(PatternType.ANY), "principal_filter": None,
             "host_filter": None, "operation": int(AclOperation.ANY),
             "permission_type": int(AclPermissionType.ANY)}


def grant(admin: FrameClient, acls: Iterable[Acl]) -> None:
    acls = list(acls)
    if not acls:
        return
    response = admin.request(CREATE_ACLS, ACL_VERSION,
                             {"creations": [a.creation() for a in acls]})
    assert [(r.error_code, r.error_message) for r in response.results] == \
        [(0, None)] * len(acls), response


def revoke_all(admin: FrameClient) -> None:
    response = admin.request(DELETE_ACLS, ACL_VERSION, {"filters": [MATCH_ALL]})
    assert response.filter_results[0].error_code == 0, response


def describe_all(admin: FrameClient) -> Any:
    response = admin.request(DESCRIBE_ACLS, ACL_VERSION, MATCH_ALL)
    assert response.error_code == 0, response
    return response
