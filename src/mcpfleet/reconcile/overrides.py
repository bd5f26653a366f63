"""`podTemplateSpec` and `resourceOverrides`: what a workload's spec adds to the objects rendered for it.

Both platforms share this rule: the proxy container's extra environment
(`resourceOverrides.proxyDeployment.env`) reaches the proxy process wherever it runs; labels,
annotations, image pull secrets and the pod template patch shape Kubernetes objects only. The local
platform runs processes, not pods, so it says so in a `KubernetesOnly` condition rather than ignoring
the fields silently.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from mcpfleet.api.common import ResourceOverrides
from mcpfleet.reconcile.model import Container, KubernetesOverrides, World

KUBERNETES_ONLY = "KubernetesOnly"


def kubernetes_overrides(
    pod_template: dict[str, Any] | None,
    resource_overrides: ResourceOverrides | None,
    recreate: bool = False,
    image_pull_secrets: tuple[str, ...] = (),
) -> KubernetesOverrides | None:
    """The Kubernetes part of the two fields, None when neither adds anything. `image_pull_secrets`:
    a kind's own `imagePullSecrets` (rendered first; the pod template's are merged onto them)."""
    deployment = resource_overrides.proxy_deployment if resource_overrides else None
    service = resource_overrides.proxy_service if resource_overrides else None
    pod = deployment.pod_template_metadata_overrides if deployment else None
    overrides = KubernetesOverrides(
        deployment_labels=dict(deployment.labels or {}) if deployment else {},
        deployment_annotations=dict(deployment.annotations or {}) if deployment else {},
        pod_labels=dict(pod.labels or {}) if pod else {},
        pod_annotations=dict(pod.annotations or {}) if pod else {},
        service_labels=dict(service.labels or {}) if service else {},
        service_annotations=dict(service.annotations or {}) if service else {},
        image_pull_secrets=image_pull_secrets
        + (tuple(s.name for s in (deployment.image_pull_secrets or ())) if deployment else ()),
        pod_template=pod_template,
        recreate=recreate,
    )
    return None if overrides.empty else overrides


def with_proxy_env(
    containers: tuple[Container, ...], proxy: str, resource_overrides: ResourceOverrides | None
) -> tuple[Container, ...]:
    """`containers` with `resourceOverrides.proxyDeployment.env` added to the `proxy` container (both platforms)."""
    deployment = resource_overrides.proxy_deployment if resource_overrides else None
    extra = tuple((e.name, e.value) for e in (deployment.env or ())) if deployment else ()
    if not extra:
        return containers
    return tuple(
        dataclasses.replace(c, env=(*[kv for kv in c.env if kv[0] not in dict(extra)], *extra))
        if c.name == proxy
        else c
        for c in containers
    )


def local_condition(
    world: World, overrides: KubernetesOverrides | None, used_locally: str = ""
) -> tuple[tuple[str, Any, str, str], ...]:
    """On the local platform, the condition saying which fields have no local effect (and the part
    that does, `used_locally`, e.g. an image's command)."""
    if world.platform == "kubernetes" or overrides is None:
        return ()
    if dataclasses.replace(overrides, recreate=False) == KubernetesOverrides():
        return ()  # a local restart is always immediate: nothing unused
    fields = []
    if overrides.pod_template is not None:
        fields.append("spec.podTemplateSpec")
    if dataclasses.replace(overrides, pod_template=None, recreate=False) != KubernetesOverrides():
        fields.append("spec.resourceOverrides (labels, annotations, imagePullSecrets)")
    message = f"{' and '.join(fields)} shape Kubernetes objects; the local platform runs processes and does not use them"
    if used_locally:
        message += f" (except {used_locally})"
    return ((KUBERNETES_ONLY, "True", "NotUsedLocally", message),)


RESTARTED_AT_ANNOTATIONS = ("mcpfleet.dev/restarted-at", "mcpserver.toolhive.stacklok.dev/restarted-at")
"""Setting (changing) one of these annotations restarts the workload; ToolHive's key is honoured so a
ported manifest keeps working."""
RESTART_STRATEGY_ANNOTATIONS = (
    "mcpfleet.dev/restart-strategy",
    "mcpserver.toolhive.stacklok.dev/restart-strategy",
)
"""`rolling` (default: new pods before old ones go) or `immediate` (every pod replaced at once)."""
RESTARTED_AT_ENV = "MCPFLEET_RESTARTED_AT"


def _annotation(annotations: dict[str, str], keys: tuple[str, ...]) -> str:
    return next((annotations[k] for k in keys if annotations.get(k)), "")


def with_restart(
    containers: tuple[Container, ...], annotations: dict[str, str]
) -> tuple[tuple[Container, ...], bool]:
    """The containers carrying the restarted-at value (a new value is a new process / pod template on
    both platforms: that is the restart), and whether the restart is `immediate`."""
    restarted_at = _annotation(annotations, RESTARTED_AT_ANNOTATIONS)
    immediate = _annotation(annotations, RESTART_STRATEGY_ANNOTATIONS).lower() == "immediate"
    if not restarted_at:
        return containers, immediate
    return tuple(
        dataclasses.replace(c, env=(*c.env, (RESTARTED_AT_ENV, restarted_at))) for c in containers
    ), immediate
