"""MCPRegistry `configYAML`: ToolHive's registry-server config translated into the registry's own config.

Why translate rather than teach the registry server ToolHive's format: the server's config
(`registry/config.py`) already is the one model of a source, a database and incoming auth, built from
the same spec classes; what a renderer must resolve (the registry's name for the kubernetes source's
label, the namespaces, the SQLite file, where a mounted file is on *this* platform) is resolved here,
once, for both platforms — so the server keeps one config format and both input shapes of MCPRegistry
(typed `registries` and `configYAML`) end in it.

Files named in configYAML are where `volumeMounts` put them:
* Kubernetes: paths are kept; `volumes` / `volumeMounts` are appended to the pod and the `registry`
  container (a strategic merge, as `podTemplateSpec`), and a path under no mount is a problem (nothing
  in the pod provides it).
* Local (`mcpfleet up`): a path under a mount of a configMap / secret / emptyDir volume becomes
  `volumes/<volume>/…` in the registry's config folder, written from the local ConfigMap and Secret
  sources (`VolumeFiles`); a persistentVolumeClaim volume is a link there to the claim's folder
  `STATE/persistentvolumeclaims/<claimName>/`; other volume kinds have no local meaning and are
  refused naming the volume; a path under no mount is a path on this machine.

`pgpassSecretRef` is ToolHive's plumbing: libpq (and asyncpg) ignore a pgpass file readable by others,
and Secret volumes are root-owned or group-readable, so an init container copies the key into an
emptyDir as the registry's user with mode 0600 and `PGPASSFILE` names it. Locally the key is written
0600 like every SecretFile.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from mcpfleet.api.mcpregistry import MCPRegistry, PgpassSecretRef, VolumeMount
from mcpfleet.api.meta import SecretKeyRef
from mcpfleet.api.registryconfig import OAuthProvider, RegistryServerConfig
from mcpfleet.api.registrysource import Source
from mcpfleet.api.registrysourcebase import KubernetesSource
from mcpfleet.auth.settings import IncomingAuthSettings, OIDCSettings
from mcpfleet.reconcile.model import (
    KUBERNETES_SECRET_DIR,
    LOCAL_VOLUME_DIR,
    Platform,
    SecretFile,
    VolumeFiles,
    secret_file_path,
)
from mcpfleet.registry.config import Database, RegistryConfig

PGPASS_FILE = "pgpass"
"""SecretFile name of the pgpass key."""
PGPASS_DIR = "/var/run/mcpfleet/pgpass"
"""The emptyDir the init container copies the pgpass file into (Kubernetes)."""
PGPASS_VOLUME = "pgpass"
PGPASS_INIT = "pgpass"
"""Name of the init container; its image is the registry's (filled in by the Kubernetes renderer)."""
DEFAULT_PUBLIC_PATHS = ("/health", "/readiness", "/version")
LOCAL_VOLUME_KINDS = ("configMap", "secret", "emptyDir", "persistentVolumeClaim")


@dataclass
class ConfigYAMLPlan:
    """What configYAML adds to the registry's plan."""

    config: RegistryConfig | None = None
    problems: list[str] = field(default_factory=list)
    secret_files: tuple[SecretFile, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    volume_files: tuple[VolumeFiles, ...] = ()
    pod_template: dict[str, Any] | None = None
    watches_workloads: bool = False


class _Paths:
    """Where a path named in configYAML is on the platform; problems name the key inside configYAML."""

    def __init__(self, registry: MCPRegistry, platform: Platform) -> None:
        spec = registry.spec
        self.platform = platform
        self.volumes = {v.name: (i, v) for i, v in enumerate(spec.volumes or ())}
        # Longest mount path first: the most specific mount wins, as in a container's file system.
        self.mounts = sorted(spec.volume_mounts or (), key=lambda m: len(m.mount_path), reverse=True)
        self.problems: list[str] = []

    def _mount(self, path: str) -> VolumeMount | None:
        return next(
            (m for m in self.mounts if path == m.mount_path or path.startswith(m.mount_path + "/")), None
        )

    def __call__(self, key: str, path: str) -> str:
        path = posixpath.normpath(path)  # checked absolute, without '..', by the configYAML model
        mount = self._mount(path)
        if self.platform == "kubernetes":
            if mount is None:
                self.problems.append(
                    f"spec.configYAML: {key}: {path} is under no spec.volumeMounts[].mountPath, so nothing "
                    "in the registry pod provides it"
                )
            return path
        if mount is None:
            return path  # locally a path outside the mounts is a file of this machine
        index, volume = self.volumes[mount.name]
        if volume.kind not in LOCAL_VOLUME_KINDS:
            self.problems.append(
                f"spec.volumes[{index}].{volume.kind}: {key} reads {path} from it, but only configMap, "
                "secret, emptyDir and persistentVolumeClaim volumes exist locally (as files in the "
                "registry's state folder; a claim is STATE/persistentvolumeclaims/<claimName>/)"
            )
            return path
        rest = path[len(mount.mount_path) :].lstrip("/")
        parts = [LOCAL_VOLUME_DIR, volume.name, mount.sub_path or "", rest]
        return posixpath.join(*[p for p in parts if p])


def _source(registry: MCPRegistry, source: Source, index: int, paths: _Paths) -> Source:
    """A configYAML source as the server reads it: the same model, its mounted files moved where the
    platform puts them and a kubernetes source's namespaces defaulted to the registry's own."""
    where = f"sources[{index}]"
    update: dict[str, Any] = {}
    if source.file is not None:
        path = paths(f"{where}.file.path", source.file.path)
        update["file"] = source.file.model_copy(update={"path": path})
    if source.git is not None and source.git.auth is not None:
        auth = source.git.auth
        password = paths(f"{where}.git.auth.passwordFile", auth.password_file)
        update["git"] = source.git.model_copy(
            update={"auth": auth.model_copy(update={"password_file": password})}
        )
    if source.kubernetes is not None and not source.kubernetes.namespaces:
        update["kubernetes"] = KubernetesSource(namespaces=[registry.namespace])
    return source.model_copy(update=update)


def _database(server: RegistryServerConfig, paths: _Paths, sqlite_url: str | None) -> Database:
    db = server.database
    if db is None:
        return Database(url=sqlite_url)
    fields: dict[str, Any] = {
        "url": f"postgresql+asyncpg://{db.user}@{db.host}:{db.port}/{db.database}?ssl={db.ssl_mode}",
        "migrationUser": db.migration_user,
    }
    if db.password_file is not None:
        fields["passwordFile"] = paths("database.passwordFile", db.password_file)
    if db.migration_password_file is not None:
        fields["migrationPasswordFile"] = paths("database.migrationPasswordFile", db.migration_password_file)
    # ToolHive's Go pool (open / idle connections) as SQLAlchemy's (kept open + overflow).
    if db.max_idle_conns is not None or db.max_open_conns is not None:
        size = db.max_idle_conns if db.max_idle_conns is not None else min(5, db.max_open_conns or 5)
        size = max(size, 1)
        fields["poolSize"] = size
        if db.max_open_conns is not None:
            fields["maxOverflow"] = max(db.max_open_conns - size, 0)
    if db.conn_max_lifetime is not None:
        fields["poolRecycle"] = db.conn_max_lifetime
    return Database.model_validate({k: v for k, v in fields.items() if v is not None})


def _auth(server: RegistryServerConfig, paths: _Paths) -> IncomingAuthSettings | None:
    auth = server.auth
    if auth.mode == "anonymous" or auth.oauth is None:
        return None
    provider: OAuthProvider = auth.oauth.providers[0]
    where = "auth.oauth.providers[0]"

    def file(key: str, value: str | None) -> str | None:
        return None if value is None else paths(f"{where}.{key}", value)

    urls = (provider.issuer_url, provider.jwks_url, provider.introspection_url)
    oidc = OIDCSettings(
        issuer=provider.issuer_url,
        audience=provider.audience,
        jwks_url=provider.jwks_url,
        client_id=provider.client_id,
        client_secret_file=file("clientSecretFile", provider.client_secret_file),
        introspection_url=provider.introspection_url,
        resource=auth.oauth.resource_url,
        scopes=list(auth.oauth.scopes_supported),
        # The model allows http:// on a loopback host only (ToolHive's rule).
        insecure_allow_http=any(u is not None and u.startswith("http://") for u in urls),
        jwks_ca_file=file("caCertPath", provider.ca_cert_path),
        jwks_token_file=file("authTokenFile", provider.auth_token_file),
        jwks_allow_private_ip=provider.allow_private_ip,
    )
    return IncomingAuthSettings(type="oidc", oidc=oidc)


def _volume_files(registry: MCPRegistry, problems: list[str]) -> tuple[VolumeFiles, ...]:
    out: list[VolumeFiles] = []
    for index, volume in enumerate(registry.spec.volumes or ()):
        if volume.config_map is not None:
            cm = volume.config_map
            items = None if cm.items is None else tuple((i.key, i.path) for i in cm.items)
            out.append(VolumeFiles(volume.name, config_map=cm.name, items=items, optional=bool(cm.optional)))
        elif volume.secret is not None:
            sec = volume.secret
            items = None if sec.items is None else tuple((i.key, i.path) for i in sec.items)
            out.append(
                VolumeFiles(volume.name, secret=sec.secret_name, items=items, optional=bool(sec.optional))
            )
        elif volume.empty_dir is not None:
            out.append(VolumeFiles(volume.name))
        elif volume.persistent_volume_claim is not None:
            out.append(VolumeFiles(volume.name, claim=volume.persistent_volume_claim.claim_name))
        else:
            problems.append(
                f"spec.volumes[{index}].{volume.kind}: no local meaning; locally only configMap, secret, "
                "emptyDir and persistentVolumeClaim volumes exist (as files in the registry's state folder)"
            )
    return tuple(out)


def _pod_template(
    registry: MCPRegistry, container: str, pgpass: PgpassSecretRef | None
) -> dict[str, Any] | None:
    spec = registry.spec
    volumes = [v.dump() for v in spec.volumes or ()]
    mounts = [m.dump() for m in spec.volume_mounts or ()]
    init: list[dict[str, Any]] = []
    if pgpass is not None:
        target = f"{PGPASS_DIR}/.pgpass"
        source = f"{KUBERNETES_SECRET_DIR}/{PGPASS_FILE}"
        copy = f"cp {source} {target} && chmod 0600 {target}"
        # optional: an absent Secret leaves no file in the projected volume, and no pgpass file.
        volumes.append({"name": PGPASS_VOLUME, "emptyDir": {}})
        mounts.append({"name": PGPASS_VOLUME, "mountPath": PGPASS_DIR})
        init.append(
            {
                "name": PGPASS_INIT,
                "command": [
                    "sh",
                    "-c",
                    f"[ ! -e {source} ] || {{ {copy}; }}" if pgpass.optional else copy,
                ],
                "volumeMounts": [
                    {"name": "secrets", "mountPath": KUBERNETES_SECRET_DIR, "readOnly": True},
                    {"name": PGPASS_VOLUME, "mountPath": PGPASS_DIR},
                ],
            }
        )
    if not volumes and not mounts:
        return None
    pod: dict[str, Any] = {"volumes": volumes, "containers": [{"name": container, "volumeMounts": mounts}]}
    if init:
        pod["initContainers"] = init
    return {"spec": pod}


def plan_config_yaml(
    registry: MCPRegistry, platform: Platform, container: str, sqlite_url: str | None
) -> ConfigYAMLPlan:
    """The registry config and pod plumbing of a configYAML MCPRegistry on `platform`."""
    spec = registry.spec
    server = spec.server_config
    paths = _Paths(registry, platform)
    out = ConfigYAMLPlan()
    pgpass = spec.pgpass_secret_ref
    if pgpass is not None:
        if server.database is None:
            out.problems.append("spec.pgpassSecretRef: configYAML has no database block to use it for")
        out.secret_files = (
            SecretFile(
                PGPASS_FILE, SecretKeyRef(name=pgpass.name, key=pgpass.key), optional=bool(pgpass.optional)
            ),
        )
        location = (
            f"{PGPASS_DIR}/.pgpass" if platform == "kubernetes" else secret_file_path(platform, PGPASS_FILE)
        )
        out.env = (("PGPASSFILE", location),)
    served = server.served_sources()
    indexes = {s.name: i for i, s in enumerate(server.sources)}
    try:
        out.config = RegistryConfig(
            registryName=registry.name,
            sources=[_source(registry, s, indexes[s.name], paths) for s in served],
            database=_database(server, paths, sqlite_url),
            auth=_auth(server, paths),
            publicPaths=[*DEFAULT_PUBLIC_PATHS, *server.auth.public_paths],
            aliases=[server.registries[0].name],
        )
    except ValueError as exc:
        out.problems.append(f"spec.configYAML: cannot be served: {exc}")
    out.problems.extend(paths.problems)
    out.watches_workloads = any(s.kubernetes is not None for s in served)
    if platform == "kubernetes":
        out.pod_template = _pod_template(registry, container, pgpass)
    else:
        out.volume_files = _volume_files(registry, out.problems)
    return out
