"""Status rules shared by every workload kind and both platforms.

One function decides phase, the Ready condition, url and readyReplicas from a plan and an
observation, so `kubectl get` and `mcpfleet get` can never disagree about what a state means.
The url is set only while the workload is Running: a Failed or Pending workload never shows a
stale address.
"""

from __future__ import annotations

from typing import TypeVar

from mcpfleet.api.meta import ApiModel, Condition, WorkloadPhase, WorkloadStatus, set_condition
from mcpfleet.reconcile.model import WorkloadObservation, WorkloadPlan

READY = "Ready"


def ready_conditions(
    previous: list[Condition],
    ready: bool,
    reason: str,
    message: str,
    plan: WorkloadPlan,
    generation: int,
    now: str | None,
) -> list[Condition]:
    """The Ready condition and the plan's own conditions (e.g. the group's), on top of `previous`;
    a condition whose status did not change keeps its transition time."""
    conditions = set_condition(
        list(previous),
        type=READY,
        status="True" if ready else "False",
        reason=reason,
        message=message,
        observed_generation=generation,
        now=now,
    )
    for type_, status, cond_reason, cond_message in plan.conditions:
        conditions = set_condition(
            conditions,
            type=type_,
            status=status,
            reason=cond_reason,
            message=cond_message,
            observed_generation=generation,
            now=now,
        )
    return conditions


def workload_status(
    previous: WorkloadStatus,
    plan: WorkloadPlan,
    observation: WorkloadObservation | None,
    generation: int,
    now: str | None = None,
) -> WorkloadStatus:
    """The status a workload should have; equal to `previous` when nothing changed (so no write)."""
    ready_replicas = observation.ready_replicas if observation else 0
    url: str | None = None
    phase: WorkloadPhase
    if plan.problems:
        phase, reason, message = "Failed", "InvalidSpec", "; ".join(plan.problems)
    elif observation is not None and observation.terminating:
        phase, reason, message = "Terminating", "Terminating", "the workload is being deleted"
    elif observation is not None and observation.failed:
        phase, reason = "Failed", "WorkloadFailed"
        message = observation.failure_message or "the workload failed"
    elif plan.replicas == 0:
        phase, reason, message = "Stopped", "ScaledToZero", "replicas is 0"
    elif observation is not None and ready_replicas >= plan.replicas and observation.url:
        phase, reason = "Running", "Ready"
        message = f"{ready_replicas}/{plan.replicas} replicas ready"
        url = observation.url
    else:
        phase, reason = "Pending", "NotReady"
        message = f"{ready_replicas}/{plan.replicas} replicas ready"
    conditions = ready_conditions(
        previous.conditions, phase == "Running", reason, message, plan, generation, now
    )
    return WorkloadStatus(
        phase=phase,
        message=message,
        url=url,
        ready_replicas=ready_replicas,
        observed_generation=generation,
        conditions=conditions,
    )


KindStatus = TypeVar("KindStatus", bound=ApiModel)


def as_kind_status(cls: type[KindStatus], shared: WorkloadStatus, phase: str | None) -> KindStatus:
    """The shared rule's status in the flat status model of a kind that has its own phase names
    (MCPRegistry, EmbeddingServer): the same fields, `phase` translated by the caller."""
    return cls.model_validate(
        {
            "phase": phase,
            "message": shared.message,
            "url": shared.url,
            "ready_replicas": shared.ready_replicas,
            "observed_generation": shared.observed_generation,
            "conditions": shared.conditions,
        }
    )
