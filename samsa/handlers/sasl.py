"""SaslHandshake (17), SaslAuthenticate (36), DescribeUserScramCredentials (50),
AlterUserScramCredentials (51).

The SASL exchange itself is the connection's (``samsa.server.sasl``): these handlers see
SaslHandshake and SaslAuthenticate only where Kafka's KafkaApis does, on a connection that is
not authenticating (a non-SASL listener, or after authentication without a session limit), and
answer ILLEGAL_SASL_STATE as it does. Registering them here is what advertises their versions
in ApiVersions.

The SCRAM admin APIs go to the broker's credential store (``samsa.cluster.scram``: the metadata
dir of a single node, ZooKeeper in a cluster, where any broker answers them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.cluster.scram import Deletion, Upsertion, UserResult
from samsa.errors import ErrorCode
from samsa.handlers.authz import MESSAGES, authorize_cluster
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.security.acl import AclOperation

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.alter_user_scram_credentials.v0.request import (
        AlterUserScramCredentialsRequest,
    )
    from kio.schema.describe_user_scram_credentials.v0.request import (
        DescribeUserScramCredentialsRequest,
    )
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest


@api(17, "SaslHandshake", 0, 1)
async def sasl_handshake(ctx: RequestContext, request: SaslHandshakeRequest) -> dict[str, Any]:
    return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}


@api(36, "SaslAuthenticate", 0, 2)
async def sasl_authenticate(ctx: RequestContext, request: SaslAuthenticateRequest
                            ) -> dict[str, Any]:
    return {"error_code": ErrorCode.illegal_sasl_state,
            "error_message": "SaslAuthenticate request received after successful "
                             "authentication",
            "auth_bytes": b"", "session_lifetime": 0}


def _results(results: list[UserResult]) -> list[dict[str, Any]]:
    return [{"user": r.user, "error_code": r.error, "error_message": r.message,
             "credential_infos": [{"mechanism": m, "iterations": i} for m, i in r.credentials]}
            for r in results]


@api(50, "DescribeUserScramCredentials", 0, 0)
async def describe_user_scram_credentials(
        ctx: RequestContext, request: DescribeUserScramCredentialsRequest) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):  # the whole request, as Kafka's
        error = ErrorCode.cluster_authorization_failed
        return {"throttle_time": 0, "error_code": error, "error_message": MESSAGES[error],
                "results": []}
    store = ctx.server.scram_store
    if store is None:
        return {"throttle_time": 0, "error_code": ErrorCode.coordinator_not_available,
                "error_message": "the broker is starting", "results": []}
    users = None if request.users is None else [u.name for u in request.users]
    error, message, results = await store.describe(users)
    return {"throttle_time": 0, "error_code": error, "error_message": message,
            "results": _results(results)}


@api(51, "AlterUserScramCredentials", 0, 0)
async def alter_user_scram_credentials(
        ctx: RequestContext, request: AlterUserScramCredentialsRequest) -> dict[str, Any]:
    deletions = [Deletion(d.name, int(d.mechanism)) for d in request.deletions]
    upsertions = [Upsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt),
                            bytes(u.salted_password)) for u in request.upsertions]
    store = ctx.server.scram_store
    refused = None
    if not authorize_cluster(ctx, AclOperation.ALTER):  # every user's result, as Kafka's
        refused = (ErrorCode.cluster_authorization_failed,
                   MESSAGES[ErrorCode.cluster_authorization_failed])
    if refused is not None or store is None:
        refused = refused or (ErrorCode.coordinator_not_available, "the broker is starting")
        users = dict.fromkeys([d.user for d in deletions] + [u.user for u in upsertions])
        return {"throttle_time": 0, "results": [
            {"user": u, "error_code": refused[0], "error_message": refused[1]}
            for u in users]}
    results = await store.alter(deletions, upsertions)
    return {"throttle_time": 0, "results": [
        {"user": r.user, "error_code": r.error, "error_message": r.message} for r in results]}
