"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), as Kafka's ``AclApis``.

Each first asks the gate (authz.py): DESCRIBE on the cluster for DescribeAcls, ALTER for the
others (CLUSTER_AUTHORIZATION_FAILED otherwise); without an authorizer every request is
allowed there and answered SECURITY_DISABLED. The authorizer (security/) decides what is
refused (INVALID_REQUEST with Kafka's messages) and what a filter matches; the mode's ACL store
(cluster/acls.py, zk/acls.py) keeps the change. v1 added pattern types (v0 is not served: Kafka
4.0 removed it, and kio has no schema for it).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from samsa.errors import ErrorCode, KafkaError
from samsa.handlers.authz import MESSAGES, authorize_cluster
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
    check_filter,
)

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.create_acls.v3.request import CreateAclsRequest
    from kio.schema.delete_acls.v3.request import DeleteAclsFilter, DeleteAclsRequest
    from kio.schema.describe_acls.v3.request import DescribeAclsRequest

DENIED = ErrorCode.cluster_authorization_failed
NO_AUTHORIZER = "No Authorizer is configured."


def _filter(f: DescribeAclsRequest | DeleteAclsFilter) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(f.resource_type_filter),
                              f.resource_name_filter,
                              PatternType.from_code(f.pattern_type_filter)),
        AccessControlEntryFilter(f.principal_filter, f.host_filter,
                                 AclOperation.from_code(f.operation),
                                 AclPermissionType.from_code(f.permission_type)))


def _by_pattern(bindings: Iterable[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    return grouped


@api(29, "DescribeAcls", 1, 3)
async def describe_acls(ctx: RequestContext, request: DescribeAclsRequest) -> dict[str, Any]:
    def failed(code: ErrorCode, message: str) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "error_message": message,
                "resources": []}

    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return failed(DENIED, MESSAGES[DENIED])
    authorizer = ctx.server.authorizer
    if authorizer is None:
        return failed(ErrorCode.security_disabled, "No Authorizer is configured on the broker")
    binding_filter = _filter(request)
    try:
        check_filter(binding_filter)
    except KafkaError as exc:  # INVALID_REQUEST
        return failed(exc.code, str(exc))
    return {
        "throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
        "resources": [
            {"resource_type": p.resource_type, "resource_name": p.name,
             "pattern_type": p.pattern_type,
             "acls": [{"principal": e.principal, "host": e.host, "operation": e.operation,
                       "permission_type": e.permission_type} for e in entries]}
            for p, entries in _by_pattern(authorizer.acls(binding_filter)).items()
        ],
    }


@api(30, "CreateAcls", 1, 3)
async def create_acls(ctx: RequestContext, request: CreateAclsRequest) -> dict[str, Any]:
    def every(code: ErrorCode, message: str) -> dict[str, Any]:
        return {"throttle_time": 0, "results": [
            {"error_code": code, "error_message": message} for _ in request.creations]}

    if not authorize_cluster(ctx, AclOperation.ALTER):
        return every(DENIED, MESSAGES[DENIED])
    store = ctx.server.acl_store
    if store is None:
        return every(ErrorCode.security_disabled, NO_AUTHORIZER)
    bindings = [
        AclBinding(
            ResourcePattern(ResourceType.from_code(c.resource_type), c.resource_name,
                            PatternType.from_code(c.resource_pattern_type)),
            AccessControlEntry(c.principal, c.host, AclOperation.from_code(c.operation),
                               AclPermissionType.from_code(c.permission_type)))
        for c in request.creations
    ]
    errors = await store.create(bindings)
    return {"throttle_time": 0, "results": [
        {"error_code": ErrorCode.none, "error_message": None} if e is None
        else {"error_code": e.code, "error_message": str(e)} for e in errors]}


@api(31, "DeleteAcls", 1, 3)
async def delete_acls(ctx: RequestContext, request: DeleteAclsRequest) -> dict[str, Any]:
    def every(code: ErrorCode, message: str) -> dict[str, Any]:
        return {"throttle_time": 0, "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []}
            for _ in request.filters]}

    if not authorize_cluster(ctx, AclOperation.ALTER):
        return every(DENIED, MESSAGES[DENIED])
    store = ctx.server.acl_store
    if store is None:
        return every(ErrorCode.security_disabled, NO_AUTHORIZER)
    results = await store.delete([_filter(f) for f in request.filters])
    return {"throttle_time": 0, "filter_results": [
        {"error_code": r.error.code if r.error else ErrorCode.none,
         "error_message": str(r.error) if r.error else None,
         "matching_acls": [] if r.error else [
             {"error_code": ErrorCode.none, "error_message": None,
              "resource_type": b.pattern.resource_type, "resource_name": b.pattern.name,
              "pattern_type": b.pattern.pattern_type, "principal": b.entry.principal,
              "host": b.entry.host, "operation": b.entry.operation,
              "permission_type": b.entry.permission_type}
             for b in r.bindings]}
        for r in results]}
