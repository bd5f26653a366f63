"""MCPServer `permissionProfile` resolved for a platform: which profile applies, and what cannot apply.

`resolve` turns the spec's reference (or its absence: builtin `network`, `api/permissions.py`) into
the profile document, the label status and describe show, and the problems that refuse the server
(a Failed status naming the field) rather than run it with less isolation than asked:

* a ConfigMap profile whose key is missing or whose document is invalid (the key inside it named);
* `allow_host` on Kubernetes for a server whose name leaves no room for its egress proxy's Service
  name (a NetworkPolicy cannot name hosts, so the server reaches them through an egress proxy of its
  own, `egress_proxy_env`; locally the sandbox's egress filter: `platform/local/egress.py`);
* `none` locally for an http server: its proxy must reach it over the network namespace it would
  not share.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.meta import ConditionStatus
from mcpfleet.api.permissions import (
    BUILTIN,
    DEFAULT_BUILTIN,
    PermissionProfile,
    ProfileError,
    parse_profile,
)
from mcpfleet.reconcile.common import DNS_LABEL_MAX, child_name
from mcpfleet.reconcile.model import World

FIELD = "spec.permissionProfile"
EGRESS_PORT = 3128
EGRESS_SUFFIX = "-egress"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
CONDITION_PERMISSION_PROFILE = "Permissions"
"""Kept at most as long as the other condition types: describe's table keeps its columns."""


@dataclass(frozen=True)
class ProfilePlan:
    """What `resolve` decided: the document (None when it cannot apply), its label and problems."""

    label: str
    profile: PermissionProfile | None
    problems: tuple[str, ...] = ()

    def condition(self, image: bool = False) -> tuple[str, ConditionStatus, str, str]:
        """`image`: the server runs from a container image locally (its files are the image's)."""
        if self.profile is None:
            return (CONDITION_PERMISSION_PROFILE, "False", "Invalid", f"{self.label}: {self.problems[0]}")
        text = summary(self.profile, image)
        return (CONDITION_PERMISSION_PROFILE, "True", "Applied", f"{self.label}: {text}")


def summary(profile: PermissionProfile, image: bool = False) -> str:
    """One line saying what the profile lets the server reach (for status and describe)."""
    outbound = profile.outbound
    if profile.network_mode == "all":
        network = "outbound network open"
    elif profile.network_mode == "none":
        network = "no network"
    else:
        allowed = [*outbound.allow_host, *(f"port {p}" for p in outbound.allow_port)]
        network = "outbound only to " + ", ".join(allowed)
    files = "the image's own, read-only (private /tmp)" if image else "own work folder only"
    if profile.read or profile.write:
        files += f", read {list(profile.read)}" if profile.read else ""
        files += f", write {list(profile.write)}" if profile.write else ""
    return f"{network}; files: {files}"


def _document(server: MCPServer, world: World) -> tuple[str, PermissionProfile | str]:
    ref = server.spec.permission_profile
    if ref is None:
        return f"builtin {DEFAULT_BUILTIN} (default)", BUILTIN[DEFAULT_BUILTIN]
    if ref.type == "builtin":
        return ref.label, BUILTIN[ref.name]
    assert ref.key is not None  # the model's rule
    text = world.profile_documents.get((ref.name, ref.key))
    if text is None:
        where = (
            f"write the profile JSON to STATE/configmaps/{ref.name}/{ref.key}"
            if world.platform == "local"
            else f"create ConfigMap {ref.name} with key {ref.key}"
        )
        return ref.label, f"{FIELD}: ConfigMap {ref.name} key {ref.key} not found ({where})"
    try:
        return ref.label, parse_profile(text)
    except ProfileError as exc:
        return ref.label, f"{FIELD}: ConfigMap {ref.name} key {ref.key}: {exc}"


def _platform_problems(server: MCPServer, profile: PermissionProfile, world: World) -> list[str]:
    outbound = profile.outbound
    problems = []
    if world.platform != "local":
        egress = egress_name(server.name)
        if outbound.allow_host and len(egress) > DNS_LABEL_MAX:
            problems.append(
                f"{FIELD}: network.outbound.allow_host: the server's egress proxy Service {egress} would"
                f" be over {DNS_LABEL_MAX} characters: shorten metadata.name"
            )
        return problems
    if server.spec.transport != "stdio" and profile.network_mode != "all":
        problems.append(
            f"{FIELD}: an http server ({server.spec.transport}) is reached over the network, so locally"
            " its sandbox shares the network: give it a profile with outbound network (builtin network)"
        )
    return problems


def egress_name(server_name: str) -> str:
    """The Deployment and Service of a server's egress proxy on Kubernetes."""
    return child_name("MCPServer", server_name) + EGRESS_SUFFIX


def egress_proxy_env(
    server: MCPServer, world: World, profile: PermissionProfile | None
) -> tuple[tuple[str, str], ...]:
    """On Kubernetes, a profile with `allow_host` sends the server's traffic through its egress proxy
    (the NetworkPolicy lets it reach nothing else): the proxy variables pointing at that Service."""
    if world.platform != "kubernetes" or profile is None or not profile.outbound.allow_host:
        return ()
    url = f"http://{egress_name(server.name)}.{server.namespace}.svc:{EGRESS_PORT}"
    return (*((name, url) for name in PROXY_VARIABLES), ("NO_PROXY", ""), ("no_proxy", ""))


def resolve(server: MCPServer, world: World) -> ProfilePlan:
    """The profile that applies to `server` on `world.platform` (see the module docstring)."""
    label, document = _document(server, world)
    if isinstance(document, str):
        return ProfilePlan(label, None, (document,))
    problems = _platform_problems(server, document, world)
    if problems:
        return ProfilePlan(label, None, tuple(problems))
    return ProfilePlan(label, document)
