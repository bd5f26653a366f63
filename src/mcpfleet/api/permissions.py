"""MCPServer `permissionProfile`: ToolHive's reference to a permission profile, and the profile document.

The CRD field is ToolHive's reference `{type: builtin|configmap, name, key}`: a built-in profile
(`none`: no network; `network`: outbound network open) or a profile document kept in a key of a
ConfigMap. The document is ToolHive's JSON (snake_case keys, as in ToolHive's registry `permissions`):

    {"read": ["/abs/path"], "write": ["/abs/path"],
     "network": {"outbound": {"insecure_allow_all": false, "allow_host": [".example.com"], "allow_port": [443]}}}

`parse_profile` validates a document (unknown keys, relative or odd paths, `insecure_allow_all`
together with allow-lists, `privileged`) and answers a `ProfileError` naming the key. What each
platform makes of a profile is in `reconcile/permissions.py`; the local sandbox in
`platform/local/sandbox.py`.
"""

from __future__ import annotations

import json
import posixpath
import re
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from mcpfleet.api.meta import Rule, RuleModel, location

BUILTIN_NAMES = ("none", "network")
DEFAULT_BUILTIN = "network"
"""The profile of a server whose manifest has no permissionProfile: its filesystem is still
isolated (sandbox / restricted pod); outbound network stays open because uvx and npx fetch the
package at start. Widen or narrow it with an explicit profile."""
MAX_PROFILE_BYTES = 64 * 1024
MAX_ENTRIES = 64
MAX_PATH = 4096
# Paths a profile may not name: the whole filesystem, or kernel interfaces a sandbox must not expose.
_REFUSED_ROOTS = ("/proc", "/sys", "/dev")
HOST_PATTERN = (
    r"^\.?[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)


class ProfileError(ValueError):
    """A profile document that cannot apply; the message names the key."""


class PermissionProfileRef(RuleModel):
    """Which permission profile the MCP server runs with (ToolHive's shape): a built-in one or a
    profile document in a ConfigMap key."""

    rules = (
        Rule(
            cel="self.type != 'builtin' || self.name in ['none', 'network']",
            message="a builtin permission profile is 'none' or 'network'",
            field_path=".name",
            check=lambda s: s.type != "builtin" or s.name in BUILTIN_NAMES,
        ),
        Rule(
            cel="self.type != 'builtin' || !has(self.key)",
            message="key names a ConfigMap key: only with type configmap",
            field_path=".key",
            check=lambda s: s.type != "builtin" or s.key is None,
        ),
        Rule(
            cel="self.type != 'configmap' || has(self.key)",
            message="a configmap permission profile needs key (the ConfigMap key holding the profile JSON)",
            field_path=".key",
            check=lambda s: s.type != "configmap" or s.key is not None,
        ),
    )

    type: Literal["builtin", "configmap"] = "builtin"
    """builtin (name is `none` or `network`) or configmap (name is a ConfigMap, key its key)."""
    name: str = Field(min_length=1, max_length=253)
    """The built-in profile (`none`: no network; `network`: outbound open), or the ConfigMap's name."""
    key: str | None = Field(default=None, min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")
    """The ConfigMap key holding the profile JSON (type configmap only)."""

    @property
    def label(self) -> str:
        """How status and describe name the profile."""
        return f"builtin {self.name}" if self.type == "builtin" else f"configmap {self.name}/{self.key}"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OutboundPermissions(_Strict):
    insecure_allow_all: StrictBool = False
    allow_host: tuple[StrictStr, ...] = Field(default=(), max_length=MAX_ENTRIES)
    allow_port: tuple[StrictInt, ...] = Field(default=(), max_length=MAX_ENTRIES)

    @field_validator("allow_host")
    @classmethod
    def _hosts(cls, hosts: tuple[str, ...]) -> tuple[str, ...]:
        for index, host in enumerate(hosts):
            if len(host) > 253 or not re.fullmatch(HOST_PATTERN, host):
                raise ValueError(f"[{index}] {host[:80]!r} is not a host name or a .domain suffix")
        return hosts

    @field_validator("allow_port")
    @classmethod
    def _ports(cls, ports: tuple[int, ...]) -> tuple[int, ...]:
        for index, port in enumerate(ports):
            if isinstance(port, bool) or not 1 <= port <= 65535:
                raise ValueError(f"[{index}] {port!r} is not a port 1-65535")
        return ports

    @model_validator(mode="after")
    def _exclusive(self) -> OutboundPermissions:
        if self.insecure_allow_all and (self.allow_host or self.allow_port):
            raise ValueError(
                "insecure_allow_all opens every host and port: drop it, or drop allow_host / allow_port"
            )
        return self


class NetworkPermissions(_Strict):
    outbound: OutboundPermissions = Field(default_factory=OutboundPermissions)


def check_grant_path(path: str) -> str:
    """`path` normalised, or ValueError saying why it cannot be granted (relative, `.` / `..` / `//`,
    control characters, `/`, a kernel interface): the rule of profile paths and of MCPServer volumes."""
    if not path.startswith("/"):
        raise ValueError(f"{path[:80]!r} is not an absolute path")
    if len(path) > MAX_PATH or "\0" in path or any(ord(c) < 32 for c in path):
        raise ValueError(f"{path[:80]!r}: too long or holds control characters")
    parts = path.split("/")
    if ".." in parts or "." in parts or "//" in path:
        raise ValueError(f"{path[:80]!r}: not a normal path (no '.', '..' or '//')")
    normal = posixpath.normpath(path)
    if normal == "/":
        raise ValueError("'/' would show the whole filesystem: name the folders the server needs")
    if any(normal == root or normal.startswith(root + "/") for root in _REFUSED_ROOTS):
        raise ValueError(f"{path[:80]!r}: kernel interfaces (/proc, /sys, /dev) cannot be granted")
    return normal


class PermissionProfile(_Strict):
    """ToolHive's permission profile document (what a ConfigMap key holds)."""

    read: tuple[StrictStr, ...] = Field(default=(), max_length=MAX_ENTRIES)
    write: tuple[StrictStr, ...] = Field(default=(), max_length=MAX_ENTRIES)
    network: NetworkPermissions = Field(default_factory=NetworkPermissions)
    privileged: StrictBool = False

    @field_validator("read", "write")
    @classmethod
    def _paths(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        out = []
        for index, path in enumerate(paths):
            try:
                out.append(check_grant_path(path))
            except ValueError as exc:
                raise ValueError(f"[{index}] {exc}") from None
        return tuple(out)

    @field_validator("privileged")
    @classmethod
    def _unprivileged(cls, privileged: bool) -> bool:
        if privileged:
            raise ValueError("a privileged server would have every device and capability: refused")
        return privileged

    @property
    def outbound(self) -> OutboundPermissions:
        return self.network.outbound

    @property
    def network_mode(self) -> Literal["none", "all", "restricted"]:
        """none: no outbound network; all: outbound open; restricted: only the allow-lists."""
        if self.outbound.insecure_allow_all:
            return "all"
        return "restricted" if self.outbound.allow_host or self.outbound.allow_port else "none"


BUILTIN: dict[str, PermissionProfile] = {
    "none": PermissionProfile(),
    "network": PermissionProfile(
        network=NetworkPermissions(outbound=OutboundPermissions(insecure_allow_all=True))
    ),
}


def parse_profile(text: str | bytes) -> PermissionProfile:
    """A profile document from its JSON; ProfileError naming the key when it is not a valid one."""
    if len(text) > MAX_PROFILE_BYTES:
        raise ProfileError(f"the profile is over {MAX_PROFILE_BYTES} bytes")
    try:
        raw = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProfileError(f"not JSON ({exc})") from None
    if not isinstance(raw, dict):
        raise ProfileError("a profile is a JSON object with read, write and network")
    try:
        return PermissionProfile.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = location(error["loc"]) or "profile"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = (
                "unknown key (ToolHive's keys: read, write, network.outbound.{insecure_allow_all,"
                " allow_host, allow_port})"
            )
        raise ProfileError(f"{where}: {message}") from None
