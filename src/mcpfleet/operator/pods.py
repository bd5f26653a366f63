"""Why a workload that stays unready is stuck, read from its pods (only while it stays unready).

The Deployment's status says only how many replicas are ready; the cause (a package missing from
the image's offline cache, an image that cannot be pulled, a crash loop) is in the pods' container
statuses. The operator does not watch pods (that would be one more watch of every pod in the
cluster); instead, a workload still not ready `LOOK_AFTER` seconds after its Deployment was created
gets its pods listed, and again every `LOOK_AGAIN` seconds while it stays so. A workload that
becomes ready in time (nearly all) costs no request.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from mcpfleet.platform.kubernetes.api import ApiError, KubeApi
from mcpfleet.platform.kubernetes.observe import pod_failure
from mcpfleet.platform.kubernetes.render.objects import selector_labels
from mcpfleet.reconcile.model import WorkloadPlan

log = logging.getLogger("mcpfleet.operator")

LOOK_AFTER = 10.0
LOOK_AGAIN = 10.0


def _age(deployment: dict[str, Any]) -> float:
    created = (deployment.get("metadata") or {}).get("creationTimestamp")
    if not created:
        return 0.0
    try:
        return time.time() - datetime.fromisoformat(str(created).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


async def stuck_reason(
    api: KubeApi, namespace: str, plan: WorkloadPlan, deployment: dict[str, Any]
) -> tuple[str | None, float]:
    """(the cause read from the pods or None, seconds after which to look again)."""
    age = _age(deployment)
    if age < LOOK_AFTER:
        return None, LOOK_AFTER - age
    try:
        pods = await api.list("v1", "Pod", namespace, labels=selector_labels(plan))
    except ApiError as exc:
        log.debug("listing the pods of %s/%s: %s", namespace, plan.name, exc.message)
        return None, LOOK_AGAIN
    return pod_failure(pods), LOOK_AGAIN
