"""The merge's decisions, free of any database: which source wins each name, when each served
version was published, which version is the latest, and so which rows of `registry_servers` a merge
inserts, updates, re-flags or turns into tombstones (`plan_merge`).

`Store._merge` reads the source entries and the served rows, plans here and writes the plan with
SQLAlchemy; the PostgreSQL publish (`pgpublish.py`) reads and writes the same rows of one name with
asyncpg in two round trips and plans here too, so both paths decide alike.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from mcpfleet.registry.entry import STATUS_DELETED
from mcpfleet.registry.versions import latest_version

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def now_iso() -> str:
    """UTC timestamp with fixed width, so string order is time order on every backend."""
    return datetime.now(UTC).strftime(TIME_FORMAT)


Key = tuple[str, str]
"""(name, version)."""
KnownDocs = dict[str, dict[Key, tuple[str, str]]]
"""source -> (name, version) -> (document, content hash): entries a sync or a publish just wrote."""


class ServedRow(Protocol):
    """What the merge reads of a row of `registry_servers`."""

    @property
    def source(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def content_hash(self) -> str: ...
    @property
    def published_at(self) -> str: ...
    @property
    def is_latest(self) -> Any: ...


@dataclass(slots=True)
class MergePlan:
    """The writes that bring `registry_servers` in line with the source entries. `inserts` and
    `updates` lack their `document` and `status_message` (read or known later: `need_doc`)."""

    now: str
    inserts: list[dict[str, Any]] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)
    flag_updates: list[dict[str, Any]] = field(default_factory=list)
    tombstones: list[dict[str, Any]] = field(default_factory=list)
    need_doc: list[tuple[str, str, str]] = field(default_factory=list)
    """(source, name, version) of every insert and update, in their order."""


def winners(
    rows: Iterable[tuple[str, str, str, str, str]], order: list[str]
) -> dict[Key, tuple[str, str, str]]:
    """(name, version) -> (source, status, content hash) of the entries served, from the source
    entries' (source, name, version, status, content hash): the first source listed wins a name,
    and all versions of that name come from it."""
    rows = list(rows)
    rank = {name: i for i, name in enumerate(order)}
    winner: dict[str, int] = {}
    for src, name, _v, _s, _h in rows:
        if src in rank and (name not in winner or rank[src] < winner[name]):
            winner[name] = rank[src]
    return {
        (name, version): (src, status, h)
        for src, name, version, status, h in rows
        if src in rank and winner.get(name) == rank[src]
    }


def published_times(
    desired: dict[Key, tuple[str, str, str]],
    current: Mapping[Key, ServedRow],
    known_docs: KnownDocs,
    now: str,
) -> dict[Key, str]:
    """When each served version was published: its stored time, or — for the versions this merge
    adds — one microsecond apart in the order their source listed them, the last one `now` (so no
    version is published after it was updated). So versions that arrive in one sync keep their
    source's order (the official registry, publishing one at a time, orders non-semantic versions
    by arrival) instead of one shared timestamp."""
    arrival = {key: i for docs in known_docs.values() for i, key in enumerate(docs)}
    new = sorted((k for k in desired if k not in current), key=lambda k: arrival.get(k, len(arrival)))
    if len(new) == 1:
        stamps = {new[0]: now}  # (the common case, a publish: no date arithmetic)
    else:
        end = datetime.strptime(now, TIME_FORMAT)
        stamps = {
            key: (end - timedelta(microseconds=len(new) - 1 - i)).strftime(TIME_FORMAT)
            for i, key in enumerate(new)
        }
    return {k: current[k].published_at if k in current else stamps[k] for k in desired}


def latest(desired: dict[Key, tuple[str, str, str]], published: dict[Key, str]) -> dict[str, str]:
    """The latest version of each name: among its versions that are not deleted (deleting the
    latest makes the next one latest, as on the official registry), or among all when every
    version is deleted."""
    live: dict[str, list[tuple[str, str]]] = defaultdict(list)
    every: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for (name, version), (_src, status, _h) in desired.items():
        every[name].append((version, published[(name, version)]))
        if status != STATUS_DELETED:
            live[name].append((version, published[(name, version)]))
    return {name: latest_version(live.get(name) or versions) for name, versions in every.items()}


def plan_merge(
    desired: dict[Key, tuple[str, str, str]],
    current: Mapping[Key, ServedRow],
    known_docs: KnownDocs,
    now: str,
) -> MergePlan:
    """The writes from the served rows `current` to the `desired` ones (`winners`)."""
    published = published_times(desired, current, known_docs, now)
    newest = latest(desired, published)
    plan = MergePlan(now)
    for key, (src, status, h) in desired.items():
        is_latest = newest[key[0]] == key[1]
        old = current.get(key)
        if old is None:
            plan.need_doc.append((src, *key))
            plan.inserts.append(
                {
                    "name": key[0],
                    "version": key[1],
                    "source": src,
                    "status": status,
                    "is_latest": is_latest,
                    "published_at": published[key],
                    "updated_at": now,
                    "status_changed_at": now,
                    "content_hash": h,
                }
            )
        elif old.content_hash != h or old.status != status or old.source != src:
            plan.need_doc.append((src, *key))
            plan.updates.append(
                {
                    "k_name": key[0],
                    "k_version": key[1],
                    "source": src,
                    "status": status,
                    "is_latest": is_latest,
                    "updated_at": now,
                    "status_changed_at": now if old.status != status else None,
                    "content_hash": h,
                }
            )
        elif bool(old.is_latest) != is_latest:
            plan.flag_updates.append({"k_name": key[0], "k_version": key[1], "is_latest": is_latest})
    plan.tombstones = [
        {"k_name": k[0], "k_version": k[1]}
        for k, r in current.items()
        if k not in desired and r.status != STATUS_DELETED
    ]
    return plan
