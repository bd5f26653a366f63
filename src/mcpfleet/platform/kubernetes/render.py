"""Render a WorkloadPlan into Kubernetes manifests (plain dicts, ready for server-side apply).

Every child carries the owner reference of its object (so garbage collection removes it with the
object), the mcpfleet labels, and `mcpfleet.dev/applied-hash`: a sha256 of the manifest itself,
which lets the applier skip an unchanged child without a request. The pod template carries
`mcpfleet.dev/config-checksum` (sha256 of the rendered config files): a config change rolls the
pods, an unchanged config does not.

A ServiceAccount (with its Role and RoleBinding) is rendered only for a plan that calls the
Kubernetes API (`plan.rbac` non-empty). Every other pod runs as `spec.serviceAccount` or the
namespace's default account with no token mounted: it holds no credential at all, which is less
than a dedicated account would give it, and it saves the cluster a write per workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpfleet.api.meta import (
    ANNOTATION_CONFIG_CHECKSUM,
    API_VERSION,
    GROUP,
    LABEL_INSTANCE,
)
from mcpfleet.reconcile.common import LABEL_KIND, canonical_json, child_name, service_url, sha256_of
from mcpfleet.reconcile.model import (
    KUBERNETES_CONFIG_DIR,
    KUBERNETES_CONFIGMAP_DIR,
    KUBERNETES_SECRET_DIR,
    KUBERNETES_TOKEN_DIR,
    Container,
    Images,
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
        return {
            "apiVersion": API_VERSION,
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


def _image(plan: WorkloadPlan, container: Container, images: Images) -> str:
    if container.image is not None:
        return container.image
    if plan.kind == "VirtualMCPServer":
        return images.vmcp
    if plan.kind == "MCPRegistry":
        return images.registry
    return images.runner


def _substitute(argv: tuple[str, ...], port: int | None) -> list[str]:
    out = []
    for arg in argv:
        arg = arg.replace("{config_dir}", KUBERNETES_CONFIG_DIR)
        if port is not None:
            arg = arg.replace("{port}", str(port))
        out.append(arg)
    return out


def _container(plan: WorkloadPlan, container: Container, images: Images) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": container.name, "image": _image(plan, container, images)}
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
        spec["readinessProbe"] = {**probe, "periodSeconds": 10, "failureThreshold": 3}
    if container.stdin:
        # An OCI stdio server: its stdin stays open for the runner attached through the API.
        spec["stdin"] = True
        spec["tty"] = False
    if container.resources:
        spec["resources"] = container.resources
    mounts: list[dict[str, Any]] = []
    if plan.config_files:
        mounts.append({"name": CONFIG_VOLUME, "mountPath": KUBERNETES_CONFIG_DIR, "readOnly": True})
    if plan.secret_files:
        mounts.append({"name": SECRET_VOLUME, "mountPath": KUBERNETES_SECRET_DIR, "readOnly": True})
    if plan.config_map_files:
        mounts.append({"name": CONFIGMAP_VOLUME, "mountPath": KUBERNETES_CONFIGMAP_DIR, "readOnly": True})
    if container.service_account_token:
        mounts.append({"name": TOKEN_VOLUME, "mountPath": KUBERNETES_TOKEN_DIR, "readOnly": True})
    if plan.data_dir:
        mounts.append({"name": DATA_VOLUME, "mountPath": plan.data_dir})
    if mounts:
        spec["volumeMounts"] = mounts
    return spec


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


def _stamp(manifest: dict[str, Any]) -> dict[str, Any]:
    """Add the applied-hash annotation, computed over the manifest without it."""
    digest = sha256_of(manifest)
    manifest["metadata"].setdefault("annotations", {})[ANNOTATION_APPLIED_HASH] = digest
    return manifest


def render(plan: WorkloadPlan, owner: Owner, images: Images) -> list[dict[str, Any]]:
    """The children of a plan, in apply order (config and identity before the Deployment)."""
    name = child_name(plan.kind, plan.name)
    manifests: list[dict[str, Any]] = []
    if plan.config_files:
        manifests.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    **_metadata(plan, owner, config_map_name(plan)),
                    "annotations": {ANNOTATION_CONFIG_CHECKSUM: plan.config_checksum},
                },
                "data": {f.filename: f.content for f in plan.config_files},
            }
        )
    if plan.service_account is None and plan.rbac:
        manifests.append(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": _metadata(plan, owner, name),
                "automountServiceAccountToken": True,
            }
        )
    if plan.rbac:
        rules = []
        for rule in plan.rbac:
            entry: dict[str, Any] = {
                "apiGroups": list(rule.api_groups),
                "resources": list(rule.resources),
                "verbs": list(rule.verbs),
            }
            if rule.resource_names:
                entry["resourceNames"] = list(rule.resource_names)
            rules.append(entry)
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
                "subjects": [
                    {
                        "kind": "ServiceAccount",
                        "name": service_account_name(plan),
                        "namespace": plan.namespace,
                    }
                ],
            }
        )
    volumes: list[dict[str, Any]] = []
    if plan.config_files:
        volumes.append({"name": CONFIG_VOLUME, "configMap": {"name": config_map_name(plan)}})
    if plan.secret_files:
        # One projected volume: each Secret key becomes one file; values never touch a ConfigMap.
        volumes.append(
            {
                "name": SECRET_VOLUME,
                "projected": {
                    "sources": [
                        {
                            "secret": {
                                "name": f.secret.name,
                                "items": [{"key": f.secret.key, "path": f.filename}],
                            }
                        }
                        for f in plan.secret_files
                    ]
                },
            }
        )
    if plan.config_map_files:
        # The user's own ConfigMap keys (e.g. shared OIDC settings), one file each.
        volumes.append(
            {
                "name": CONFIGMAP_VOLUME,
                "projected": {
                    "sources": [
                        {
                            "configMap": {
                                "name": f.config_map.name,
                                "items": [{"key": f.config_map.key, "path": f.filename}],
                            }
                        }
                        for f in plan.config_map_files
                    ]
                },
            }
        )
    if any(c.service_account_token for c in plan.containers):
        # What automountServiceAccountToken would mount, for the containers that ask for it only
        # (the proxy reading the API server's JWKS), whatever the pod's automount setting.
        volumes.append(
            {
                "name": TOKEN_VOLUME,
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    }
                                ]
                            }
                        },
                    ]
                },
            }
        )
    if plan.data_dir:
        volumes.append({"name": DATA_VOLUME, "emptyDir": {}})
    pod_labels = {**plan.labels, **selector_labels(plan)}
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": bool(plan.rbac) or plan.service_account is not None,
        "containers": [_container(plan, c, images) for c in plan.containers],
    }
    account = service_account_name(plan)
    if account is not None:
        pod_spec["serviceAccountName"] = account
    if volumes:
        pod_spec["volumes"] = volumes
    manifests.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _metadata(plan, owner, name),
            "spec": {
                "replicas": plan.replicas,
                "selector": {"matchLabels": selector_labels(plan)},
                "template": {
                    "metadata": {
                        "labels": pod_labels,
                        # Not config_checksum: a vMCP's group members come and go without a rollout.
                        "annotations": {ANNOTATION_CONFIG_CHECKSUM: plan.rollout_checksum},
                    },
                    "spec": pod_spec,
                },
            },
        }
    )
    port = serving_port(plan)
    if port is not None:
        service_spec: dict[str, Any] = {
            "type": plan.service_type,
            "selector": selector_labels(plan),
            "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
        }
        if plan.session_affinity:
            service_spec["sessionAffinity"] = plan.session_affinity
        manifests.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": _metadata(plan, owner, name),
                "spec": service_spec,
            }
        )
    return [_stamp(m) for m in manifests]


def manifest_key(manifest: dict[str, Any]) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name): how children are indexed."""
    meta = manifest["metadata"]
    return (manifest["apiVersion"], manifest["kind"], meta.get("namespace", ""), meta["name"])


__all__ = ["ANNOTATION_APPLIED_HASH", "Owner", "canonical_json", "manifest_key", "render", "url_of"]
