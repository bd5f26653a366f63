"""A source of registry entries as the registry server reads it: the one model of a source.

The registry server's config file (`mcpfleet.registry.config`) lists its sources with this model, and
MCPRegistry's `configYAML` (`mcpfleet.api.registryconfig`, ToolHive's registry-server configuration)
parses its `sources` with the same classes, so a configYAML source reaches the server as written
(only the paths of mounted files are moved where the platform puts them). The typed MCPRegistry spec
(`mcpfleet.api.mcpregistry`) is the one form that is translated into it, by `reconcile/mcpregistry.py`:
a Secret reference there becomes a mounted `passwordFile` here.

The spec's classes are the base where a concept already has one (the git reference, the upstream API
and URL endpoints, kubernetes discovery, sync policy, filters). What a source adds here is what the
server needs to fetch it: a file on its disk, a password in a mounted file rather than a Secret
reference, a ConfigMap with its namespace, time limits, paging and extra headers.

Inline credentials are refused with the reason (`password` of git auth): a config file, and a
ConfigMap holding configYAML even more, is no place for them. Keys are camelCase on the wire, like
ToolHive's configuration.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field, model_validator

from mcpfleet.api.duration import Duration
from mcpfleet.api.meta import DNS_LABEL_PATTERN, ApiModel, ConfigMapKeyRef
from mcpfleet.api.registrysourcebase import (
    APISource,
    GitRef,
    KubernetesSource,
    RegistryFilter,
    SourceFormat,
    SyncPolicy,
    URLSource,
)

SOURCE_KINDS = ("file", "url", "configMap", "git", "api", "kubernetes")
"""The kind keys of a source (as on the wire), exactly one of which is set."""

INLINE_CREDENTIAL = (
    "inline credentials are refused (a config file, or configYAML's ConfigMap, is no place for them): "
    "mount a Secret and name the file{hint}"
)


def refuse(data: Any, refused: dict[str, str]) -> Any:
    """Raise naming the first key of `refused` present in the mapping `data`, with its reason: keys
    refused on purpose (an unknown key is refused by the model anyway, but without saying why)."""
    if isinstance(data, dict):
        for key, why in refused.items():
            if key in data:
                raise ValueError(f"{key}: {why}")
    return data


class FileSource(ApiModel):
    """A registry file on the server's disk (a mounted ConfigMap, or a local file)."""

    path: str = Field(min_length=1, max_length=4096)
    """Path of the registry file; in the server's config file a relative path is relative to its folder."""


class UrlSource(URLSource):
    """The spec's URL source, fetched with GET under a time limit and extra headers."""

    endpoint: str = Field(alias="url", min_length=1, pattern=r"^https?://")
    """HTTP(S) address fetched with GET."""
    timeout: Duration = "30s"
    """Request timeout as a duration."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers (e.g. Authorization); never logged."""


class ConfigMapSource(ConfigMapKeyRef):
    """The spec's ConfigMap key, with the namespace it lives in."""

    namespace: str = Field(pattern=DNS_LABEL_PATTERN)
    """Namespace of the ConfigMap."""


class GitFileAuth(ApiModel):
    """HTTP basic auth toward a git repository, the password read from a mounted file."""

    username: str = Field(min_length=1, max_length=256)
    password_file: str = Field(min_length=1, max_length=4096)
    """File holding the password or token (e.g. a mounted Secret); sent as HTTP basic auth, never logged."""

    @model_validator(mode="before")
    @classmethod
    def _no_inline_password(cls, data: Any) -> Any:
        return refuse(data, {"password": INLINE_CREDENTIAL.format(hint=" in passwordFile")})


class GitSource(GitRef):
    """The spec's git reference with file-based credentials; the repository may also be a local path
    (anything `git clone` takes)."""

    repository: str = Field(min_length=1, max_length=4096)
    """Anything `git clone` accepts: URL or local path."""
    commit: str | None = Field(default=None, pattern=r"^[0-9a-fA-F]{7,40}$")
    """Commit to check out (a hash: a name is a branch or a tag)."""
    path: str = Field(default="registry.json", min_length=1, max_length=4096)
    """Path of the registry file inside the repository (any name: a local repository's file)."""
    auth: GitFileAuth | None = None
    """Credentials for an HTTP(S) repository."""

    @classmethod
    def of(cls, ref: GitRef, username: str | None, password_file: str | None) -> GitSource:
        """The typed spec's git reference, its Secret reference resolved to the mounted file."""
        auth = (
            None
            if username is None or password_file is None
            else GitFileAuth(username=username, password_file=password_file)
        )
        return cls(
            repository=ref.repository,
            branch=ref.branch,
            tag=ref.tag,
            commit=ref.commit,
            path=ref.path,
            auth=auth,
        )


class ApiSource(APISource):
    """The spec's upstream-registry API source, with paging, a time limit and extra headers."""

    endpoint: str = Field(
        min_length=1, pattern=r"^https?://", validation_alias=AliasChoices("endpoint", "url")
    )
    """Base URL of an upstream-compatible registry; `/v0.1/servers` is appended. (`url` is accepted too.)"""
    page_size: int = Field(default=100, ge=1, le=100)
    timeout: Duration = "30s"
    """Request timeout as a duration."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra request headers (e.g. Authorization); never logged."""


class Source(ApiModel):
    """One named source of entries: exactly one of file, url, configMap, git, api, kubernetes."""

    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN)
    """Unique name among the sources."""
    format: SourceFormat = "upstream"
    """Format of a file / url / configMap / git source: upstream (server.json) or toolhive (the legacy
    registry file)."""
    file: FileSource | None = None
    url: UrlSource | None = None
    config_map: ConfigMapSource | None = None
    git: GitSource | None = None
    api: ApiSource | None = None
    kubernetes: KubernetesSource | None = None
    sync_policy: SyncPolicy = Field(default_factory=lambda: SyncPolicy(interval="5m"))
    """How often to sync (kubernetes sources follow a watch as well)."""
    filter: RegistryFilter = Field(default_factory=RegistryFilter)
    """Which entries are served."""

    @model_validator(mode="before")
    @classmethod
    def _not_implemented(cls, data: Any) -> Any:
        return refuse(
            data,
            {
                "managed": "not supported here; publishing into a registry is the typed MCPRegistry's "
                "spec.publish (without configYAML)",
                "claims": "per-source authorization claims are not supported",
            },
        )

    @model_validator(mode="after")
    def _exactly_one_kind(self) -> Source:
        kinds = self._kinds()
        if len(kinds) != 1:
            got = ", ".join(kinds) if kinds else "none"
            raise ValueError(f"set exactly one of {', '.join(SOURCE_KINDS)} (got {got})")
        if kinds[0] in ("api", "kubernetes") and self.format != "upstream":
            raise ValueError(f"format must be 'upstream' for a {kinds[0]} source")
        return self

    def _kinds(self) -> list[str]:
        return [k for k in SOURCE_KINDS if getattr(self, "config_map" if k == "configMap" else k) is not None]

    @property
    def kind(self) -> str:
        """The kind key that is set, as on the wire (`configMap`)."""
        return self._kinds()[0]
