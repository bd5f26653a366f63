"""Per-source include / exclude globs on names and tags."""

from __future__ import annotations

import hashlib
from fnmatch import fnmatchcase

import orjson

from mcpfleet.api.registrysourcebase import GlobFilter, RegistryFilter
from mcpfleet.registry.entry import Entry


def filter_hash(flt: RegistryFilter) -> str:
    """Changes whenever the filter does, so a config change triggers a re-sync of the source."""
    return hashlib.sha256(orjson.dumps(flt.dump(), option=orjson.OPT_SORT_KEYS)).hexdigest()


def _passes(values: list[str], globs: GlobFilter) -> bool:
    if globs.include and not any(fnmatchcase(v, g) for v in values for g in globs.include):
        return False
    return not any(fnmatchcase(v, g) for v in values for g in globs.exclude)


def apply_filter(entries: list[Entry], flt: RegistryFilter) -> list[Entry]:
    """Entries kept by `flt`; names match on the full name or the part after the slash."""
    if not (flt.names.include or flt.names.exclude or flt.tags.include or flt.tags.exclude):
        return entries
    kept: list[Entry] = []
    for entry in entries:
        names = [entry.name, entry.name.split("/", 1)[-1]]
        if not _passes(names, flt.names):
            continue
        if (flt.tags.include or flt.tags.exclude) and not _passes(entry.tags(), flt.tags):
            continue
        kept.append(entry)
    return kept
