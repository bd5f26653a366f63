"""The Kubernetes objects a WorkloadPlan is made of, one builder each (plain dicts for server-side apply).

Every child carries the owner reference of its object (so garbage collection removes it with the
object), the mcpfleet labels, and `mcpfleet.dev/applied-hash`: a sha256 of the manifest itself,
which lets the applier skip an unchanged child without a request. The pod template carries
`mcpfleet.dev/config-checksum` (sha256 of the rendered config files): a config change rolls the
pods, an unchanged config does not.

The ConfigMap of the rendered config files is rendered (and mounted) only when a container is told
a path in it (`{config_dir}` in its command or args: `mcpfleet proxy --config`, `vmcp serve --config`…).
An MCPServer run directly (an http server without a proxy in front) reads none of its files (its
`runconfig.json` is a run record): a ConfigMap for it would cost the cluster a write and the pod a
volume for a file no process opens. The file still counts in the pod template's checksum, so a
change to it (e.g. a referenced MCPExternalAuthConfig's hash) still rolls the pods.

A ServiceAccount (with its Role and RoleBinding) is rendered only for a plan that calls the
Kubernetes API (`plan.rbac` non-empty). Every other pod runs as `spec.serviceAccount` or the
namespace's default account with no token mounted: it holds no credential at all, which is less
than a dedicated account would give it, and it saves the cluster a write per workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpfleet.api.meta import ANNOTATION_CONFIG_CHECKSUM, GROUP, LABEL_INSTANCE
from mcpfleet.api.versions import STORAGE_API_VERSION
from mcpfleet.platform.kubernetes.render import permissions
from mcpfleet.platform.kubernetes.render.podtemplate import add_metadata, apply_pod_template, merge
from mcpfleet.reconcile.common import LABEL_KIND, child_name, service_url, sha256_of
from mcpfleet.reconcile.model import (
    KUBERNETES_CONFIG_DIR,
    KUBERNETES_CONFIGMAP_DIR,
    KUBERNETES_SECRET_DIR,
    KUBERNETES_TOKEN_DIR,
    Container,
    KubernetesOverrides,
    WorkloadPlan,
)

ANNOTATION_APPLIED_HASH = f"{GROUP}/applied-hash"
CONFIG_VOLUME = "config"
SECRET_VOLUME = "secrets"
DATA_VOLUME = "data"
CONFIGMAP_VOLUME = "configmaps"
TOKEN_VOLUME = "mcpfleet-token"


@dataclass(frozen=True)
class Owner:
    """The object that owns the children (its uid makes the owner reference exact)."""

    kind: str
    name: str
    namespace: str
    uid: str

    def reference(self) -> dict[str, Any]:
        # The stored version: the garbage collector reads owners by this apiVersion, and the
        # stored version needs no conversion webhook call.
        return {
            "apiVersion": STORAGE_API_VERSION,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def selector_labels(plan: WorkloadPlan) -> dict[str, str]:
    """The immutable Deployment selector: which object and kind the pods belong to."""
    return {LABEL_INSTANCE: plan.name, LABEL_KIND: plan.kind.lower()}


def _metadata(plan: WorkloadPlan, owner: Owner, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": plan.namespace,
        "labels": dict(plan.labels),
        "ownerReferences": [owner.reference()],
    }


def _substitute(argv: tuple[str, ...], port: int | None) -> list[str]:
    out = []
    for arg in argv:
        arg = arg.replace("{config_dir}", KUBERNETES_CONFIG_DIR)
        if port is not None:
            arg = arg.replace("{port}", str(port))
        out.append(arg)
    return out


def _container(plan: WorkloadPlan, container: Container, image: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": container.name, "image": image}
    if container.image_pull_policy:
        spec["imagePullPolicy"] = container.image_pull_policy
    if container.command:
        spec["command"] = _substitute(container.command, container.port)
    if container.args:
        spec["args"] = list(container.args)
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in container.env]
    env += [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": path}}} for k, path in container.field_env]
    env += [
        {"name": s.env_name, "valueFrom": {"secretKeyRef": {"name": s.secret.name, "key": s.secret.key}}}
        for s in container.secret_env
    ]
    if env:
        spec["env"] = env
    if container.port is not None:
        spec["ports"] = [{"name": "http", "containerPort": container.port, "protocol": "TCP"}]
        probe: dict[str, Any]
        if container.name == plan.serving_container and plan.health_path:
            probe = {"httpGet": {"path": plan.health_path, "port": container.port}}
        else:
            probe = {"tcpSocket": {"port": container.port}}
        # Every 2 s: a started server is in its Service's endpoints within ~2 s instead of up to
        # 10 s (Kubernetes' default period); 5 failures (10 s) before a ready pod is taken out.
        spec["readinessProbe"] = {**probe, "periodSeconds": 2, "timeoutSeconds": 2, "failureThreshold": 5}
    if container.stdin:
        # An OCI stdio server: its stdin stays open for the runner attached through the API.
        spec["stdin"] = True
        spec["tty"] = False
    if container.resources:
        spec["resources"] = container.resources
    mounts = _mounts(plan, container) + permissions.scratch_mounts(container) + _host_mounts(container)
    if mounts:
        spec["volumeMounts"] = mounts
    context = permissions.security_context(container)
    if context is not None:
        spec["securityContext"] = context
    return spec


def reads_config(plan: WorkloadPlan) -> bool:
    """True when a container is told a path among the config files: only then is there a ConfigMap."""
    return bool(plan.config_files) and any(
        "{config_dir}" in arg for c in plan.containers for arg in (*c.command, *c.args)
    )


def _mounts(plan: WorkloadPlan, container: Container) -> list[dict[str, Any]]:
    """Where a container sees the pod's volumes (see `volumes`)."""
    wanted = (
        (reads_config(plan), CONFIG_VOLUME, KUBERNETES_CONFIG_DIR),
        (bool(plan.secret_files) and container.secret_files, SECRET_VOLUME, KUBERNETES_SECRET_DIR),
        (bool(plan.config_map_files), CONFIGMAP_VOLUME, KUBERNETES_CONFIGMAP_DIR),
        (container.service_account_token, TOKEN_VOLUME, KUBERNETES_TOKEN_DIR),
    )
    mounts = [{"name": name, "mountPath": path, "readOnly": True} for used, name, path in wanted if used]
    if plan.data_dir:
        mounts.append({"name": DATA_VOLUME, "mountPath": plan.data_dir})
    return mounts


HOST_VOLUME_PREFIX = "host-"
"""Pod volume names of MCPServer `spec.volumes` (`host-NAME`): apart from the volumes rendered here."""


def _host_mounts(container: Container) -> list[dict[str, Any]]:
    """MCPServer `spec.volumes` where the server's container sees them (readOnly unset: false, ToolHive's)."""
    return [
        {"name": HOST_VOLUME_PREFIX + v.name, "mountPath": v.mount_path, "readOnly": bool(v.read_only)}
        for v in container.host_volumes
    ]


def _host_volumes(plan: WorkloadPlan) -> list[dict[str, Any]]:
    return [
        {"name": HOST_VOLUME_PREFIX + v.name, "hostPath": {"path": v.host_path}}
        for c in plan.containers
        for v in c.host_volumes
    ]


def config_map_name(plan: WorkloadPlan) -> str:
    return f"{child_name(plan.kind, plan.name)}-config"


def service_account_name(plan: WorkloadPlan) -> str | None:
    """The pod's account: the spec's, our own when the plan calls the API, else the namespace default."""
    if plan.service_account is not None:
        return plan.service_account
    return child_name(plan.kind, plan.name) if plan.rbac else None


def serving_port(plan: WorkloadPlan) -> int | None:
    for container in plan.containers:
        if container.name == plan.serving_container:
            return container.port
    return None


def url_of(plan: WorkloadPlan) -> str | None:
    """The in-cluster URL of the workload's Service (None when nothing serves)."""
    port = serving_port(plan)
    if port is None:
        return None
    return service_url(child_name(plan.kind, plan.name), plan.namespace, port, plan.url_path)


Manifest = dict[str, Any]


def config_map(plan: WorkloadPlan, owner: Owner) -> list[Manifest]:
    """The ConfigMap of the rendered config files (none when no container reads one)."""
    if not reads_config(plan):
        return []
    metadata = {
        **_metadata(plan, owner, config_map_name(plan)),
        "annotations": {ANNOTATION_CONFIG_CHECKSUM: plan.config_checksum},
    }
    data = {f.filename: f.content for f in plan.config_files}
    return [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}]


def identity(plan: WorkloadPlan, owner: Owner) -> list[Manifest]:
    """ServiceAccount (unless the spec names one), Role and RoleBinding: only for a plan that calls
    the Kubernetes API (`plan.rbac`)."""
    if not plan.rbac:
        return []
    name = child_name(plan.kind, plan.name)
    manifests: list[Manifest] = []
    if plan.service_account is None:
        manifests.append(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": _metadata(plan, owner, name),
                "automountServiceAccountToken": True,
            }
        )
    rules = [
        {
            "apiGroups": list(rule.api_groups),
            "resources": list(rule.resources),
            "verbs": list(rule.verbs),
            **({"resourceNames": list(rule.resource_names)} if rule.resource_names else {}),
        }
        for rule in plan.rbac
    ]
    subject = {"kind": "ServiceAccount", "name": service_account_name(plan), "namespace": plan.namespace}
    manifests.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _metadata(plan, owner, name),
            "rules": rules,
        }
    )
    manifests.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(plan, owner, name),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [subject],
        }
    )
    return manifests


def _projected(name: str, sources: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "projected": {"sources": sources}}


def _token_volume() -> dict[str, Any]:
    """What automountServiceAccountToken would mount: token, cluster CA, namespace."""
    namespace = {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}
    return _projected(
        TOKEN_VOLUME,
        [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [namespace]}},
        ],
    )


def volumes(plan: WorkloadPlan) -> list[dict[str, Any]]:
    """The pod's volumes: config, Secret files, the user's ConfigMap keys, token, scratch data."""
    out: list[dict[str, Any]] = []
    if reads_config(plan):
        out.append({"name": CONFIG_VOLUME, "configMap": {"name": config_map_name(plan)}})
    if plan.secret_files:
        # One projected volume: each Secret key becomes one file; values never touch a ConfigMap.
        secrets = [
            {
                "secret": {
                    "name": f.secret.name,
                    "items": [{"key": f.secret.key, "path": f.filename}],
                    **({"optional": True} if f.optional else {}),
                }
            }
            for f in plan.secret_files
        ]
        out.append(_projected(SECRET_VOLUME, secrets))
    if plan.config_map_files:
        # The user's own ConfigMap keys (e.g. shared OIDC settings), one file each.
        keys = [
            {
                "configMap": {
                    "name": f.config_map.name,
                    "items": [{"key": f.config_map.key, "path": f.filename}],
                }
            }
            for f in plan.config_map_files
        ]
        out.append(_projected(CONFIGMAP_VOLUME, keys))
    if any(c.service_account_token for c in plan.containers):
        # For the containers that ask for it only (the proxy reading the API server's JWKS),
        # whatever the pod's automount setting.
        out.append(_token_volume())
    if plan.data_dir:
        if plan.volume_claim is not None:  # a claim rendered for the workload (e.g. a model cache)
            claim = {"claimName": child_name(plan.kind, plan.name)}
            out.append({"name": DATA_VOLUME, "persistentVolumeClaim": claim})
        elif plan.data_claim:  # the user's own claim
            out.append({"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": plan.data_claim}})
        else:
            out.append({"name": DATA_VOLUME, "emptyDir": {}})
    return out + permissions.scratch_volumes(plan) + _host_volumes(plan)


def volume_claim(plan: WorkloadPlan, owner: Owner) -> list[Manifest]:
    """The PersistentVolumeClaim behind `data_dir`, when the plan asks for one."""
    claim = plan.volume_claim
    if claim is None or not plan.data_dir:
        return []
    spec: dict[str, Any] = {
        "accessModes": [claim.access_mode],
        "resources": {"requests": {"storage": claim.size}},
    }
    if claim.storage_class:
        spec["storageClassName"] = claim.storage_class
    metadata = _metadata(plan, owner, child_name(plan.kind, plan.name))
    add_metadata(metadata, plan.object_metadata.get("PersistentVolumeClaim"))
    return [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}]


def deployment(plan: WorkloadPlan, owner: Owner, image: str) -> Manifest:
    """The Deployment running the plan's containers (`image` unless a container names its own)."""
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": bool(plan.rbac) or plan.service_account is not None,
        "containers": [_container(plan, c, c.image or image) for c in plan.containers],
    }
    account = service_account_name(plan)
    if account is not None:
        pod_spec["serviceAccountName"] = account
    pod_volumes = volumes(plan)
    if pod_volumes:
        pod_spec["volumes"] = pod_volumes
    extra = plan.overrides or KubernetesOverrides()
    if extra.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": n} for n in extra.image_pull_secrets]
    template: dict[str, Any] = {
        "metadata": {
            # The user's labels and annotations first: ours (selector, checksum) win.
            "labels": {**extra.pod_labels, **plan.labels, **selector_labels(plan)},
            # Not config_checksum: a vMCP's group members come and go without a rollout.
            "annotations": {**extra.pod_annotations, ANNOTATION_CONFIG_CHECKSUM: plan.rollout_checksum},
        },
        "spec": pod_spec,
    }
    if extra.pod_template is not None:
        template = apply_pod_template(template, extra.pod_template, selector_labels(plan))
    if plan.pod_template is not None:
        template = merge(template, plan.pod_template)
        template["metadata"]["labels"] = {**template["metadata"].get("labels", {}), **selector_labels(plan)}
    add_metadata(template["metadata"], plan.object_metadata.get("Pod"))
    metadata = _metadata(plan, owner, child_name(plan.kind, plan.name))
    _add_metadata(metadata, extra.deployment_labels, extra.deployment_annotations)
    add_metadata(metadata, plan.object_metadata.get("Deployment"))
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": plan.replicas,
            "selector": {"matchLabels": selector_labels(plan)},
            "template": template,
            # Restart strategy `immediate`: replace every pod at once instead of rolling.
            **({"strategy": {"type": "Recreate"}} if extra.recreate else {}),
        },
    }


def service(plan: WorkloadPlan, owner: Owner) -> list[Manifest]:
    """The Service in front of the serving container (none when nothing serves)."""
    port = serving_port(plan)
    if port is None:
        return []
    spec: dict[str, Any] = {
        "type": plan.service_type,
        "selector": selector_labels(plan),
        "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
    }
    if plan.session_affinity:
        spec["sessionAffinity"] = plan.session_affinity
    metadata = _metadata(plan, owner, child_name(plan.kind, plan.name))
    extra = plan.overrides or KubernetesOverrides()
    _add_metadata(metadata, extra.service_labels, extra.service_annotations)
    add_metadata(metadata, plan.object_metadata.get("Service"))
    return [{"apiVersion": "v1", "kind": "Service", "metadata": metadata, "spec": spec}]


def network_policy(plan: WorkloadPlan, owner: Owner, image: str) -> list[Manifest]:
    """The egress NetworkPolicy of a server whose permission profile limits the network, and its egress
    proxy when the profile names hosts (`permissions`)."""
    spec = permissions.network_policy_spec(plan, selector_labels(plan))
    if spec is None:
        return []
    metadata = _metadata(plan, owner, child_name(plan.kind, plan.name))
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata,
        "spec": spec,
    }
    return [policy, *permissions.egress_proxy(plan, metadata, image, selector_labels(plan))]


def _add_metadata(metadata: dict[str, Any], labels: dict[str, str], annotations: dict[str, str]) -> None:
    """The user's labels and annotations (`resourceOverrides`) under ours: ours win on a clash."""
    if labels:
        metadata["labels"] = {**labels, **metadata["labels"]}
    if annotations:
        metadata["annotations"] = {**annotations, **metadata.get("annotations", {})}


def workload(plan: WorkloadPlan, owner: Owner, image: str) -> list[Manifest]:
    """The children every workload kind has, in apply order (config and identity first)."""
    return [
        *config_map(plan, owner),
        *identity(plan, owner),
        *volume_claim(plan, owner),
        *network_policy(plan, owner, image),
        deployment(plan, owner, image),
        *service(plan, owner),
    ]


def stamp(manifest: Manifest) -> Manifest:
    """Add the applied-hash annotation, computed over the manifest without it."""
    digest = sha256_of(manifest)
    manifest["metadata"].setdefault("annotations", {})[ANNOTATION_APPLIED_HASH] = digest
    return manifest


def manifest_key(manifest: dict[str, Any]) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name): how children are indexed."""
    meta = manifest["metadata"]
    return (manifest["apiVersion"], manifest["kind"], meta.get("namespace", ""), meta["name"])
