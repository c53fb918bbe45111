"""ApiVersions (18): the versions of every API in the registry, nothing more (Produce from v0,
as Kafka 4 advertises it: registry.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from samsa.errors import ErrorCode
from samsa.handlers.context import RequestContext
from samsa.handlers.registry import APIS, api

if TYPE_CHECKING:  # kio's request classes: annotations only, the codec loads them
    from kio.schema.api_versions.v4.request import ApiVersionsRequest

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


@api(18, "ApiVersions", 0, 4)
async def api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> dict[str, Any]:
    error = ErrorCode.none
    if ctx.version >= 3:
        name = request.client_software_name or ""
        version = request.client_software_version or ""
        if not (_SOFTWARE.match(name) and _SOFTWARE.match(version)):
            error = ErrorCode.invalid_request
    return {
        "error_code": error,
        "api_keys": [
            {"api_key": a.key, "min_version": a.advertised_min_version,
             "max_version": a.max_version}
            for a in sorted(APIS.values(), key=lambda a: a.key)
        ],
        "throttle_time": 0,
    }
