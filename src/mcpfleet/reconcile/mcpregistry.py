"""Reconcile rules of MCPRegistry: the rendered registry server config, what runs, the flat status.

Secrets never enter the rendered config: the database password and the password of a private git
source (`git.auth.passwordSecretRef`) are `SecretFile`s - a projected Secret volume on Kubernetes,
mode-0600 files under the config dir locally - and the config names their paths (`passwordFile`).

`spec.publish` renders the server's `publish` block: its OIDC settings are MCPServer's
(`reconcile/oidc.py`: inline, a mounted ConfigMap key, or Kubernetes service-account tokens), the
grants, scope and precedence are copied. On Kubernetes, published entries must outlive the pod: the
plan needs `databaseConfig` or `storage.persistentVolumeClaimName` (mounted as the data directory
instead of the emptyDir); locally the data directory is under the state directory already.

Status is the MCPServer pattern (ToolHive after its status consolidation): phase Pending / Running /
Failed / Terminating, a Ready condition (reasons Ready / NotReady, or InvalidSpec), readyReplicas,
url only while Running, observedGeneration. Sync state belongs to the registry server, not the CR.
"""

from __future__ import annotations

from typing import Any

import yaml

from mcpfleet.api.mcpregistry import MCPRegistry, MCPRegistryStatus, RegistrySource
from mcpfleet.api.meta import SecretKeyRef
from mcpfleet.api.registrysource import ApiSource, ConfigMapSource, FileSource, GitSource, Source, UrlSource
from mcpfleet.api.registrysourcebase import KubernetesSource
from mcpfleet.reconcile.common import child_name_problem, labels, serve_command, tracing_env
from mcpfleet.reconcile.model import (
    KUBERNETES_SECRET_DIR,
    LOCAL_VOLUME_DIR,
    ConfigFile,
    Container,
    KubernetesOverrides,
    Platform,
    RbacRule,
    SecretFile,
    VolumeFiles,
    WorkloadObservation,
    WorkloadPlan,
    World,
    secret_file_path,
)
from mcpfleet.reconcile.oidc import IncomingAuthPlan, incoming_auth
from mcpfleet.reconcile.overrides import local_condition
from mcpfleet.reconcile.registryconfig import ConfigYAMLPlan, plan_config_yaml
from mcpfleet.reconcile.status import as_kind_status, workload_status
from mcpfleet.registry.config import Database, Publish, RegistryConfig

CONFIG_FILE = "registry.yaml"
CONTAINER = "registry"
PORT = 8080
DATA_DIR = "/var/lib/mcpfleet"
DB_PASSWORD_FILE = "db-password"
TOKEN_KEY_FILE = "registry-token-key"
"""SecretFile name of `spec.publish.tokenSigningKeySecretRef` (the registry tokens' Ed25519 seed)."""
PVC_MOUNT_ROOT = "/config/registry"
"""Where `pvcRef` claims are mounted, one folder per source (ToolHive's path)."""


def git_password_file(source: str) -> str:
    """SecretFile name of a git source's password (source names are unique DNS labels)."""
    return f"git-{source}-password"


def _git_secret_files(registry: MCPRegistry) -> tuple[SecretFile, ...]:
    return tuple(
        SecretFile(git_password_file(s.name), s.git.auth.password_secret_ref)
        for s in registry.spec.registries or ()
        if s.git is not None and s.git.auth is not None
    )


class RenderError(ValueError):
    """The spec cannot be rendered into a registry config; the message names the field."""


def _source(registry: MCPRegistry, source: RegistrySource, world: World) -> Source:
    """One spec source as the server fetches it; the spec's own models are kept where they fit."""
    fields: dict[str, Any] = {"name": source.name, "format": source.format, "filter": source.filter}
    if source.sync_policy is not None:
        fields["sync_policy"] = source.sync_policy
    if source.config_map_ref is not None:
        ref = source.config_map_ref
        if world.platform == "kubernetes":
            fields["config_map"] = ConfigMapSource(namespace=registry.namespace, name=ref.name, key=ref.key)
        else:  # no API server locally: the key is the file STATE/configmaps/<name>/<key>, linked in
            fields["file"] = FileSource(path=f"{LOCAL_VOLUME_DIR}/{config_map_volume(source.name)}/{ref.key}")
    elif source.git is not None:
        git = source.git
        # HTTP basic auth; the password is read from the mounted Secret key, never from the config.
        password = secret_file_path(world.platform, git_password_file(source.name))
        fields["git"] = GitSource.of(git, git.auth.username if git.auth else None, password)
    elif source.api is not None:
        fields["api"] = ApiSource(endpoint=source.api.endpoint)
        fields["format"] = "upstream"  # an API source always speaks the upstream format
    elif source.url is not None:
        fields["url"] = UrlSource(endpoint=source.url.endpoint)
    elif source.kubernetes is not None:
        namespaces = source.kubernetes.namespaces or [registry.namespace]
        fields["kubernetes"] = KubernetesSource(namespaces=namespaces)
        fields["format"] = "upstream"
    elif source.pvc_ref is not None:
        fields["file"] = FileSource(path=claim_file_path(world.platform, source.name, source.pvc_ref.path))
    return Source(**fields)


def claim_volume(source: str) -> str:
    """The volume (pod volume on Kubernetes, local volume folder) of a `pvcRef` source."""
    return f"pvc-{source}"[:63].rstrip("-")


def config_map_volume(source: str) -> str:
    """The local volume folder of a `configMapRef` source (its ConfigMap key written as a file)."""
    return f"cm-{source}"[:63].rstrip("-")


def _config_map_volumes(registry: MCPRegistry, platform: Platform) -> tuple[VolumeFiles, ...]:
    """Locally, each `configMapRef` source's key as a file of the registry's config folder."""
    if platform == "kubernetes":
        return ()
    return tuple(
        VolumeFiles(
            config_map_volume(s.name),
            config_map=s.config_map_ref.name,
            items=((s.config_map_ref.key, s.config_map_ref.key),),
        )
        for s in registry.spec.registries or ()
        if s.config_map_ref is not None
    )


def claim_file_path(platform: Platform, source: str, path: str) -> str:
    """Where the registry reads a `pvcRef` source's file: under the claim's mount at
    `/config/registry/<source>/` (ToolHive's layout) or, locally, under the claim's folder linked
    into the config folder (relative paths are read against it)."""
    if platform == "kubernetes":
        return f"{PVC_MOUNT_ROOT}/{source}/{path}"
    return f"{LOCAL_VOLUME_DIR}/{claim_volume(source)}/{path}"


def _claims(
    registry: MCPRegistry, platform: Platform
) -> tuple[dict[str, Any] | None, tuple[VolumeFiles, ...]]:
    """The pod template (Kubernetes) or local volumes of the `pvcRef` sources: each claim mounted
    read-only (the registry only reads it)."""
    sources = [s for s in registry.spec.registries or () if s.pvc_ref is not None]
    if not sources:
        return None, ()
    if platform != "kubernetes":
        return None, tuple(
            VolumeFiles(claim_volume(s.name), claim=s.pvc_ref.claim_name) for s in sources if s.pvc_ref
        )
    volumes = [
        {
            "name": claim_volume(s.name),
            "persistentVolumeClaim": {"claimName": s.pvc_ref.claim_name, "readOnly": True},
        }
        for s in sources
        if s.pvc_ref
    ]
    mounts = [
        {"name": claim_volume(s.name), "mountPath": f"{PVC_MOUNT_ROOT}/{s.name}", "readOnly": True}
        for s in sources
    ]
    return {"spec": {"volumes": volumes, "containers": [{"name": CONTAINER, "volumeMounts": mounts}]}}, ()


def _database(registry: MCPRegistry, world: World) -> Database:
    db = registry.spec.database_config
    if db is not None:
        if world.platform != "kubernetes":
            raise RenderError("spec.databaseConfig: the password Secret needs Kubernetes; use SQLite locally")
        return Database(
            url=f"postgresql+asyncpg://{db.user}@{db.host}:{db.port}/{db.database}?ssl={db.ssl_mode}",
            passwordFile=f"{KUBERNETES_SECRET_DIR}/{DB_PASSWORD_FILE}",
        )
    return Database(url=_sqlite_url(registry, world))


def _publish_auth(registry: MCPRegistry, world: World) -> IncomingAuthPlan:
    publish = registry.spec.publish
    if publish is None:
        return IncomingAuthPlan()
    return incoming_auth(publish.oidc_config, publish.oidc_config_ref, world.platform, where="spec.publish")


def _publish(registry: MCPRegistry, world: World) -> Publish | None:
    publish = registry.spec.publish
    auth = _publish_auth(registry, world)
    if publish is None or auth.problems or (auth.document is None and not publish.anonymous_login):
        return None
    key_file = (
        secret_file_path(world.platform, TOKEN_KEY_FILE)
        if publish.token_signing_key_secret_ref is not None
        else None
    )
    return Publish.model_validate(
        {
            "auth": auth.document,
            "scope": publish.scope,
            "grants": [g.dump() for g in publish.grants],
            "emailDomainNamespaces": publish.email_domain_namespaces,
            "precedence": publish.precedence,
            "anonymousLogin": publish.anonymous_login,
            "tokenSigningKeyFile": key_file,
        }
    )


def _sqlite_url(registry: MCPRegistry, world: World) -> str | None:
    # On Kubernetes the config is mounted read-only: the SQLite file lives in the scratch volume.
    return f"sqlite+aiosqlite:///{DATA_DIR}/{registry.name}.db" if world.platform == "kubernetes" else None


def render_config(registry: MCPRegistry, world: World) -> RegistryConfig:
    """The registry server config (the server's own model), built from the spec's typed sources or
    translated from configYAML (`reconcile/registryconfig.py`)."""
    if registry.spec.config_yaml is not None:
        translated = plan_config_yaml(registry, world.platform, CONTAINER, _sqlite_url(registry, world))
        if translated.config is None:
            raise RenderError("; ".join(translated.problems))
        return translated.config
    database = _database(registry, world)
    try:
        return RegistryConfig(
            registryName=registry.name,
            sources=[_source(registry, s, world) for s in registry.spec.registries or ()],
            database=database,
            publish=_publish(registry, world),
        )
    except ValueError as exc:
        raise RenderError(f"rendered registry config is invalid: {exc}") from exc


def _config(
    registry: MCPRegistry, world: World, problems: list[str]
) -> tuple[ConfigYAMLPlan, tuple[ConfigFile, ...]]:
    """The registry server's config file, from `configYAML` or the typed spec; problems appended."""
    spec = registry.spec
    config_files: tuple[ConfigFile, ...] = ()
    translated = ConfigYAMLPlan()
    if spec.config_yaml is not None:
        translated = plan_config_yaml(registry, world.platform, CONTAINER, _sqlite_url(registry, world))
        problems.extend(translated.problems)
        if translated.config is not None:
            config_files = (
                ConfigFile(CONFIG_FILE, yaml.safe_dump(translated.config.dump(), sort_keys=True)),
            )
    else:
        try:
            config_files = (
                ConfigFile(
                    CONFIG_FILE, yaml.safe_dump(render_config(registry, world).dump(), sort_keys=True)
                ),
            )
        except RenderError as exc:
            problems.append(str(exc))
    return translated, config_files


def _rbac(registry: MCPRegistry, translated: ConfigYAMLPlan) -> tuple[RbacRule, ...]:
    """What the registry reads through the API: the ConfigMaps of its sources, the workloads it lists."""
    spec = registry.spec
    typed = spec.registries or ()
    config_maps = tuple(sorted({s.config_map_ref.name for s in typed if s.config_map_ref}))
    rules: list[RbacRule] = []
    if config_maps:
        rules.append(RbacRule(("",), ("configmaps",), ("get", "list", "watch"), resource_names=config_maps))
    if any(s.kubernetes is not None for s in typed) or translated.watches_workloads:
        rules.append(
            RbacRule(
                ("mcpfleet.dev",),
                ("mcpservers", "virtualmcpservers", "mcpremoteproxies"),
                ("get", "list", "watch"),
            )
        )
    return tuple(rules)


def plan(registry: MCPRegistry, world: World) -> WorkloadPlan:
    """What should run for `registry`: `mcpfleet registry serve` with its rendered config."""
    spec = registry.spec
    problems: list[str] = []
    if world.platform == "kubernetes":
        problems.extend(child_name_problem("MCPRegistry", registry.name))
    translated, config_files = _config(registry, world, problems)
    command = serve_command("registry", CONFIG_FILE)
    claim_pod, claim_volumes = _claims(registry, world.platform)
    rbac: tuple[RbacRule, ...] = ()
    secret_files = _git_secret_files(registry) + translated.secret_files
    if spec.publish is not None and spec.publish.token_signing_key_secret_ref is not None:
        secret_files += (SecretFile(TOKEN_KEY_FILE, spec.publish.token_signing_key_secret_ref),)
    kubernetes = world.platform == "kubernetes"
    auth = _publish_auth(registry, world)
    problems.extend(auth.problems)
    if kubernetes and spec.publish is not None and spec.database_config is None and spec.storage is None:
        problems.append(
            "spec.publish: published entries must outlive the pod: set databaseConfig or "
            "storage.persistentVolumeClaimName (the default SQLite file is in an emptyDir)"
        )
    if kubernetes:
        command += ["--host", "0.0.0.0"]
        rbac = _rbac(registry, translated)
        if spec.database_config is not None:
            ref = spec.database_config.db_app_user_password_secret_ref
            secret_files += (SecretFile(DB_PASSWORD_FILE, SecretKeyRef(name=ref.name, key=ref.key)),)
    return WorkloadPlan(
        kind="MCPRegistry",
        name=registry.name,
        namespace=registry.namespace,
        replicas=1 if spec.replicas is None else spec.replicas,
        containers=(
            Container(
                name=CONTAINER,
                command=tuple(command),
                port=PORT,
                env=(*tracing_env(world, "MCPRegistry", registry.name), *translated.env),
                secret_env=auth.secret_env,
                service_account_token=auth.service_account_token,
            ),
        ),
        serving_container=CONTAINER,
        url_path="",
        # Ready = every source has data to serve (`/readiness`, 503 until the first good sync), on both
        # platforms: the pod's readiness probe, and locally the status `up` reports.
        health_path="/readiness",
        config_files=config_files,
        rbac=rbac,
        labels=labels("MCPRegistry", registry.name, "registry"),
        problems=tuple(problems),
        secret_files=secret_files,
        config_map_files=auth.config_map_files,
        volume_files=translated.volume_files + claim_volumes + _config_map_volumes(registry, world.platform),
        pod_template=translated.pod_template or claim_pod,
        overrides=_overrides(registry) if kubernetes else None,
        conditions=local_condition(world, _overrides(registry)),
        data_dir=DATA_DIR
        if kubernetes and spec.database_config is None and not _configured_database(registry)
        else None,
        data_claim=spec.storage.persistent_volume_claim_name
        if kubernetes and spec.storage is not None and spec.database_config is None
        else None,
    )


def _configured_database(registry: MCPRegistry) -> bool:
    return registry.spec.config_yaml is not None and registry.spec.server_config.database is not None


def _overrides(registry: MCPRegistry) -> KubernetesOverrides | None:
    """`podTemplateSpec` and `imagePullSecrets` (Kubernetes only)."""
    spec = registry.spec
    overrides = KubernetesOverrides(
        image_pull_secrets=tuple(s.name for s in spec.image_pull_secrets or ()),
        pod_template=spec.pod_template_spec,
    )
    return None if overrides.empty else overrides


def status(
    previous: MCPRegistryStatus,
    registry: MCPRegistry,
    plan: WorkloadPlan,
    observation: WorkloadObservation | None,
    now: str | None = None,
) -> MCPRegistryStatus:
    """The flat registry status; the shared workload rule, with no Stopped phase (a registry at 0
    replicas is Pending, not serving)."""
    from mcpfleet.api.meta import WorkloadStatus

    shared = workload_status(
        WorkloadStatus(conditions=list(previous.conditions)), plan, observation, registry.generation, now=now
    )
    return as_kind_status(MCPRegistryStatus, shared, "Pending" if shared.phase == "Stopped" else shared.phase)
