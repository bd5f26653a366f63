"""Read a workload's Deployment and Service back into a WorkloadObservation (no API calls: the
caller hands over the objects it already holds)."""

from __future__ import annotations

from typing import Any

from mcpfleet.api.meta import ANNOTATION_CONFIG_CHECKSUM
from mcpfleet.platform.kubernetes.render import ANNOTATION_APPLIED_HASH, url_of
from mcpfleet.reconcile.model import WorkloadObservation, WorkloadPlan


def _condition(deployment: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for condition in (deployment.get("status") or {}).get("conditions") or ():
        if condition.get("type") == type_:
            return dict(condition)
    return None


def observe(
    plan: WorkloadPlan,
    deployment: dict[str, Any] | None,
    service: dict[str, Any] | None,
    *,
    terminating: bool = False,
) -> WorkloadObservation:
    """Ready replicas count only pods of the current template (a rollout is not Running until done)."""
    if deployment is None:
        return WorkloadObservation(
            desired_replicas=plan.replicas, ready_replicas=0, url=None, terminating=terminating
        )
    status = deployment.get("status") or {}
    generation = (deployment.get("metadata") or {}).get("generation")
    current = status.get("observedGeneration") == generation
    ready = int(status.get("readyReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    ready_current = min(ready, updated) if current else 0
    failed = False
    message: str | None = None
    progressing = _condition(deployment, "Progressing")
    if (
        progressing
        and progressing.get("status") == "False"
        and progressing.get("reason") == "ProgressDeadlineExceeded"
    ):
        failed, message = True, f"Deployment: {progressing.get('message') or 'progress deadline exceeded'}"
    replica_failure = _condition(deployment, "ReplicaFailure")
    if replica_failure and replica_failure.get("status") == "True":
        failed, message = True, f"Deployment: {replica_failure.get('message') or 'replica failure'}"
    return WorkloadObservation(
        desired_replicas=plan.replicas,
        ready_replicas=ready_current,
        url=url_of(plan) if service is not None else None,
        failed=failed,
        failure_message=message,
        terminating=terminating,
    )


def _annotations(meta: dict[str, Any]) -> tuple[str | None, str | None]:
    annotations = meta.get("annotations") or {}
    return annotations.get(ANNOTATION_APPLIED_HASH), annotations.get(ANNOTATION_CONFIG_CHECKSUM)


def reconcile_inputs(child: dict[str, Any]) -> tuple[Any, ...]:
    """The parts of a child a reconcile reads: what `observe` and `apply.unchanged` look at.

    A watch event that leaves these equal cannot change the outcome of a pass, so the owner is not
    reconciled again. A Deployment's controller updates its status ~5 times while one pod starts;
    most of those updates touch only fields nothing here reads (availableReplicas, timestamps).
    """
    meta = child.get("metadata") or {}
    spec = child.get("spec") or {}
    status = child.get("status") or {}
    identity = (
        meta.get("uid"),
        meta.get("generation"),
        bool(meta.get("deletionTimestamp")),
        _annotations(meta),
        tuple((r.get("uid"), r.get("controller")) for r in meta.get("ownerReferences") or ()),
    )
    if child.get("kind") != "Deployment":
        return identity
    template = spec.get("template") or {}
    conditions = tuple(
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
        for c in status.get("conditions") or ()
        if c.get("type") in ("Progressing", "ReplicaFailure")
        and (c.get("status") == "True") == (c.get("type") == "ReplicaFailure")
    )
    return (
        identity,
        spec.get("replicas"),
        _annotations(template.get("metadata") or {}),
        status.get("observedGeneration"),
        status.get("readyReplicas"),
        status.get("updatedReplicas"),
        conditions,
    )


# A container waiting for one of these reasons cannot start until something outside it changes.
_STUCK_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ErrImagePull",
        "ImagePullBackOff",
        "ErrImageNeverPull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


def pod_failure(pods: list[dict[str, Any]]) -> str | None:
    """Why a workload's pods do not become ready, from their container statuses, or None.

    A container's termination message (the runner writes one when it gives up, e.g. a package not
    in the image's offline cache) is the clearest cause; else a waiting reason that needs a change
    (image pull, crash loop, bad config) with kubelet's message.
    """
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        status = pod.get("status") or {}
        for container in (status.get("initContainerStatuses") or []) + (
            status.get("containerStatuses") or []
        ):
            if container.get("ready"):
                continue
            name = container.get("name", "?")
            state = container.get("state") or {}
            last = (container.get("lastState") or {}).get("terminated") or state.get("terminated") or {}
            if str(last.get("message") or "").strip():
                return f"container {name}: {str(last['message']).strip()}"
            waiting = state.get("waiting") or {}
            if waiting.get("reason") in _STUCK_REASONS:
                detail = waiting.get("message") or (
                    f"exit code {last.get('exitCode')}" if last.get("exitCode") is not None else ""
                )
                return f"container {name}: {waiting['reason']}" + (f": {detail}" if detail else "")
    return None
