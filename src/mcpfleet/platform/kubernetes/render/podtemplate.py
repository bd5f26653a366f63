"""`podTemplateSpec`: the user's PodTemplateSpec merged onto the pod template mcpfleet renders.

Kubernetes' strategic merge patch for the parts of a PodTemplateSpec users patch: maps merge key by
key (a null value deletes the key), lists of named things merge by their merge key (the
`patchMergeKey` of the Kubernetes API: containers and volumes by `name`, volumeMounts by
`mountPath`, ports by `containerPort`, …), every other list is replaced (tolerations, args,
command), as `kubectl patch --type=strategic` does. `$patch: delete` on a list item removes the
item with that key and `$patch: replace` on a map replaces it whole. No Python library implements
strategic merge (it is Go code in apimachinery driven by the Go types), hence this small table.

mcpfleet's own selector labels always win: a patch cannot move pods out of their Deployment.
"""

from __future__ import annotations

import copy
from typing import Any

MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "resourceClaims": "name",
}
"""Field name -> patchMergeKey, from the Kubernetes API types (core/v1 PodSpec and Container)."""


def strategic_merge(base: Any, patch: Any, field: str = "") -> Any:
    """`patch` merged onto `base` (neither is modified)."""
    if isinstance(patch, dict) and isinstance(base, dict):
        if patch.get("$patch") == "replace":
            return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
        merged = copy.deepcopy(base)
        for key, value in patch.items():
            if key == "$patch":
                continue
            if value is None:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = strategic_merge(merged[key], value, key)
            else:
                merged[key] = (
                    strategic_merge({}, value, key) if isinstance(value, dict) else copy.deepcopy(value)
                )
        return merged
    if isinstance(patch, list) and isinstance(base, list) and field in MERGE_KEYS:
        return _merge_list(base, patch, MERGE_KEYS[field])
    return copy.deepcopy(patch)


def _merge_list(base: list[Any], patch: list[Any], key: str) -> list[Any]:
    merged = copy.deepcopy(base)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            # Not a keyed item: nothing to merge it with; append it as kubectl would.
            merged.append(copy.deepcopy(item))
            continue
        index = next(
            (i for i, old in enumerate(merged) if isinstance(old, dict) and old.get(key) == item[key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                merged.pop(index)
            continue
        if index is None:
            merged.append(strategic_merge({}, item))
        else:
            merged[index] = strategic_merge(merged[index], item)
    return merged


def apply_pod_template(
    template: dict[str, Any], patch: dict[str, Any], selector: dict[str, str]
) -> dict[str, Any]:
    """The rendered pod template with the user's PodTemplateSpec merged on; `selector` labels kept."""
    merged: dict[str, Any] = strategic_merge(template, patch)
    labels = merged.setdefault("metadata", {}).setdefault("labels", {})
    labels.update(selector)
    return merged


# The EmbeddingServer workload's simpler merge (lists of named items by name) and metadata overrides.
def _named_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(i, dict) and "name" in i for i in value)


def merge(base: Any, overlay: Any) -> Any:
    """`overlay` merged onto `base` (neither is modified)."""
    if isinstance(base, dict) and isinstance(overlay, dict):
        merged = dict(base)
        for key, value in overlay.items():
            merged[key] = merge(base[key], value) if key in base else copy.deepcopy(value)
        return merged
    if _named_list(base) and _named_list(overlay):
        result = [dict(item) for item in base]
        index = {item["name"]: i for i, item in enumerate(result)}
        for item in overlay:
            if item["name"] in index:
                result[index[item["name"]]] = merge(result[index[item["name"]]], item)
            else:
                result.append(copy.deepcopy(item))
        return result
    return copy.deepcopy(overlay)


def add_metadata(metadata: dict[str, Any], extra: dict[str, dict[str, str]] | None) -> None:
    """Add `extra` labels / annotations to `metadata` in place; existing keys (mcpfleet's) win."""
    for section in ("labels", "annotations"):
        wanted = (extra or {}).get(section) or {}
        if wanted:
            metadata[section] = {**wanted, **(metadata.get(section) or {})}
