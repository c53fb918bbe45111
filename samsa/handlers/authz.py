"""Authorization: the one gate every handler asks (DESIGN.md, "cross-cutting concerns at one
gate"), and the table of what each API needs, after Kafka's ``KafkaApis`` and ``AuthHelper``.

A request's principal and client host come from its connection (``RequestContext.principal``,
``client_host``): ``User:ANONYMOUS`` until authentication sets another. With no authorizer
configured (``authorizer.class.name`` empty, the default) every call here answers "allowed"
after one attribute check, so the hot path pays nothing more; handlers test
``ctx.server.authorizer is None`` once per request before any per-topic work.

Resources are named as Kafka's ``ResourcePattern(type, name, LITERAL)``: the cluster is
``kafka-cluster``. A denied request gets the error of the resource type it was denied on
(``AUTHORIZATION_ERRORS``: TOPIC_AUTHORIZATION_FAILED 29, GROUP_AUTHORIZATION_FAILED 30,
CLUSTER_AUTHORIZATION_FAILED 31, TRANSACTIONAL_ID_AUTHORIZATION_FAILED 53).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.errors import ErrorCode
from samsa.security.acl import (
    AUTHORIZATION_ERRORS,
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
)

if TYPE_CHECKING:
    from samsa.handlers.context import RequestContext

Op = AclOperation
Res = ResourceType

# Kafka's "authorized operations not requested" (or not computed) sentinel.
OPERATIONS_NOT_REQUESTED = -(2**31)

# Kafka's messages (Errors.java) for the authorization errors, where a response carries one.
MESSAGES = {
    ErrorCode.topic_authorization_failed: "Topic authorization failed.",
    ErrorCode.group_authorization_failed: "Group authorization failed.",
    ErrorCode.cluster_authorization_failed: "Cluster authorization failed.",
    ErrorCode.transactional_id_authorization_failed: "Transactional Id authorization failed.",
}


def authorize(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
              name: str) -> bool:
    """May the request's principal perform ``operation`` on the resource ``name``?"""
    authorizer = ctx.server.authorizer
    return authorizer is None or authorizer.authorize(
        ctx.principal, ctx.client_host, operation, resource_type, name)


def authorize_cluster(ctx: RequestContext, operation: AclOperation) -> bool:
    """``operation`` on the cluster (``kafka-cluster``)."""
    return authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def authorized(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
               names: Iterable[str]) -> set[str]:
    """The batch form (Kafka's ``filterByAuthorized``): which of ``names`` the principal may
    ``operation``; each name is decided once, however often a request repeats it."""
    authorizer = ctx.server.authorizer
    if authorizer is None:
        return set(names)
    principal, host = ctx.principal, ctx.client_host
    return {name for name in set(names)
            if authorizer.authorize(principal, host, operation, resource_type, name)}


def unauthorized(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
                 names: Iterable[str]) -> set[str]:
    """The complement of :func:`authorized`: which of ``names`` are denied (none without an
    authorizer)."""
    if ctx.server.authorizer is None:
        return set()
    names = set(names)
    return names - authorized(ctx, operation, resource_type, names)


def authorize_by_resource_type(ctx: RequestContext, operation: AclOperation,
                               resource_type: ResourceType) -> bool:
    """May the principal ``operation`` on at least one resource of the type? (Kafka's
    ``authorizeByResourceType``: an idempotent producer with WRITE on some topic.)"""
    authorizer = ctx.server.authorizer
    return authorizer is None or authorizer.authorize_by_resource_type(
        ctx.principal, ctx.client_host, operation, resource_type)


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """The authorized-operations bitfield of a resource (Metadata, DescribeGroups,
    DescribeCluster): bit ``code`` set for each operation the resource type supports that the
    principal may perform (Kafka's ``AuthHelper.authorizedOperations``); every supported one
    without an authorizer."""
    supported = SUPPORTED_OPERATIONS[resource_type]
    authorizer = ctx.server.authorizer
    if authorizer is not None:
        principal, host = ctx.principal, ctx.client_host
        supported = frozenset(op for op in supported if authorizer.authorize(
            principal, host, op, resource_type, name))
    return sum(1 << op for op in supported)


def cluster_operations(ctx: RequestContext, requested: bool) -> int:
    """Metadata's and DescribeCluster's cluster_authorized_operations: not requested, 0 without
    DESCRIBE on the cluster, else the bitfield."""
    if not requested:
        return OPERATIONS_NOT_REQUESTED
    if not authorize_cluster(ctx, Op.DESCRIBE):
        return 0
    return authorized_operations(ctx, Res.CLUSTER, CLUSTER_NAME)


def error_for(resource_type: ResourceType) -> ErrorCode:
    return AUTHORIZATION_ERRORS[resource_type]


# --- what each API needs ------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    """One authorization an API makes: ``operation`` on a resource of ``resource_type``;
    ``when`` says for which requests or parts of one (empty: always, for the whole request)."""

    operation: AclOperation
    resource_type: ResourceType
    when: str = ""

    @property
    def error(self) -> ErrorCode:
        return AUTHORIZATION_ERRORS[self.resource_type]


C = Check
REQUIRED: dict[int, tuple[Check, ...]] = {
    0: (C(Op.WRITE, Res.TRANSACTIONAL_ID, "transactional records (whole request)"),
        C(Op.WRITE, Res.TOPIC, "each topic")),
    1: (C(Op.CLUSTER_ACTION, Res.CLUSTER, "follower fetch (replica id >= 0), every partition"
          " TOPIC_AUTHORIZATION_FAILED"),
        C(Op.READ, Res.TOPIC, "consumer fetch, each topic")),
    2: (C(Op.DESCRIBE, Res.TOPIC, "each topic"),),
    3: (C(Op.DESCRIBE, Res.TOPIC, "each topic: hidden when listing all, else"
          " TOPIC_AUTHORIZATION_FAILED"),
        C(Op.CREATE, Res.CLUSTER, "auto-creation, else CREATE on the topic"),
        C(Op.CREATE, Res.TOPIC, "auto-creation without CREATE on the cluster"),
        C(Op.DESCRIBE, Res.CLUSTER, "cluster authorized operations (v8-v10)")),
    8: (C(Op.READ, Res.GROUP), C(Op.READ, Res.TOPIC, "each topic")),
    9: (C(Op.DESCRIBE, Res.GROUP, "each group"),
        C(Op.DESCRIBE, Res.TOPIC, "each topic: hidden when fetching all")),
    10: (C(Op.DESCRIBE, Res.GROUP, "key type 0"),
         C(Op.DESCRIBE, Res.TRANSACTIONAL_ID, "key type 1")),
    11: (C(Op.READ, Res.GROUP),),
    12: (C(Op.READ, Res.GROUP),),
    13: (C(Op.READ, Res.GROUP),),
    14: (C(Op.READ, Res.GROUP),),
    15: (C(Op.DESCRIBE, Res.GROUP, "each group"),),
    16: (C(Op.DESCRIBE, Res.CLUSTER, "every group, else each group's DESCRIBE (filtered)"),),
    17: (),  # SaslHandshake and SaslAuthenticate: authentication, before any principal
    18: (),
    19: (C(Op.CREATE, Res.CLUSTER, "every topic, else CREATE on each topic"),
         C(Op.CREATE, Res.TOPIC, "each topic without CREATE on the cluster"),
         C(Op.DESCRIBE_CONFIGS, Res.TOPIC, "each topic's configs in the answer")),
    20: (C(Op.DESCRIBE, Res.TOPIC, "a topic named by id (its name is hidden)"),
         C(Op.DELETE, Res.TOPIC, "each topic")),
    21: (C(Op.DELETE, Res.TOPIC, "each topic"),),
    22: (C(Op.WRITE, Res.TRANSACTIONAL_ID, "a transactional id"),
         C(Op.IDEMPOTENT_WRITE, Res.CLUSTER, "no transactional id, else WRITE on any topic")),
    23: (C(Op.CLUSTER_ACTION, Res.CLUSTER, "every topic, else DESCRIBE on each topic"),
         C(Op.DESCRIBE, Res.TOPIC, "each topic without CLUSTER_ACTION")),
    24: (C(Op.WRITE, Res.TRANSACTIONAL_ID), C(Op.WRITE, Res.TOPIC, "each topic")),
    25: (C(Op.WRITE, Res.TRANSACTIONAL_ID), C(Op.READ, Res.GROUP)),
    26: (C(Op.WRITE, Res.TRANSACTIONAL_ID),),
    27: (C(Op.ALTER, Res.CLUSTER, "else CLUSTER_ACTION"), C(Op.CLUSTER_ACTION, Res.CLUSTER)),
    28: (C(Op.WRITE, Res.TRANSACTIONAL_ID), C(Op.READ, Res.GROUP),
         C(Op.READ, Res.TOPIC, "each topic")),
    29: (C(Op.DESCRIBE, Res.CLUSTER),),
    30: (C(Op.ALTER, Res.CLUSTER),),
    31: (C(Op.ALTER, Res.CLUSTER),),
    32: (C(Op.DESCRIBE_CONFIGS, Res.TOPIC, "topic resources"),
         C(Op.DESCRIBE_CONFIGS, Res.CLUSTER, "broker resources")),
    33: (C(Op.ALTER_CONFIGS, Res.TOPIC, "topic resources"),
         C(Op.ALTER_CONFIGS, Res.CLUSTER, "broker resources")),
    34: (C(Op.ALTER, Res.CLUSTER),),
    35: (C(Op.DESCRIBE, Res.CLUSTER),),
    36: (),  # SaslAuthenticate
    37: (C(Op.ALTER, Res.TOPIC, "each topic"),),
    42: (C(Op.DELETE, Res.GROUP, "each group"),),
    43: (C(Op.ALTER, Res.CLUSTER),),
    44: (C(Op.ALTER_CONFIGS, Res.TOPIC, "topic resources"),
         C(Op.ALTER_CONFIGS, Res.CLUSTER, "broker resources")),
    45: (C(Op.ALTER, Res.CLUSTER),),
    46: (C(Op.DESCRIBE, Res.CLUSTER),),
    47: (C(Op.DELETE, Res.GROUP), C(Op.READ, Res.TOPIC, "each topic")),
    48: (C(Op.DESCRIBE_CONFIGS, Res.CLUSTER),),
    49: (C(Op.ALTER_CONFIGS, Res.CLUSTER, "every entry's result"),),
    50: (C(Op.DESCRIBE, Res.CLUSTER),),
    51: (C(Op.ALTER, Res.CLUSTER, "every user's result"),),
    60: (C(Op.DESCRIBE, Res.CLUSTER, "cluster authorized operations only"),),
    61: (C(Op.READ, Res.TOPIC, "each topic"),),
    65: (C(Op.DESCRIBE, Res.TRANSACTIONAL_ID, "each id"),
         C(Op.DESCRIBE, Res.TOPIC, "each topic of a transaction: hidden")),
    66: (C(Op.DESCRIBE, Res.TRANSACTIONAL_ID, "each id: hidden"),),
    68: (C(Op.READ, Res.GROUP),
         C(Op.DESCRIBE, Res.TOPIC, "each topic subscribed by name; a regex's topics: hidden")),
    69: (C(Op.DESCRIBE, Res.GROUP, "each group"),
         C(Op.DESCRIBE, Res.TOPIC, "every topic of a group's assignments, else the group's "
           "TOPIC_AUTHORIZATION_FAILED")),
}
"""What each API samsa serves asks the authorizer, by API key, as Kafka's ``KafkaApis`` and
``AclApis`` (Kafka 3.x/4.0): ApiVersions needs nothing; Produce no longer checks
IDEMPOTENT_WRITE (KIP-679: InitProducerId does); DescribeCluster answers everyone, DESCRIBE on
the cluster only decides its authorized operations. A test checks that every registered API
has its entry."""
