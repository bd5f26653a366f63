"""Apply only the differences between rendered children and the live ones.

A child is skipped when the live object carries the same `mcpfleet.dev/applied-hash` (the manifest
did not change) and shows no drift in the fields that matter (Deployment replicas and pod template
checksum, owner uid through the hash). Everything else is server-side applied; children of the
object that are no longer rendered (a Role after its rules went away) are deleted. An idle pass
therefore makes no request at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcpfleet.api.meta import ANNOTATION_CONFIG_CHECKSUM
from mcpfleet.platform.kubernetes.api import KubeApi
from mcpfleet.platform.kubernetes.render import ANNOTATION_APPLIED_HASH, manifest_key

ChildKey = tuple[str, str, str, str]


@dataclass
class ApplyResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    applied: dict[ChildKey, dict[str, Any]] = field(default_factory=dict)
    """Objects as returned by the API server (the caller refreshes its cache with them)."""

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)


def _annotation(obj: Mapping[str, Any], name: str) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(name)


def unchanged(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """True when applying `desired` would change nothing we care about."""
    if live is None:
        return False
    if _annotation(live, ANNOTATION_APPLIED_HASH) != _annotation(desired, ANNOTATION_APPLIED_HASH):
        return False
    if desired["kind"] == "Deployment":
        want, have = desired["spec"], live.get("spec") or {}
        if want.get("replicas") != have.get("replicas"):
            return False
        want_sum = _annotation(want["template"], ANNOTATION_CONFIG_CHECKSUM)
        if want_sum != _annotation(have.get("template") or {}, ANNOTATION_CONFIG_CHECKSUM):
            return False
    return True


def describe(key: ChildKey) -> str:
    return f"{key[1]} {key[3]}"


async def apply_children(
    api: KubeApi,
    desired: Iterable[dict[str, Any]],
    live: Callable[[ChildKey], dict[str, Any] | None],
    existing: Iterable[ChildKey],
) -> ApplyResult:
    """Apply the changed children of `desired` and delete `existing` children that are not desired.

    The requests of one pass go out together: a pass costs one round trip, not one per child (the
    API server accepts the children in any order; the kubelet waits for a ConfigMap a pod mounts).
    """
    result = ApplyResult()
    wanted: set[ChildKey] = set()
    changed: list[tuple[ChildKey, dict[str, Any], bool]] = []
    for manifest in desired:
        key = manifest_key(manifest)
        wanted.add(key)
        current = live(key)
        if not unchanged(manifest, current):
            changed.append((key, manifest, current is not None))
    stale = sorted(set(existing) - wanted)
    applied = await asyncio.gather(*(api.apply(manifest) for _, manifest, _ in changed))
    await asyncio.gather(*(api.delete(*key) for key in stale))
    for (key, _, existed), obj in zip(changed, applied, strict=True):
        result.applied[key] = obj
        (result.updated if existed else result.created).append(describe(key))
    result.deleted.extend(describe(key) for key in stale)
    return result
