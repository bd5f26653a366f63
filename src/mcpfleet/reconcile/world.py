"""The `World` a reconcile reads, built the same way by both platforms.

A platform hands over what it holds of one namespace — the validated models and each object's status —
plus what only it can read (images, the OTLP endpoint, the enforcing registries' images, permission
profile documents). `build_world` sorts the models into the World's fields through one table,
`WORLD_FIELDS` (which field holds a kind, and whether by name or as a tuple: each kind's row in
`reconcile.kinds.RULES`), and derives the parts that
come from statuses: the backends' URLs and the Ready EmbeddingServers' URLs. `refresh` re-derives only
those (the local runner calls it between kinds within a pass, so a server that just became Running gives
its URL to the gateway at once).

Adding a kind that rules need to see means a field on `World` and `world_field` in its `RULES` row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from mcpfleet.api.embeddingserver import EmbeddingServer
from mcpfleet.api.kinds import MEMBER_KINDS
from mcpfleet.api.resource import Resource
from mcpfleet.reconcile.embeddingserver import embedding_urls
from mcpfleet.reconcile.enforce import RegistryImages
from mcpfleet.reconcile.kinds import RULES
from mcpfleet.reconcile.model import Images, Platform, World

WORLD_FIELDS: dict[str, tuple[str, bool]] = {
    r.kind: (r.world_field, r.world_by_name) for r in RULES if r.world_field is not None
}
"""The kinds a rule may look at beyond its own object, and where they are in the World (kind:
(World field, keyed by name (dict) or not (tuple))), from the kinds' rows in `reconcile.kinds.RULES`."""

BACKEND_KINDS = MEMBER_KINDS
"""Kinds whose `status.url` is a backend's URL (`World.backend_urls`)."""

Statuses = Mapping[tuple[str, str], Mapping[str, Any]]
"""Each object's status by (kind, name), as the platform last wrote it."""


def build_world(
    platform: Platform,
    namespace: str,
    objects: Iterable[Resource],
    statuses: Statuses,
    *,
    images: Images | None = None,
    otlp_endpoint: str | None = None,
    registry_images: dict[str, RegistryImages] | None = None,
    profile_documents: dict[tuple[str, str], str] | None = None,
) -> World:
    """The World of one namespace: its objects sorted by kind, status-derived URLs, platform extras."""
    fields: dict[str, Any] = {}
    for obj in objects:
        slot = WORLD_FIELDS.get(obj.kind)
        if slot is None:
            continue
        name, by_name = slot
        if by_name:
            fields.setdefault(name, {})[obj.name] = obj
        else:
            fields.setdefault(name, []).append(obj)
    for name, by_name in WORLD_FIELDS.values():
        if not by_name and name in fields:
            fields[name] = tuple(fields[name])
    world = World(
        platform=platform,
        namespace=namespace,
        images=images or Images(),
        otlp_endpoint=otlp_endpoint,
        registry_images=registry_images or {},
        profile_documents=profile_documents or {},
        **fields,
    )
    return refresh(world, statuses)


def refresh(world: World, statuses: Statuses) -> World:
    """`world` with the parts that come from statuses (backend and embedding URLs) re-read."""
    backend_urls: dict[str, str] = {}
    embedding_objects: list[dict[str, Any]] = []
    for (kind, name), status in statuses.items():
        if kind in BACKEND_KINDS:
            url = status.get("url")
            if isinstance(url, str) and url:
                backend_urls[name] = url
        elif kind == EmbeddingServer.KIND:
            embedding_objects.append({"metadata": {"name": name}, "status": status})
    return replace(world, backend_urls=backend_urls, embedding_urls=embedding_urls(embedding_objects))
