"""The platform-neutral contract between the reconcile rules and the two platforms.

A reconcile rule (`reconcile/<kind>.py`) turns one object plus what the platform observed of the world
into a `WorkloadPlan` — what should run — and turns a `WorkloadObservation` of what runs into the
object's status. The Kubernetes platform renders a plan into Deployments, Services, ConfigMaps and
RBAC; the local platform runs it as supervised processes. Neither platform decides *what* to run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from mcpfleet.api.hostvolume import HostVolume
from mcpfleet.api.mcpauthzconfig import MCPAuthzConfig
from mcpfleet.api.mcpexternalauthconfig import MCPExternalAuthConfig
from mcpfleet.api.mcpgroup import MCPGroup
from mcpfleet.api.mcpoidcconfig import MCPOIDCConfig
from mcpfleet.api.mcpremoteproxy import MCPRemoteProxy
from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.mcpserverentry import MCPServerEntry
from mcpfleet.api.mcptelemetryconfig import MCPTelemetryConfig
from mcpfleet.api.mcptoolconfig import MCPToolConfig
from mcpfleet.api.mcpwebhookconfig import MCPWebhookConfig
from mcpfleet.api.meta import ConditionStatus, ConfigMapKeyRef, SecretKeyRef
from mcpfleet.api.permissions import PermissionProfile
from mcpfleet.api.virtualmcpcompositetooldefinition import VirtualMCPCompositeToolDefinition
from mcpfleet.api.virtualmcpserver import LIVE_CONFIG_FIELDS, VirtualMCPServer
from mcpfleet.reconcile.enforce import RegistryImages

KUBERNETES_CONFIG_DIR = "/etc/mcpfleet/config"
"""Where ConfigFiles are mounted on Kubernetes (the value of `{config_dir}` there)."""
KUBERNETES_SECRET_DIR = "/etc/mcpfleet/secrets"
"""Where SecretFiles are mounted on Kubernetes."""
LOCAL_SECRET_DIR = "secrets"
"""Where the local platform writes SecretFiles: relative to the config dir (the process's working
directory, and the folder the services resolve relative paths in their config against)."""

KUBERNETES_CONFIGMAP_DIR = "/etc/mcpfleet/configmaps"
"""Where ConfigMapFiles (keys of the user's own ConfigMaps) are mounted on Kubernetes."""
KUBERNETES_TOKEN_DIR = "/var/run/secrets/mcpfleet/serviceaccount"
"""Where a container with `service_account_token` finds `token`, `ca.crt` and `namespace` on Kubernetes."""

LIVE_FILES = ("authz.json",)
"""ConfigFiles the services re-read in place when they change (the authz policies): an edit rewrites
the file (ConfigMap) but does not restart the workload, so sessions stay."""

WorkloadKind = Literal["MCPServer", "MCPRemoteProxy", "VirtualMCPServer", "MCPRegistry", "EmbeddingServer"]


@dataclass(frozen=True)
class SecretEnv:
    """An environment variable whose value comes from a Secret key: never rendered into config."""

    env_name: str
    secret: SecretKeyRef


@dataclass(frozen=True)
class ConfigFile:
    """A file the workload reads at start (a ConfigMap key on Kubernetes, a file in the state dir locally).

    `content` must never hold secret values: secrets travel as `SecretEnv`.
    """

    filename: str
    content: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.content.encode()).hexdigest()


@dataclass(frozen=True)
class Container:
    """One process of the workload.

    `command` is the full argv. The placeholder `{port}` in it is replaced by the port the platform
    gives the container (the fixed containerPort on Kubernetes, an allocated one locally), and
    `{config_dir}` by where the ConfigFiles are mounted. A command without `{port}` and with
    `fixed_port` set binds `port` itself (the platform must use that port).
    """

    name: str
    command: tuple[str, ...]
    image: str | None = None
    """Container image on Kubernetes; None means the mcpfleet image (runner / vMCP / registry)."""
    port: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    secret_env: tuple[SecretEnv, ...] = ()
    stdin: bool = False
    """Keep stdin open (an OCI stdio server reached through the attach API)."""
    resources: dict[str, dict[str, str]] | None = None
    args: tuple[str, ...] = ()
    """Arguments for a container image's own entrypoint (used when `command` is empty)."""
    field_env: tuple[tuple[str, str], ...] = ()
    """Environment from the pod's own fields (Kubernetes downward API): (name, fieldPath),
    e.g. ("POD_NAME", "metadata.name"). Kubernetes expands `$(POD_NAME)` in `command`."""
    fixed_port: bool = False
    """The server binds `port` itself (an http package or image): the platform cannot choose it."""
    image_pull_policy: str | None = None
    """Kubernetes imagePullPolicy of `image` (the cluster's default when None)."""
    service_account_token: bool = False
    """Mount a token of the pod's service account, the cluster CA and the namespace into this container
    at `KUBERNETES_TOKEN_DIR` (a projected volume, independent of automountServiceAccountToken): what a
    proxy validating Kubernetes service-account tokens reads the API server's JWKS with (Kubernetes only)."""
    secret_files: bool = True
    """Mount the plan's SecretFiles into this container (Kubernetes). False for a user's server image
    beside mcpfleet's proxy: the proxy's keys (e.g. webhook HMAC keys) are not the server's business."""
    permission_profile: PermissionProfile | None = None
    """The MCP server's permission profile (`reconcile/permissions.py`), on the container that runs the
    server: locally the server process is wrapped in a sandbox (a proxy container's child after `--`);
    on Kubernetes the container gets a restricted securityContext and the pod a NetworkPolicy."""
    host_volumes: tuple[HostVolume, ...] = ()
    """MCPServer `spec.volumes`, on the same container as `permission_profile`: hostPath volumes
    mounted into it on Kubernetes; locally bound into the server's sandbox or its container."""
    local_image: str | None = None
    """Local platform only: this proxy container's child (after `--` in `command`) is the container
    image `local_image`, run through the machine's container runtime with `args` (after
    `local_entrypoint`, when set, replacing the image's), the container's `env` / `secret_env` and its
    `permission_profile` (`platform/local/containers.py`)."""
    local_entrypoint: tuple[str, ...] = ()
    local_image_env: tuple[str, ...] = ()
    """The names of `env` / `secret_env` the image's container gets (the server's own `env` and
    secrets); the rest (the proxy's incoming-auth secrets) stay with the proxy."""


@dataclass(frozen=True)
class SecretFile:
    """A Secret key the workload reads as a file; its path in config comes from `secret_file_path`.

    Kubernetes mounts it from a projected Secret volume at `KUBERNETES_SECRET_DIR`; the local platform
    writes it (mode 0600) into `LOCAL_SECRET_DIR` under the config dir. Never in a ConfigMap.
    """

    filename: str
    secret: SecretKeyRef
    optional: bool = False
    """A missing Secret or key leaves the file absent instead of failing the workload."""


def secret_file_path(platform: Platform, filename: str) -> str:
    """The path a rendered config names for the SecretFile `filename` on `platform`."""
    if platform == "kubernetes":
        return f"{KUBERNETES_SECRET_DIR}/{filename}"
    return f"{LOCAL_SECRET_DIR}/{filename}"


@dataclass(frozen=True)
class ConfigMapFile:
    """A key of a ConfigMap the user manages, mounted as a file in `KUBERNETES_CONFIGMAP_DIR` on
    Kubernetes (e.g. shared OIDC settings); the local platform writes it from its ConfigMap source
    (`STATE/configmaps/<name>/<key>`) as the volume `config_map_volume(filename)`. Its content is not
    known to the plan, so a change to it reaches the workload at its next start."""

    filename: str
    config_map: ConfigMapKeyRef


LOCAL_VOLUME_DIR = "volumes"
"""Where the local platform writes `VolumeFiles`: relative to the config dir, one folder per volume."""


def config_map_volume(filename: str) -> str:
    """The local volume (folder under `LOCAL_VOLUME_DIR`) a ConfigMapFile is written into."""
    return f"configmap-{filename}"


def config_map_file_path(platform: Platform, filename: str) -> str:
    """The path a rendered config names for the ConfigMapFile `filename` on `platform` (locally
    relative to the config dir, which services resolve their relative paths against)."""
    if platform == "kubernetes":
        return f"{KUBERNETES_CONFIGMAP_DIR}/{filename}"
    return f"{LOCAL_VOLUME_DIR}/{config_map_volume(filename)}/{filename}"


@dataclass(frozen=True)
class VolumeFiles:
    """A configMap or secret volume of the user's pod, as files on the local platform (Kubernetes
    mounts the volume itself). The keys come from the local ConfigMap / Secret sources
    (`STATE/configmaps/<name>/<key>`; Secrets as for `SecretFile`) and are written under
    `LOCAL_VOLUME_DIR/<volume>/`: each of `items` (key, relative path) or, without items, every key
    found. Secret files are mode 0600."""

    volume: str
    config_map: str | None = None
    secret: str | None = None
    items: tuple[tuple[str, str], ...] | None = None
    optional: bool = False
    claim: str | None = None
    """A PersistentVolumeClaim: the folder `STATE/persistentvolumeclaims/<claim>/`, linked (not copied:
    what is written there later is seen at once, as on a mounted volume)."""


@dataclass(frozen=True)
class VolumeClaim:
    """A PersistentVolumeClaim (named after the workload) mounted at the plan's `data_dir` instead of
    scratch space, so what the workload writes there (e.g. downloaded models) outlives its pods.
    Kubernetes only; locally `data_dir` is a folder in the state dir, which persists anyway."""

    size: str
    access_mode: str = "ReadWriteOnce"
    storage_class: str | None = None


@dataclass(frozen=True)
class RbacRule:
    """A least-privilege permission the workload's ServiceAccount needs."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class KubernetesOverrides:
    """What `podTemplateSpec` and `resourceOverrides` add to the Kubernetes objects (Kubernetes only)."""

    deployment_labels: dict[str, str] = field(default_factory=dict)
    deployment_annotations: dict[str, str] = field(default_factory=dict)
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    service_labels: dict[str, str] = field(default_factory=dict)
    service_annotations: dict[str, str] = field(default_factory=dict)
    image_pull_secrets: tuple[str, ...] = ()
    pod_template: dict[str, Any] | None = None
    """The user's PodTemplateSpec, strategically merged onto the rendered pod template."""
    recreate: bool = False
    """Restart strategy `immediate`: every pod is replaced at once (Deployment strategy Recreate)."""

    @property
    def empty(self) -> bool:
        return self == KubernetesOverrides()


@dataclass(frozen=True)
class WorkloadPlan:
    """Everything that should run for one object.

    `problems` non-empty means the spec cannot run as asked (e.g. an OCI image on the local platform,
    a missing reference): the platform runs nothing new and the status turns Failed with them.
    """

    kind: WorkloadKind
    name: str
    namespace: str
    replicas: int
    containers: tuple[Container, ...] = ()
    serving_container: str | None = None
    """The container whose port the Service / the local URL points at."""
    url_path: str = "/mcp"
    """Path of the MCP (or API) endpoint under the service URL: /mcp, /sse, or '' for the registry."""
    health_path: str = "/health"
    config_files: tuple[ConfigFile, ...] = ()
    rbac: tuple[RbacRule, ...] = ()
    service_account: str | None = None
    """An existing ServiceAccount to use; None creates one named after the object."""
    labels: dict[str, str] = field(default_factory=dict)
    conditions: tuple[tuple[str, ConditionStatus, str, str], ...] = ()
    """Extra conditions the plan implies: (type, status, reason, message), e.g. ReplicasCapped."""
    problems: tuple[str, ...] = ()
    secret_files: tuple[SecretFile, ...] = ()
    """Secret keys the workload reads as files (see `SecretFile`)."""
    config_map_files: tuple[ConfigMapFile, ...] = ()
    """Keys of the user's ConfigMaps mounted as files in `KUBERNETES_CONFIGMAP_DIR` (Kubernetes only)."""
    volume_files: tuple[VolumeFiles, ...] = ()
    """The user's configMap / secret volumes as files (local platform only; on Kubernetes they are
    part of `pod_template`)."""
    data_dir: str | None = None
    """A writable scratch directory the workload needs at this path (an emptyDir on Kubernetes)."""
    data_claim: str | None = None
    """A PersistentVolumeClaim mounted at `data_dir` instead of the emptyDir (Kubernetes)."""
    service_type: str = "ClusterIP"
    """Kubernetes Service type."""
    session_affinity: str | None = None
    """Kubernetes Service session affinity (ClientIP / None)."""
    overrides: KubernetesOverrides | None = None
    """Labels, annotations and the pod template patch the user adds (Kubernetes only)."""
    volume_claim: VolumeClaim | None = None
    """A PersistentVolumeClaim backing `data_dir` (Kubernetes)."""
    pod_template: dict[str, Any] | None = None
    """A user's PodTemplateSpec merged onto the rendered pod template (Kubernetes): maps key by key,
    lists of named items (containers, volumes, env…) by name, other lists replaced."""
    object_metadata: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)
    """Extra `labels` / `annotations` per rendered object ("Deployment", "Pod", "Service",
    "PersistentVolumeClaim"); mcpfleet's own labels win."""

    @property
    def config_checksum(self) -> str:
        """sha256 over every config file; copied into the pod template so a change rolls the pods."""
        digest = hashlib.sha256()
        for config in sorted(self.config_files, key=lambda c: c.filename):
            digest.update(config.filename.encode() + b"\0" + config.content.encode() + b"\0")
        return digest.hexdigest()

    @property
    def rollout_checksum(self) -> str:
        """The checksum whose change restarts the workload (the pod template's annotation).

        The vMCP config lists the group members it saw when rendered, but the gateway follows its
        group live on both platforms (a Kubernetes watch, the local state), so members coming up one
        by one must not restart it: without this a new VirtualMCPServer rolled one ReplicaSet per
        backend turning Ready. Those entries are left out, and so are the keys the gateway re-reads
        from its (re-written or re-mounted) file in place (`LIVE_CONFIG_FIELDS`: tool filters,
        overrides, composite tools, MCPToolConfigs, authz policies), and for the other kinds the
        `LIVE_FILES` (authz.json); everything else counts.
        """
        if self.kind != "VirtualMCPServer":
            digest = hashlib.sha256()
            for config in sorted(self.config_files, key=lambda c: c.filename):
                if config.filename not in LIVE_FILES:
                    digest.update(config.filename.encode() + b"\0" + config.content.encode() + b"\0")
            return digest.hexdigest()
        digest = hashlib.sha256()
        for config in sorted(self.config_files, key=lambda c: c.filename):
            content: object = config.content
            with contextlib.suppress(yaml.YAMLError):
                document = yaml.safe_load(config.content)
                if isinstance(document, dict):
                    if isinstance(document.get("backends"), list):
                        document["backends"] = [b for b in document["backends"] if not is_member_backend(b)]
                    for key in LIVE_CONFIG_FIELDS:
                        document.pop(key, None)
                    content = document
            encoded = json.dumps(content, sort_keys=True).encode()
            digest.update(config.filename.encode() + b"\0" + encoded + b"\0")
        return digest.hexdigest()


def is_member_backend(backend: object) -> bool:
    """A rendered vMCP backend entry that stands for a group member (followed live by the gateway)."""
    if not isinstance(backend, dict):
        return False
    return (backend.get("metadata") or {}).get("kind") in ("MCPServer", "MCPRemoteProxy")


@dataclass(frozen=True)
class WorkloadObservation:
    """What a platform saw of a plan it applied."""

    desired_replicas: int
    ready_replicas: int
    url: str | None
    """Where clients reach the workload (in-cluster Service URL, or http://127.0.0.1:PORT locally)."""
    failed: bool = False
    failure_message: str | None = None
    """Why it failed, e.g. the last lines of stderr of a crashed process."""
    terminating: bool = False


Platform = Literal["kubernetes", "local"]


@dataclass(frozen=True)
class Images:
    """Container images used on Kubernetes (operator settings); ignored by the local platform."""

    runner: str = "ghcr.io/mcpfleet/mcpfleet:latest"
    vmcp: str = "ghcr.io/mcpfleet/mcpfleet:latest"
    registry: str = "ghcr.io/mcpfleet/mcpfleet:latest"


@dataclass(frozen=True)
class World:
    """What a reconcile rule may know beyond the object itself, gathered once per pass by the platform.

    Objects are the validated api models of the same namespace. Rules never fetch anything: a platform
    reads the world once, so a reconcile pass never GETs the same object twice.
    """

    platform: Platform
    namespace: str
    images: Images = field(default_factory=Images)
    otlp_endpoint: str | None = None
    """Where the data-plane services send traces (OTLP/HTTP), when the platform was told; else none."""
    groups: dict[str, MCPGroup] = field(default_factory=dict)
    servers: tuple[MCPServer, ...] = ()
    remote_proxies: tuple[MCPRemoteProxy, ...] = ()
    tool_configs: dict[str, MCPToolConfig] = field(default_factory=dict)
    external_auth_configs: dict[str, MCPExternalAuthConfig] = field(default_factory=dict)
    backend_urls: dict[str, str] = field(default_factory=dict)
    """Observed URLs of servers / remote proxies by name (status.url on Kubernetes, local URLs locally)."""
    virtual_servers: tuple[VirtualMCPServer, ...] = ()
    """VirtualMCPServers of the namespace (for referencingWorkloads of the config kinds)."""
    oidc_configs: dict[str, MCPOIDCConfig] = field(default_factory=dict)
    telemetry_configs: dict[str, MCPTelemetryConfig] = field(default_factory=dict)
    authz_configs: dict[str, MCPAuthzConfig] = field(default_factory=dict)
    webhook_configs: dict[str, MCPWebhookConfig] = field(default_factory=dict)
    composite_tool_definitions: dict[str, VirtualMCPCompositeToolDefinition] = field(default_factory=dict)
    embedding_urls: dict[str, str | None] = field(default_factory=dict)
    """EmbeddingServers by name: the URL of a Ready one, None while it is not Ready."""
    server_entries: tuple[MCPServerEntry, ...] = ()
    """MCPServerEntries (for a VirtualMCPServer: those of its group)."""
    profile_documents: dict[tuple[str, str], str] = field(default_factory=dict)
    """The text of the ConfigMap keys MCPServer permissionProfiles name, by (ConfigMap, key); a key
    the platform could not read is absent."""
    container_runtime: str | None = None
    """Local platform: the container runtime that runs image MCPServers on this machine (`podman`,
    `docker`), None when there is none (they are refused)."""
    registry_images: dict[str, RegistryImages] = field(default_factory=dict)
    """MCPRegistries of the namespace with the images they list, when one of them sets
    enforceServers (for MCPServer and EmbeddingServer: `reconcile/enforce.py`); else empty."""
