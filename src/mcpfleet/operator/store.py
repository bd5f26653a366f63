"""The operator's in-memory view of the cluster, fed by kopf watch events.

Every mcpfleet object (parsed once into its model, or the validation error) and every child the
operator manages is kept here, so a reconcile reads the world without a single GET: "children read
once per reconcile" becomes "children read zero times per reconcile". Writes made by the operator
update the store with the API server's response at once; a watch event carrying an older
resourceVersion never replaces a newer object.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from mcpfleet.api.kinds import KIND_BY_NAME, ManifestError, parse_manifest
from mcpfleet.api.resource import Resource
from mcpfleet.platform.kubernetes.observe import reconcile_inputs

ObjKey = tuple[str, str, str]
"""(kind, namespace, name) of an mcpfleet object."""
ChildKey = tuple[str, str, str, str]
"""(apiVersion, kind, namespace, name) of a child."""


@dataclass
class Entry:
    """One mcpfleet object: the raw body, and its model or why it does not validate."""

    raw: dict[str, Any]
    model: Resource | None
    error: str | None

    @property
    def uid(self) -> str:
        return str(self.raw["metadata"].get("uid", ""))

    @property
    def generation(self) -> int:
        return int(self.raw["metadata"].get("generation") or 1)

    @property
    def deleting(self) -> bool:
        return bool(self.raw["metadata"].get("deletionTimestamp"))


def _newer(incoming: dict[str, Any], current: dict[str, Any] | None) -> bool:
    """resourceVersions are opaque, but etcd's are integers: use them when both are."""
    if current is None:
        return True
    new = str(incoming.get("metadata", {}).get("resourceVersion", ""))
    old = str(current.get("metadata", {}).get("resourceVersion", ""))
    if new.isdigit() and old.isdigit():
        return int(new) >= int(old)
    return True


def parse(raw: dict[str, Any]) -> Entry:
    """Validate an object the API server holds; the error names the field like manifest errors do."""
    document = {k: v for k, v in raw.items() if k in ("apiVersion", "kind", "metadata", "spec")}
    document["metadata"] = {
        k: v
        for k, v in raw.get("metadata", {}).items()
        if k in ("name", "namespace", "labels", "annotations", "generation", "uid", "resourceVersion")
    }
    try:
        model = parse_manifest(document)
    except ManifestError as exc:
        return Entry(raw=raw, model=None, error=str(exc))
    except ValidationError as exc:
        return Entry(raw=raw, model=None, error=str(exc))
    status = raw.get("status")
    if status:
        kind = KIND_BY_NAME[raw["kind"]]
        try:
            model = kind.model_validate({**model.dump(), "status": status})
        except ValidationError:
            pass  # a status written by an older version: recomputed on this pass anyway
    return Entry(raw=raw, model=model, error=None)


class Store:
    """Objects and children by key, plus the owner index of the children."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[tuple[str, str], Entry]] = defaultdict(dict)
        self.children: dict[ChildKey, dict[str, Any]] = {}
        self.children_of: dict[ObjKey, set[ChildKey]] = defaultdict(set)

    # -- mcpfleet objects -------------------------------------------------------------------
    def get(self, key: ObjKey) -> Entry | None:
        return self.objects[key[0]].get((key[1], key[2]))

    def put(self, raw: dict[str, Any]) -> tuple[Entry | None, Entry]:
        """Store an object; returns (previous, current). An older version is ignored."""
        meta = raw["metadata"]
        meta.pop("managedFields", None)  # large and never read: keep memory flat at 1,000s of objects
        slot = (meta.get("namespace", ""), meta["name"])
        previous = self.objects[raw["kind"]].get(slot)
        if previous is not None and (
            not _newer(raw, previous.raw)
            or previous.raw["metadata"].get("resourceVersion") == meta.get("resourceVersion")
        ):
            return previous, previous  # older, or the version already held (our own write's echo)
        if previous is not None and previous.raw.get("metadata", {}).get("uid") != meta.get("uid"):
            previous = None  # deleted and re-created under the same name: a different object
        if (
            previous is not None
            and previous.raw.get("spec") == raw.get("spec")
            and previous.raw["metadata"].get("generation") == meta.get("generation")
        ):
            # Same spec (a status or metadata change): keep the parsed spec, refresh raw and status.
            entry = Entry(raw=raw, model=previous.model, error=previous.error)
            if previous.model is not None and raw.get("status") != previous.raw.get("status"):
                entry = parse(raw)
        else:
            entry = parse(raw)
        self.objects[raw["kind"]][slot] = entry
        return previous, entry

    def remove(self, kind: str, namespace: str, name: str) -> Entry | None:
        return self.objects[kind].pop((namespace, name), None)

    def entries(self, kind: str, namespace: str | None = None) -> list[Entry]:
        return [e for (ns, _), e in self.objects[kind].items() if namespace is None or ns == namespace]

    def models(self, kind: str, namespace: str) -> list[Any]:
        return [
            e.model for (ns, _), e in self.objects[kind].items() if ns == namespace and e.model is not None
        ]

    def keys(self) -> list[ObjKey]:
        return [(kind, ns, name) for kind, objs in self.objects.items() for (ns, name) in objs]

    # -- children ---------------------------------------------------------------------------
    @staticmethod
    def owner_of(raw: dict[str, Any]) -> ObjKey | None:
        meta = raw.get("metadata", {})
        for ref in meta.get("ownerReferences") or ():
            if ref.get("controller") and str(ref.get("apiVersion", "")).startswith("mcpfleet.dev/"):
                return (ref["kind"], meta.get("namespace", ""), ref["name"])
        return None

    @staticmethod
    def child_key(raw: dict[str, Any]) -> ChildKey:
        meta = raw["metadata"]
        return (raw["apiVersion"], raw["kind"], meta.get("namespace", ""), meta["name"])

    def put_child(self, raw: dict[str, Any]) -> tuple[ObjKey | None, bool]:
        """Store a child; returns (its owner, whether a reconcile could see a difference).

        A newer version that differs only in fields no reconcile reads (`reconcile_inputs`) is
        stored but reported unchanged, so it does not cost its owner a pass.
        """
        raw["metadata"].pop("managedFields", None)
        key = self.child_key(raw)
        current = self.children.get(key)
        if current is not None:
            same = current["metadata"].get("resourceVersion") == raw["metadata"].get("resourceVersion")
            if same or not _newer(raw, current):
                return self.owner_of(current), False
        old_owner = self.owner_of(current) if current else None
        owner = self.owner_of(raw)
        if old_owner is not None and old_owner != owner:
            self.children_of[old_owner].discard(key)
        self.children[key] = raw
        if owner is not None:
            self.children_of[owner].add(key)
        if current is not None and old_owner == owner:
            return owner, reconcile_inputs(current) != reconcile_inputs(raw)
        return owner, True

    def remove_child(self, raw: dict[str, Any]) -> ObjKey | None:
        key = self.child_key(raw)
        current = self.children.pop(key, None)
        owner = self.owner_of(current or raw)
        if owner is not None:
            self.children_of[owner].discard(key)
            if not self.children_of[owner]:
                del self.children_of[owner]
        return owner

    def child(self, key: ChildKey) -> dict[str, Any] | None:
        return self.children.get(key)

    def owned(self, owner: ObjKey, uid: str) -> list[ChildKey]:
        """Children whose controller reference is this object (any uid: a stale owner's are ours to fix)."""
        return sorted(self.children_of.get(owner, ()))
