"""MCPRegistry `enforceServers`: which images an MCPServer / EmbeddingServer may run in a namespace.

ToolHive's v1alpha1 rule (its operator's `RegistryEnforcingValidator`, removed upstream in #4776 when
the registry-storage ConfigMap it read stopped being written): when any MCPRegistry of the namespace
sets `enforceServers`, a server's `spec.image` must be listed by at least one enforcing registry; the
label `toolhive.stacklok.io/registry-name` (or `mcpfleet.dev/registry-name`) restricts the check to
that registry (missing: refused; not enforcing: not checked). A refused server is Failed with the
condition ImageValidated False (reason ImageValidationFailed) and nothing runs; an accepted one has
ImageValidated True (ImageValidationSuccess). Without enforcement there is no condition.

The listed images are read by the platform, never fetched by a rule (`World.registry_images`): the
registry data the control plane can read itself - `configMapRef` sources (the ConfigMap on
Kubernetes, `STATE/configmaps/<name>/<key>` locally) and, locally, `pvcRef` files. Sources it cannot
read (git, url, api, kubernetes, a claim on Kubernetes, configYAML) are named in the message when an
image is not found, so an operator knows where to list approved images. Comparison is exact, as in
ToolHive: `servers[*].image` and `groups[*].servers[*].image` of a ToolHive-format file, the OCI
packages (`identifier`, `identifier:version` when the version is separate) of an upstream one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mcpfleet.api.mcpregistry import MCPRegistry, RegistrySource
from mcpfleet.api.meta import ConditionStatus

REGISTRY_LABELS = ("toolhive.stacklok.io/registry-name", "mcpfleet.dev/registry-name")
CONDITION = "ImageValidated"
MAX_REGISTRY_BYTES = 10 * 1024 * 1024
"""A registry file larger than this is not read for enforcement (the registry server's own limit)."""


@dataclass(frozen=True)
class RegistryImages:
    """What the platform read of one MCPRegistry for enforcement."""

    enforce: bool
    images: frozenset[str] = frozenset()
    unread: tuple[str, ...] = ()
    """Sources whose data the control plane does not read, e.g. `spec.registries[1] (git)`."""
    errors: tuple[str, ...] = ()
    """Sources that could not be read or parsed, with the reason."""


@dataclass(frozen=True)
class Verdict:
    """The outcome for one server: a condition to set (or none) and a problem (refused) or none."""

    condition: tuple[str, ConditionStatus, str, str] | None = None
    problem: str | None = None


def readable(registry: MCPRegistry, local: bool) -> list[tuple[int, RegistrySource]]:
    """The typed sources whose data the platform reads for enforcement (see the module docstring)."""
    return [
        (i, s)
        for i, s in enumerate(registry.spec.registries or ())
        if s.config_map_ref is not None or (local and s.pvc_ref is not None)
    ]


def unread(registry: MCPRegistry, local: bool) -> tuple[str, ...]:
    """The sources not read for enforcement, named by field."""
    if registry.spec.config_yaml is not None:
        return ("spec.configYAML",)
    read = {i for i, _ in readable(registry, local)}
    out = []
    for i, source in enumerate(registry.spec.registries or ()):
        if i not in read:
            kind = next(k for k in ("git", "api", "url", "kubernetes", "pvcRef") if _set(source, k))
            out.append(f"spec.registries[{i}] ({kind})")
    return tuple(out)


def _set(source: RegistrySource, wire: str) -> bool:
    attr = {"pvcRef": "pvc_ref"}.get(wire, wire)
    return getattr(source, attr) is not None


def images_of(fmt: str, content: bytes) -> frozenset[str]:
    """The images a registry file lists (raises ValueError naming what is wrong)."""
    if len(content) > MAX_REGISTRY_BYTES:
        raise ValueError(f"larger than {MAX_REGISTRY_BYTES} bytes")
    try:
        document = json.loads(content)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    return _toolhive_images(document) if fmt == "toolhive" else _upstream_images(document)


def _toolhive_images(document: dict[str, Any]) -> frozenset[str]:
    """`servers[*].image` and `groups[*].servers[*].image` (ToolHive checked groups too)."""
    blocks: list[Any] = [document.get("servers")]
    groups = document.get("groups")
    if isinstance(groups, list):
        blocks.extend(g.get("servers") for g in groups if isinstance(g, dict))
    return frozenset(
        s["image"]
        for block in blocks
        if isinstance(block, dict)
        for s in block.values()
        if isinstance(s, dict) and isinstance(s.get("image"), str)
    )


def _upstream_images(document: dict[str, Any]) -> frozenset[str]:
    """The OCI packages of server.json entries: `identifier`, and `identifier:version` when the
    version is given apart from an untagged identifier."""
    found: set[str] = set()
    servers = document.get("servers")
    for item in servers if isinstance(servers, list) else ():
        server = item.get("server", item) if isinstance(item, dict) else None
        packages = server.get("packages") if isinstance(server, dict) else None
        for package in packages if isinstance(packages, list) else ():
            if not isinstance(package, dict) or package.get("registryType") != "oci":
                continue
            identifier, version = package.get("identifier"), package.get("version")
            if isinstance(identifier, str):
                found.add(identifier)
                if isinstance(version, str) and ":" not in identifier.rsplit("/", 1)[-1]:
                    found.add(f"{identifier}:{version}")
    return frozenset(found)


def check(image: str, labels: dict[str, str], registries: dict[str, RegistryImages]) -> Verdict:
    """ToolHive's rule for `image` of a server with `labels` among the namespace's registries."""
    named = next((labels[k] for k in REGISTRY_LABELS if k in labels), None)
    if named is not None:
        found = registries.get(named)
        if found is None:
            return _refused(f"the registry {named!r} named by its registry-name label does not exist")
        if not found.enforce:
            return Verdict()  # ToolHive: the named registry does not enforce, nothing is checked
        candidates = {named: found}
    else:
        candidates = {name: r for name, r in registries.items() if r.enforce}
        if not candidates:
            return Verdict()
    for name, registry in sorted(candidates.items()):
        if image in registry.images:
            return Verdict(
                (
                    CONDITION,
                    "True",
                    "ImageValidationSuccess",
                    f"image {image} is listed by MCPRegistry {name}",
                )
            )
    where = ", ".join(sorted(candidates))
    notes = [f"{name}: {e}" for name, r in sorted(candidates.items()) for e in r.errors]
    notes += [
        f"{name}: {', '.join(r.unread)} not read for enforcement"
        for name, r in sorted(candidates.items())
        if r.unread
    ]
    return _refused(
        f"image {image} is not listed by the enforcing MCPRegistry {where}"
        + (f" ({'; '.join(notes)})" if notes else "")
    )


def _refused(reason: str) -> Verdict:
    message = f"spec.image: {reason} (enforceServers)"
    return Verdict((CONDITION, "False", "ImageValidationFailed", message), message)


Read = tuple[str, int]
"""(registry name, index of the source in spec.registries): a source the platform reads."""


def to_read(registries: list[MCPRegistry], local: bool) -> list[tuple[MCPRegistry, int, RegistrySource]]:
    """The sources a platform reads for enforcement: those of enforcing registries it can read
    (nothing when no registry of the namespace enforces)."""
    return [(r, i, s) for r in registries if r.spec.enforce_servers for i, s in readable(r, local)]


def gather(
    registries: list[MCPRegistry], contents: dict[Read, bytes | str], local: bool
) -> dict[str, RegistryImages]:
    """`World.registry_images` from what the platform read (`contents`: the bytes of a source, or why
    it could not be read); empty when no registry of the namespace enforces."""
    if not any(r.spec.enforce_servers for r in registries):
        return {}
    out: dict[str, RegistryImages] = {}
    for registry in registries:
        if not registry.spec.enforce_servers:
            out[registry.name] = RegistryImages(enforce=False)
            continue
        images: set[str] = set()
        errors: list[str] = []
        for index, source in readable(registry, local):
            content = contents.get((registry.name, index), "not read")
            where = f"spec.registries[{index}]"
            if isinstance(content, str):
                errors.append(f"{where}: {content}")
                continue
            try:
                images |= images_of(source.format, content)
            except ValueError as exc:
                errors.append(f"{where}: {exc}")
        out[registry.name] = RegistryImages(
            enforce=True, images=frozenset(images), unread=unread(registry, local), errors=tuple(errors)
        )
    return out
