"""MCPRegistry: a registry server that serves a catalogue of MCP servers from synced sources."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from mcpfleet.api.common import OIDCConfig, OIDCConfigRef, PodTemplatePatch
from mcpfleet.api.meta import (
    DNS_LABEL_PATTERN,
    ApiModel,
    Condition,
    ConfigMapKeyRef,
    KindInfo,
    LocalObjectReference,
    Rule,
    RuleModel,
    SecretKeyRef,
)
from mcpfleet.api.registrysourcebase import (
    APISource,
    GitRef,
    KubernetesSource,
    RegistryFilter,
    SourceFormat,
    SyncPolicy,
    URLSource,
)
from mcpfleet.api.resource import Resource

if TYPE_CHECKING:
    from mcpfleet.api.registryconfig import RegistryServerConfig

_SEGMENT = r"(?:[^/.][^/]*|\.[^/.][^/]*|\.\.[^/]+|\.)"
"""One path segment that is not `..` (CRD patterns are RE2: no look-around)."""
PVC_FILE_PATH = rf"^(?:{_SEGMENT}/)*[^/]*\.json$"
"""A relative path ending in .json with no `..` segment (the last segment cannot be `..`)."""
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
SOURCE_FIELDS = ("configMapRef", "git", "api", "url", "kubernetes", "pvcRef")


class GitAuth(ApiModel):
    """Credentials for a private git repository."""

    username: str = Field(min_length=1)
    """User name."""
    password_secret_ref: SecretKeyRef
    """Secret key holding the password or token."""


class GitSource(GitRef):
    """A registry file in a git repository, at a branch, tag or commit."""

    auth: GitAuth | None = None
    """Credentials for a private repository."""


class PVCSource(ApiModel):
    """A registry file on a PersistentVolumeClaim (ToolHive's `pvcRef`). On Kubernetes the claim is
    mounted read-only at `/config/registry/<source name>/` of the registry pod and the file read from
    there; locally the claim is the folder `STATE/persistentvolumeclaims/<claimName>/`."""

    claim_name: str = Field(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)
    """Name of the PersistentVolumeClaim, in the registry's namespace."""
    path: str = Field(default="registry.json", max_length=1024, pattern=PVC_FILE_PATH)
    """Path of the registry file inside the claim (relative, no `..`, ending in .json)."""


class RegistrySource(RuleModel):
    """One source of the catalogue: exactly one of configMapRef, git, api, url, kubernetes, pvcRef."""

    rules = (
        Rule(
            cel=" + ".join(f"(has(self.{f}) ? 1 : 0)" for f in SOURCE_FIELDS) + " == 1",
            message="exactly one registry source must be set: " + ", ".join(SOURCE_FIELDS),
            field_path="",
            check=lambda s: (
                sum(x is not None for x in (s.config_map_ref, s.git, s.api, s.url, s.kubernetes, s.pvc_ref))
                == 1
            ),
        ),
    )

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Name of the source, unique within the registry."""
    format: SourceFormat = "toolhive"
    """Format of the data: toolhive (legacy ToolHive registry file) or upstream (server.json)."""
    config_map_ref: ConfigMapKeyRef | None = None
    """A ConfigMap key holding the registry file."""
    git: GitSource | None = None
    """A git repository holding the registry file."""
    api: APISource | None = None
    """An upstream-compatible registry API."""
    url: URLSource | None = None
    """A registry file over HTTP(S)."""
    kubernetes: KubernetesSource | None = None
    """Label-based discovery of workloads in the cluster."""
    pvc_ref: PVCSource | None = None
    """A registry file on a PersistentVolumeClaim."""
    sync_policy: SyncPolicy | None = None
    """Periodic sync; without it the source is synced at start and when it changes."""
    filter: RegistryFilter = Field(default_factory=RegistryFilter)
    """Which entries are served."""


class DatabaseConfig(ApiModel):
    """PostgreSQL instead of the embedded SQLite store."""

    host: str = Field(default="postgres", min_length=1)
    """Database host."""
    port: int = Field(default=5432, ge=1, le=65535)
    """Database port."""
    database: str = Field(default="registry", min_length=1)
    """Database name."""
    user: str = Field(default="db_app", min_length=1)
    """User the registry connects as."""
    db_app_user_password_secret_ref: SecretKeyRef
    """Secret key holding that user's password."""
    ssl_mode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = "prefer"
    """TLS mode toward the database."""


NAMESPACE_PATTERN = r"^(\*|[a-zA-Z0-9.-]+(/[a-zA-Z0-9._-]*)?\*?)$"
"""A namespace pattern as the official registry's permissions hold them: `*`, an exact server name,
or a prefix ending in `*` (`com.acme/*`, `com.acme.*`)."""


class PublishGrant(ApiModel):
    """Namespaces a token may publish to (or edit), when it carries every claim in `claims`."""

    claims: dict[str, str] = Field(default_factory=dict, max_length=20)
    """Claims the token must carry: equal to the value, or (for an array claim such as `groups`)
    containing it. Empty: every token with the publish scope."""
    publish: list[str] = Field(default_factory=list, max_length=100)
    """Patterns of server names the token may publish new versions of (and change their status)."""
    edit: list[str] = Field(default_factory=list, max_length=100)
    """Patterns of server names whose versions' status the token may change (moderation)."""

    @field_validator("publish", "edit")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        import re

        for pattern in patterns:
            if not re.fullmatch(NAMESPACE_PATTERN, pattern):
                raise ValueError(f"{pattern!r}: expected *, a server name, or a prefix ending in *")
        return patterns


PUBLISH_SCOPE = "mcp-registry:publish"


class RegistryPublish(RuleModel):
    """The publishing API (`POST /v0.1/publish`, status, delete): who may publish what."""

    rules = (
        Rule(
            cel="!(has(self.oidcConfig) && has(self.oidcConfigRef))",
            message="set at most one of oidcConfig and oidcConfigRef",
            field_path=".oidcConfig",
            check=lambda s: s.oidc_config is None or s.oidc_config_ref is None,
        ),
        Rule(
            cel="has(self.oidcConfig) || has(self.oidcConfigRef) || "
            "(has(self.anonymousLogin) && self.anonymousLogin)",
            message="set oidcConfig or oidcConfigRef (only a development registry with anonymousLogin "
            "may have neither)",
            field_path=".oidcConfig",
            check=lambda s: s.oidc_config is not None or s.oidc_config_ref is not None or s.anonymous_login,
        ),
    )

    oidc_config: OIDCConfig | None = None
    """The OIDC issuer publishers' tokens come from (as MCPServer's oidcConfig)."""
    oidc_config_ref: OIDCConfigRef | None = None
    """Or a reference to shared OIDC settings."""
    scope: str | None = Field(default=PUBLISH_SCOPE, min_length=1)
    """Scope (in `scope` or `scp`) every publish call needs; null for issuers that put no scopes in
    their tokens (Kubernetes service-account tokens), where the audience alone marks them."""
    grants: list[PublishGrant] = Field(default_factory=list, max_length=50)
    """Token claims → server-name patterns that token may publish / edit."""
    email_domain_namespaces: bool = False
    """Also grant a verified email's domain namespaces (`alice@acme.com` → `com.acme/*`, `com.acme.*`)."""
    precedence: Literal["first", "last"] = "first"
    """first: a published name wins over the same name from any source; last: sources win and
    publishing a name a source serves is refused."""
    anonymous_login: bool = False
    """Development only: `POST /v0.1/auth/none` (`mcp-publisher login none`) hands anyone a
    five-minute registry token for `io.modelcontextprotocol.anonymous/*`."""
    token_signing_key_secret_ref: SecretKeyRef | None = None
    """A Secret key holding the Ed25519 seed (64 hex characters) that signs the registry tokens of
    `mcp-publisher login`; without it each replica signs with a key of its own, so set it when
    `replicas` is above 1."""


class RegistryStorage(ApiModel):
    """Where the embedded SQLite database lives on Kubernetes (default: an emptyDir, lost with the pod)."""

    persistent_volume_claim_name: str = Field(
        min_length=1, max_length=253, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
    )
    """An existing PersistentVolumeClaim in the registry's namespace, mounted as its data directory."""


FREE_FORM: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}
RESERVED_VOLUMES = ("config", "secrets", "configmaps", "data", "mcpfleet-token", "pgpass")
"""Volume names of the pod mcpfleet renders; a user volume may not take them."""
RESERVED_MOUNT_PREFIXES = ("/etc/mcpfleet", "/var/lib/mcpfleet", "/var/run/mcpfleet", "/var/run/secrets")
"""Where mcpfleet mounts its own volumes (config, Secret files, data, pgpass, tokens)."""
RELATIVE_PATH = rf"^{_SEGMENT}(?:/{_SEGMENT})*$"
ABSOLUTE_PATH = rf"^(?:/{_SEGMENT})+$"
VOLUME_SOURCES = (
    "configMap",
    "secret",
    "emptyDir",
    "persistentVolumeClaim",
    "projected",
    "csi",
    "downwardAPI",
    "ephemeral",
)


class KeyToPath(ApiModel):
    """One key of a ConfigMap or Secret projected as a file of the volume."""

    key: str = Field(min_length=1, max_length=253)
    """Key inside the ConfigMap or Secret."""
    path: str = Field(min_length=1, max_length=1024, pattern=RELATIVE_PATH)
    """Relative path of the file in the volume (no leading '/', no '..')."""
    mode: int | None = Field(default=None, ge=0, le=0o777)
    """File mode bits."""


class ConfigMapVolumeSource(ApiModel):
    """A ConfigMap as a volume (Kubernetes' ConfigMapVolumeSource)."""

    name: str = Field(min_length=1, max_length=253)
    """Name of the ConfigMap."""
    items: list[KeyToPath] | None = Field(default=None, max_length=100)
    """Keys to project; every key when unset."""
    default_mode: int | None = Field(default=None, ge=0, le=0o777)
    optional: bool | None = None


class SecretVolumeSource(ApiModel):
    """A Secret as a volume (Kubernetes' SecretVolumeSource)."""

    secret_name: str = Field(min_length=1, max_length=253)
    """Name of the Secret."""
    items: list[KeyToPath] | None = Field(default=None, max_length=100)
    """Keys to project; every key when unset."""
    default_mode: int | None = Field(default=None, ge=0, le=0o777)
    optional: bool | None = None


class EmptyDirVolumeSource(ApiModel):
    """Scratch space that lives as long as the pod."""

    medium: Literal["", "Memory"] | None = None
    size_limit: str | None = Field(default=None, max_length=32)


class PVCVolumeSource(ApiModel):
    """An existing PersistentVolumeClaim in the registry's namespace."""

    claim_name: str = Field(min_length=1, max_length=253)
    read_only: bool | None = None


class Volume(RuleModel):
    """A volume of the registry pod (a Kubernetes Volume). Node-level sources (hostPath and the
    in-tree cloud disks) are not accepted: the operator creates the pod, so they would hand any
    MCPRegistry author the node's filesystem."""

    rules = (
        Rule(
            cel=" + ".join(f"(has(self.{f}) ? 1 : 0)" for f in VOLUME_SOURCES) + " == 1",
            message="set exactly one volume source: " + ", ".join(VOLUME_SOURCES),
            field_path="",
            check=lambda v: sum(v.source(f) is not None for f in VOLUME_SOURCES) == 1,
        ),
        Rule(
            cel="!(self.name in " + str(list(RESERVED_VOLUMES)).replace("'", '"') + ")",
            message="this volume name is used by mcpfleet: " + ", ".join(RESERVED_VOLUMES),
            field_path=".name",
            check=lambda v: v.name not in RESERVED_VOLUMES,
        ),
    )

    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)
    """Name of the volume, referenced by volumeMounts."""
    config_map: ConfigMapVolumeSource | None = None
    secret: SecretVolumeSource | None = None
    empty_dir: EmptyDirVolumeSource | None = None
    persistent_volume_claim: PVCVolumeSource | None = None
    projected: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """A projected volume (Kubernetes only)."""
    csi: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """A CSI volume (Kubernetes only)."""
    downward_api: dict[str, Any] | None = Field(
        default=None, alias="downwardAPI", json_schema_extra=FREE_FORM
    )
    """Pod fields as files (Kubernetes only)."""
    ephemeral: dict[str, Any] | None = Field(default=None, json_schema_extra=FREE_FORM)
    """A generic ephemeral volume (Kubernetes only)."""

    def source(self, wire_name: str) -> Any:
        """The volume source set under `wire_name` (camelCase), or None."""
        field = next(n for n, f in type(self).model_fields.items() if (f.alias or n) == wire_name)
        return getattr(self, field)

    @property
    def kind(self) -> str:
        return next(f for f in VOLUME_SOURCES if self.source(f) is not None)


class VolumeMount(RuleModel):
    """Where the registry container sees a volume (a Kubernetes VolumeMount)."""

    rules = (
        Rule(
            cel=" && ".join(
                f"self.mountPath != '{p}' && !self.mountPath.startsWith('{p}/')"
                for p in RESERVED_MOUNT_PREFIXES
            ),
            message="this path is used by mcpfleet's own mounts: " + ", ".join(RESERVED_MOUNT_PREFIXES),
            field_path=".mountPath",
            check=lambda m: (
                not any(
                    m.mount_path == p or m.mount_path.startswith(p + "/") for p in RESERVED_MOUNT_PREFIXES
                )
            ),
        ),
    )

    name: str = Field(min_length=1, max_length=63)
    """Name of a volume in spec.volumes."""
    mount_path: str = Field(min_length=2, max_length=1024, pattern=ABSOLUTE_PATH)
    """Absolute path in the container (no '..', no trailing '/')."""
    read_only: bool | None = None
    sub_path: str | None = Field(default=None, max_length=1024, pattern=RELATIVE_PATH)
    """A path inside the volume to mount instead of its root."""


class PgpassSecretRef(SecretKeyRef):
    """The Secret key of a pgpass file, which may be allowed to be absent (ToolHive's `optional`)."""

    optional: bool | None = None
    """True: a missing Secret or key is no error (unset: false, with no default written, so the API
    server keeps the spec as applied); the registry then runs without a pgpass file (its
    passwords come from the database block's password files, or the connection is refused)."""


class MCPRegistrySpec(RuleModel):
    """Desired state of a registry: typed sources (`registries`) or ToolHive's registry-server
    configuration (`configYAML`, with `volumes`, `volumeMounts` and `pgpassSecretRef`)."""

    rules = (
        Rule(
            cel="has(self.registries) != has(self.configYAML)",
            message="set exactly one of registries and configYAML",
            field_path="",
            check=lambda s: (s.registries is None) != (s.config_yaml is None),
        ),
        Rule(
            cel="has(self.configYAML) || (!has(self.volumes) && !has(self.volumeMounts) && !has(self.pgpassSecretRef))",
            message="volumes, volumeMounts and pgpassSecretRef go with configYAML",
            field_path=".configYAML",
            check=lambda s: (
                s.config_yaml is not None
                or (s.volumes is None and s.volume_mounts is None and s.pgpass_secret_ref is None)
            ),
        ),
        Rule(
            cel="!has(self.configYAML) || (!has(self.databaseConfig) && !has(self.publish) && !has(self.storage))",
            message="databaseConfig, publish and storage go with registries; with configYAML the "
            "database is configYAML's database block",
            field_path=".configYAML",
            check=lambda s: (
                s.config_yaml is None
                or (s.database_config is None and s.publish is None and s.storage is None)
            ),
        ),
        Rule(
            cel="!has(self.volumeMounts) || self.volumeMounts.all(m, has(self.volumes) && "
            "self.volumes.exists(v, v.name == m.name))",
            message="every volumeMounts[].name must name a volume in volumes",
            field_path=".volumeMounts",
            check=lambda s: (
                s.volume_mounts is None
                or all(m.name in {v.name for v in s.volumes or ()} for m in s.volume_mounts)
            ),
        ),
        Rule(
            cel="!has(self.replicas) || self.replicas <= 1 || has(self.databaseConfig) || has(self.configYAML)",
            message="more than one replica needs databaseConfig (SQLite is local to one pod)",
            field_path=".replicas",
            check=lambda s: (
                s.replicas is None
                or s.replicas <= 1
                or s.database_config is not None
                or (s.config_yaml is not None and s.server_config.database is not None)
            ),
        ),
    )

    display_name: str | None = Field(default=None, max_length=256)
    """Human-readable name."""
    enforce_servers: bool | None = None
    """When any MCPRegistry of the namespace sets this, an MCPServer (or EmbeddingServer) of the
    namespace runs only if its image is listed by one of the enforcing registries (ToolHive's v1alpha1
    rule; the label `toolhive.stacklok.io/registry-name` picks one registry). Otherwise it is Failed
    with the condition ImageValidated False (docs/registry.md#enforceservers)."""
    registries: list[RegistrySource] | None = Field(
        default=None,
        min_length=1,
        max_length=32,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Sources, merged in order: on a name conflict the first listed wins. Or use configYAML."""
    config_yaml: str | None = Field(default=None, alias="configYAML", min_length=1, max_length=64 * 1024)
    """ToolHive's registry-server config.yaml (sources, registries, database, auth), parsed and
    validated here (docs/registry.md#configyaml); file paths in it name files of `volumeMounts`.
    Never credentials: mount them from Secrets and name the file, or use pgpassSecretRef."""
    volumes: list[Volume] | None = Field(
        default=None,
        max_length=32,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    """Volumes added to the registry pod (with configYAML). Locally, configMap and secret volumes
    become files in the registry's state folder."""
    volume_mounts: list[VolumeMount] | None = Field(
        default=None,
        max_length=32,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["mountPath"]},
    )
    """Where the registry container sees those volumes; paths in configYAML must lie under them."""
    pgpass_secret_ref: PgpassSecretRef | None = None
    """A Secret key holding a pgpass file (`host:port:database:user:password` lines): copied to a
    mode-0600 file and named by PGPASSFILE (with configYAML's database)."""
    image_pull_secrets: list[LocalObjectReference] | None = Field(default=None, max_length=20)
    """Pull secrets of the registry pod (Kubernetes only)."""
    pod_template_spec: PodTemplatePatch
    """Merged onto the registry pod (its container is `registry`; Kubernetes only)."""
    database_config: DatabaseConfig | None = None
    """PostgreSQL settings; SQLite inside the pod when unset."""
    replicas: int | None = Field(default=None, ge=0)
    """Replicas of the registry server; needs databaseConfig (or configYAML's database) above 1."""
    publish: RegistryPublish | None = None
    """Enables the publishing API; without it the registry is read-only."""
    storage: RegistryStorage | None = None
    """A persistent volume for the SQLite database (Kubernetes; without databaseConfig)."""

    _server_config: RegistryServerConfig | None = PrivateAttr(default=None)

    @field_validator("config_yaml")
    @classmethod
    def _parse_config_yaml(cls, value: str | None) -> str | None:
        if value is not None:
            from mcpfleet.api.registryconfig import parse_config_yaml

            parse_config_yaml(value)  # raises naming the key inside configYAML
        return value

    @property
    def server_config(self) -> RegistryServerConfig:
        """configYAML, parsed (only with configYAML)."""
        if self._server_config is None:
            from mcpfleet.api.registryconfig import parse_config_yaml

            assert self.config_yaml is not None, "server_config needs configYAML"
            self._server_config = parse_config_yaml(self.config_yaml)
        return self._server_config

    @model_validator(mode="after")
    def _unique_names(self) -> MCPRegistrySpec:
        # The API server enforces these through x-kubernetes-list-type: map; this is the local twin.
        for field, items, key in (
            ("registries", self.registries, "name"),
            ("volumes", self.volumes, "name"),
            ("volumeMounts", self.volume_mounts, "mount_path"),
        ):
            seen: set[str] = set()
            for index, item in enumerate(items or ()):
                value = getattr(item, key)
                if value in seen:
                    wire = "mountPath" if key == "mount_path" else key
                    raise ValueError(f".{field}[{index}].{wire}: duplicate {value!r}")
                seen.add(value)
        return self


class MCPRegistryStatus(ApiModel):
    """Flat status: phase, Ready condition, readyReplicas, url. Sync state belongs to the server."""

    phase: Literal["Pending", "Running", "Failed", "Terminating"] | None = None
    """Pending, Running, Failed or Terminating."""
    message: str | None = None
    """Why the registry is in this phase."""
    url: str | None = None
    """In-cluster URL of the registry API; set only while Running."""
    ready_replicas: int | None = Field(default=None, ge=0)
    """Ready replicas of the registry server."""
    observed_generation: int | None = Field(default=None, ge=0)
    """The .metadata.generation this status describes."""
    conditions: list[Condition] = Field(default_factory=list)
    """Conditions, among them Ready."""


class MCPRegistry(Resource):
    """A catalogue of MCP servers served over the upstream registry API."""

    info: ClassVar[KindInfo] = KindInfo("MCPRegistry", "mcpregistries", ("mcpreg", "registry"))
    kind: Literal["MCPRegistry"] = "MCPRegistry"
    spec: MCPRegistrySpec
    status: MCPRegistryStatus = Field(default_factory=MCPRegistryStatus)
