"""A user's PodTemplateSpec merged onto a rendered pod template, and metadata overrides.

The merge follows what `kubectl patch --type strategic` does for the fields users set in practice:
maps merge key by key, lists whose items carry a `name` (containers, initContainers, volumes, env,
volumeMounts, ports…) merge item by item on `name` (new names appended), other lists are replaced.
What mcpfleet relies on is re-imposed afterwards by the caller (selector labels).
"""

from __future__ import annotations

import copy
from typing import Any


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
