"""DescribeClientQuotas (48) and AlterClientQuotas (49), as Kafka's KafkaApis answers them:
DESCRIBE_CONFIGS, resp. ALTER_CONFIGS, on the cluster, else CLUSTER_AUTHORIZATION_FAILED for
the whole request; the quotas go to the broker's quota store (``samsa.cluster.client_quotas``:
the metadata dir of a single node, ZooKeeper in a cluster, where any broker answers them and
every broker applies them). The quotas' enforcement is ``samsa.server.quotas``'."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.cluster.client_quotas import Alteration, QuotaRequestError
from samsa.errors import ErrorCode
from samsa.handlers.authz import MESSAGES, authorize_cluster
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import api
from samsa.security.acl import AclOperation

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.alter_client_quotas.v1.request import AlterClientQuotasRequest
    from kio.schema.describe_client_quotas.v1.request import DescribeClientQuotasRequest

_STARTING = (ErrorCode.coordinator_not_available, "the broker is starting")
_DENIED = (ErrorCode.cluster_authorization_failed,
           MESSAGES[ErrorCode.cluster_authorization_failed])


def _entity(components: Any) -> list[dict[str, Any]]:
    return [{"entity_type": t, "entity_name": n} for t, n in components]


def _refusal(ctx: RequestContext, operation: AclOperation) -> tuple[int, str] | None:
    """Kafka's answer before looking at the quotas: the principal's permission on the
    cluster, then a store not open yet."""
    if not authorize_cluster(ctx, operation):
        return _DENIED
    if ctx.server.quota_store is None:
        return _STARTING
    return None


@api(48, "DescribeClientQuotas", 0, 1)
async def describe_client_quotas(ctx: RequestContext, request: DescribeClientQuotasRequest
                                 ) -> dict[str, Any]:
    store = ctx.server.quota_store
    refused = _refusal(ctx, AclOperation.DESCRIBE_CONFIGS)
    if refused is None:
        assert store is not None
        try:
            found = await store.describe(
                [(c.entity_type, int(c.match_type), c.match) for c in request.components],
                bool(request.strict))
        except QuotaRequestError as exc:
            refused = (exc.code, str(exc))
    if refused is not None:
        return {"throttle_time": 0, "error_code": refused[0], "error_message": refused[1],
                "entries": None}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "entries": [{"entity": _entity(entity.components()),
                         "values": [{"key": k, "value": v} for k, v in sorted(values.items())]}
                        for entity, values in found]}


@api(49, "AlterClientQuotas", 0, 1)
async def alter_client_quotas(ctx: RequestContext, request: AlterClientQuotasRequest
                              ) -> dict[str, Any]:
    store = ctx.server.quota_store
    refused = _refusal(ctx, AclOperation.ALTER_CONFIGS)
    if refused is not None:  # every entry, as sent (Kafka's getErrorResponse)
        return {"throttle_time": 0, "entries": [
            {"error_code": refused[0], "error_message": refused[1],
             "entity": _entity((e.entity_type, e.entity_name) for e in entry.entity)}
            for entry in request.entries]}
    assert store is not None
    alterations = [
        Alteration(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                   tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops))
        for entry in request.entries]
    results = await store.alter(alterations, bool(request.validate_only))
    return {"throttle_time": 0, "entries": [
        {"error_code": r.error, "error_message": r.message, "entity": _entity(r.components)}
        for r in results]}
