"""Objects that keep running their last valid manifest while the current one is invalid.

Like a rejected `kubectl apply`: a file that cannot be loaded (YAML error, too large) keeps every
object it defined running as last loaded, and an invalid new version of an object keeps the old one.
Both carry the error in a `ManifestApplied=False` condition (and a workload in `status.message`)
until the file is fixed.
"""

from __future__ import annotations

from typing import Any

from mcpfleet.api.meta import now_rfc3339
from mcpfleet.platform.local.loader import Loaded, LoadError, LoadResult

KEPT_ERROR_CHARS = 4000
"""The error reported on a kept object is cut to this (a condition message holds at most 32768)."""
MANIFEST_CONDITION = "ManifestApplied"
"""Local only: False while the object runs its last valid manifest because the current one is invalid."""

Key = tuple[str, str, str]


def keep_running(
    previous: dict[Key, Loaded], result: LoadResult
) -> tuple[dict[Key, Loaded], dict[Key, str], list[LoadError]]:
    """The objects to run after a load (the new ones, plus the previous version of each object the
    load's errors keep out), the error keeping each kept one, and every load error."""
    loaded = {item.key: item for item in result.objects}
    kept: dict[Key, str] = {}
    errors = list(result.errors)
    for error in result.errors:
        for key, item in previous.items():
            if key in kept:
                continue
            # A file that cannot be read keeps every object it held; like a rejected `kubectl
            # apply`, an object whose new version is invalid keeps running as it was.
            whole_file = error.document is None and item.file == error.file
            if not (whole_file or (error.kind, error.name) == (key[0], key[2])):
                continue
            newcomer = loaded.get(key)
            if newcomer is not None and newcomer.file == item.file:
                continue  # loaded again from its own file: nothing to keep
            if newcomer is not None:
                # Defined elsewhere too, while its own file is broken: the running one stays.
                errors.append(_duplicate_of(newcomer, item))
            loaded[key] = item
            kept[key] = str(error)[:KEPT_ERROR_CHARS]
    return loaded, kept, errors


def mark_kept(
    status: dict[str, Any], previous: dict[str, Any], error: str | None, *, workload: bool
) -> dict[str, Any]:
    """`status` with the ManifestApplied condition set from `error` (cleared when None); a
    workload's message names the error too (the other kinds' statuses have no message)."""
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != MANIFEST_CONDITION]
    if error is None:
        if "conditions" in status:
            status["conditions"] = conditions
        return status
    before = next((c for c in previous.get("conditions") or [] if c.get("type") == MANIFEST_CONDITION), None)
    conditions.append(
        {
            "type": MANIFEST_CONDITION,
            "status": "False",
            "reason": "InvalidManifest",
            "message": error,
            "lastTransitionTime": (before or {}).get("lastTransitionTime") or now_rfc3339(),
        }
    )
    status["conditions"] = conditions
    if workload:
        message = status.get("message")
        kept = f"the last valid manifest keeps running; the current one is invalid: {error}"
        status["message"] = f"{message}; {kept}" if message else kept
    return status


def _duplicate_of(newcomer: Loaded, running: Loaded) -> LoadError:
    document = int(newcomer.source.rpartition("#")[2])
    reason = f"duplicate of {running.source}, which keeps running; this document is ignored"
    kind, name = newcomer.resource.kind, newcomer.resource.name
    return LoadError(newcomer.file, document, kind, name, (("metadata.name", reason),))
