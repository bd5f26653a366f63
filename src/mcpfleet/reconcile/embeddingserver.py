"""Reconcile rules of EmbeddingServer: the user's embedding inference server as a workload.

Kubernetes: the image (HuggingFace Text Embeddings Inference by default) in a container named
`embedding`, started with `--model-id MODEL --port PORT ARGS` (TEI's command line), HF_TOKEN from its
Secret, the model cache at `/data` (a PersistentVolumeClaim when `modelCache.enabled`, else scratch
space), `podTemplateSpec` merged onto the pod and `resourceOverrides` metadata on the objects.
Locally: a `uvx://` / `npx://` package runs as a process with MODEL_ID, PORT and HF_TOKEN in its
environment and `args` on its command line (it binds `port` itself); a container image is refused
naming `spec.image`.

Status: Pending / Ready / Failed / Terminating, `url` the base URL of the embedding API (TEI's `/embed`,
and the OpenAI-compatible `/v1/embeddings`) while Ready: what the gateway's optimizer is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcpfleet.api.embeddingserver import (
    BUILTIN_IMAGE,
    DEFAULT_MODEL,
    EmbeddingServer,
    EmbeddingServerSpec,
    EmbeddingServerStatus,
)
from mcpfleet.api.meta import SecretKeyRef, WorkloadStatus
from mcpfleet.reconcile import enforce
from mcpfleet.reconcile.common import (
    child_name_problem,
    labels,
    package_command,
    plain_env,
    resources_dict,
)
from mcpfleet.reconcile.model import (
    Container,
    SecretEnv,
    VolumeClaim,
    WorkloadObservation,
    WorkloadPlan,
    World,
)
from mcpfleet.reconcile.status import as_kind_status, workload_status

CONTAINER = "embedding"
DATA_DIR = "/data"
HF_TOKEN_ENV = "HF_TOKEN"


def is_package(image: str) -> bool:
    return image.startswith(("uvx://", "npx://"))


def _overrides(server: EmbeddingServer) -> dict[str, dict[str, dict[str, str]]]:
    """resourceOverrides as the plan's per-object metadata (`statefulSet` is ToolHive's name for it)."""
    overrides = server.spec.resource_overrides
    if overrides is None:
        return {}
    result: dict[str, dict[str, dict[str, str]]] = {}
    for workload in (overrides.stateful_set, overrides.deployment):
        if workload is None:
            continue
        result.setdefault("Deployment", {"labels": {}, "annotations": {}})
        result["Deployment"]["labels"].update(workload.labels)
        result["Deployment"]["annotations"].update(workload.annotations)
        pod = workload.pod_template_metadata_overrides
        if pod is not None:
            result.setdefault("Pod", {"labels": {}, "annotations": {}})
            result["Pod"]["labels"].update(pod.labels)
            result["Pod"]["annotations"].update(pod.annotations)
    for kind, meta in (
        ("Service", overrides.service),
        ("PersistentVolumeClaim", overrides.persistent_volume_claim),
    ):
        if meta is not None:
            result[kind] = {"labels": dict(meta.labels), "annotations": dict(meta.annotations)}
    return result


def _container(
    spec: EmbeddingServerSpec,
    env: tuple[tuple[str, str], ...],
    secrets: tuple[SecretEnv, ...],
    builtin: bool,
    kubernetes: bool,
    problems: list[str],
) -> Container:
    """The serving container: mcpfleet's own server, a uvx:// / npx:// package, or a container image."""
    if builtin:
        model = () if spec.model == DEFAULT_MODEL else ("--model", spec.model)
        return Container(
            name=CONTAINER,
            command=(
                "mcpfleet",
                "embeddings",
                "serve",
                "--host",
                "0.0.0.0",
                "--port",
                str(spec.port),
                *model,
                *spec.args,
            ),
            port=spec.port,
            fixed_port=True,
            env=env,
            resources=resources_dict(spec.resources),
        )
    elif is_package(spec.image):
        return Container(
            name=CONTAINER,
            command=package_command(spec.image, spec.args),
            port=spec.port,
            fixed_port=True,
            env=(("MODEL_ID", spec.model), ("PORT", str(spec.port)), *env),
            secret_env=secrets,
            resources=resources_dict(spec.resources),
        )
    if not kubernetes:
        problems.append(
            f"spec.image: {spec.image} is a container image, which needs Kubernetes; locally use a "
            "uvx:// or npx:// package of an embedding server"
        )
    return Container(
        name=CONTAINER,
        command=(),
        args=("--model-id", spec.model, "--port", str(spec.port), *spec.args),
        image=spec.image,
        image_pull_policy=spec.image_pull_policy,
        port=spec.port,
        fixed_port=True,
        env=env,
        secret_env=secrets,
        resources=resources_dict(spec.resources),
    )


def plan(server: EmbeddingServer, world: World) -> WorkloadPlan:
    """What should run for `server` in `world`."""
    spec = server.spec
    problems: list[str] = []
    secrets: tuple[SecretEnv, ...] = ()
    if spec.hf_token_secret_ref is not None:
        ref = spec.hf_token_secret_ref
        secrets = (SecretEnv(HF_TOKEN_ENV, SecretKeyRef(name=ref.name, key=ref.key)),)
    env = plain_env(spec.env)
    kubernetes = world.platform == "kubernetes"
    if kubernetes:
        problems.extend(child_name_problem("EmbeddingServer", server.name))
    builtin = spec.image == BUILTIN_IMAGE
    # mcpfleet's own server runs in mcpfleet's image: no registry lists it, enforceServers has no say.
    verdict = enforce.check(spec.image, server.metadata.labels or {}, world.registry_images)
    if verdict.problem is not None and not builtin:
        problems.append(verdict.problem)
    container = _container(spec, env, secrets, builtin, kubernetes, problems)
    cache = spec.model_cache
    claim = (
        VolumeClaim(size=cache.size, access_mode=cache.access_mode, storage_class=cache.storage_class_name)
        if cache is not None and cache.enabled
        else None
    )
    return WorkloadPlan(
        kind="EmbeddingServer",
        name=server.name,
        namespace=server.namespace,
        replicas=spec.replicas,
        containers=(container,),
        serving_container=CONTAINER,
        url_path="",
        health_path="/health",
        labels=labels("EmbeddingServer", server.name, "embedding"),
        problems=tuple(problems),
        conditions=() if verdict.condition is None or builtin else (verdict.condition,),
        data_dir=DATA_DIR if kubernetes and not is_package(spec.image) and not builtin else None,
        volume_claim=claim if kubernetes else None,
        pod_template=spec.pod_template_spec if kubernetes else None,
        object_metadata=_overrides(server) if kubernetes else {},
    )


PHASES = {"Running": "Ready", "Stopped": "Pending", "Pending": "Pending", "Failed": "Failed"}


def status(
    previous: EmbeddingServerStatus,
    server: EmbeddingServer,
    plan: WorkloadPlan,
    observation: WorkloadObservation | None,
    now: str | None = None,
) -> EmbeddingServerStatus:
    """The shared workload status rule, in ToolHive's phases (Running is Ready)."""
    flat = workload_status(
        WorkloadStatus(conditions=list(previous.conditions)), plan, observation, server.generation, now
    )
    return as_kind_status(EmbeddingServerStatus, flat, PHASES.get(flat.phase or "Pending", flat.phase))


def embedding_urls(objects: Iterable[dict[str, Any]]) -> dict[str, str | None]:
    """`World.embedding_urls` from EmbeddingServer objects (raw): name -> status.url while Ready, else None."""
    urls: dict[str, str | None] = {}
    for raw in objects:
        observed = raw.get("status") or {}
        url = observed.get("url")
        ready = observed.get("phase") == "Ready" and isinstance(url, str) and url
        urls[raw["metadata"]["name"]] = url if ready else None
    return urls
