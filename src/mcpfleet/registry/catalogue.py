"""An immutable in-memory view of the merged catalogue, rebuilt whenever the generation changes.

Every entry's response object (`{server, _meta}`) is serialized once with orjson at build time; a list
page is then the concatenation of pre-serialized bytes, and whole pages are cached per generation.
Pagination is keyset over (name, version) on the sorted snapshot, so a cursor taken from an older
snapshot still resumes at the right place after a sync: entries present during the whole walk are
returned exactly once.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Any

import orjson

from mcpfleet.registry.entry import OFFICIAL_META, STATUS_DELETED
from mcpfleet.registry.store import CatalogueRow

# Full pages are ~70 KB; 512 of them bound the cache near 36 MB.
_PAGE_CACHE_SIZE = 512


class BadRequest(Exception):
    """A query parameter is invalid; the message is returned to the client as `{error}`."""


@dataclass(frozen=True, slots=True)
class Item:
    name: str
    version: str
    status: str
    is_latest: bool
    published_at: str
    updated_at: str
    search_text: str
    body: bytes
    """The serialized ServerResponse `{server, _meta}`."""
    etag: str


@dataclass(frozen=True, slots=True)
class Page:
    body: bytes
    etag: str


def encode_cursor(name: str, version: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([name, version])).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = orjson.loads(raw)
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        raise BadRequest("invalid cursor") from None
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise BadRequest("invalid cursor")
    return value[0], value[1]


def _etag(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'


def _item(row: CatalogueRow) -> Item:
    server = orjson.loads(row.document)
    official: dict[str, Any] = {
        "status": row.status,
        "publishedAt": row.published_at,
        "updatedAt": row.updated_at,
        "isLatest": row.is_latest,
    }
    if row.status != "active":
        official["statusChangedAt"] = row.status_changed_at
    body = orjson.dumps({"server": server, "_meta": {OFFICIAL_META: official}})
    text = f"{row.name}\n{server.get('description', '')}\n{server.get('title', '')}".lower()
    return Item(
        row.name,
        row.version,
        row.status,
        row.is_latest,
        row.published_at,
        row.updated_at,
        text,
        body,
        _etag(body),
    )


class Catalogue:
    """One generation of the catalogue: sorted items, per-name versions, a page cache."""

    def __init__(self, generation: int, rows: list[CatalogueRow]) -> None:
        self.generation = generation
        self.items: list[Item] = sorted((_item(r) for r in rows), key=lambda i: (i.name, i.version))
        self.keys: list[tuple[str, str]] = [(i.name, i.version) for i in self.items]
        self.by_name: dict[str, list[Item]] = defaultdict(list)
        for item in self.items:
            self.by_name[item.name].append(item)
        self.active_count = sum(1 for i in self.items if i.status != STATUS_DELETED)
        self._pages: OrderedDict[tuple[Any, ...], Page] = OrderedDict()

    def _cached(self, key: tuple[Any, ...]) -> Page | None:
        page = self._pages.get(key)
        if page is not None:
            self._pages.move_to_end(key)
        return page

    def _store(self, key: tuple[Any, ...], body: bytes) -> Page:
        page = Page(body, _etag(body))
        self._pages[key] = page
        if len(self._pages) > _PAGE_CACHE_SIZE:
            self._pages.popitem(last=False)
        return page

    def list_page(
        self,
        cursor: str | None,
        limit: int,
        search: str | None,
        updated_since: str | None,
        version: str | None,
        include_deleted: bool,
    ) -> Page:
        """A `ServerList` page; `updated_since` is a normalized fixed-width UTC timestamp."""
        key = ("list", cursor, limit, search, updated_since, version, include_deleted)
        page = self._cached(key)
        if page is not None:
            return page
        start = 0
        if cursor:
            start = bisect.bisect_right(self.keys, decode_cursor(cursor))
        if updated_since is not None:
            include_deleted = True  # the upstream API: deletions are always reported to incremental readers
        needle = search.lower() if search else None
        chosen: list[Item] = []
        more = False
        for item in self.items[start:]:
            if not include_deleted and item.status == STATUS_DELETED:
                continue
            if needle is not None and needle not in item.search_text:
                continue
            if updated_since is not None and item.updated_at <= updated_since:
                continue
            if version is not None and (
                (version == "latest" and not item.is_latest)
                or (version != "latest" and item.version != version)
            ):
                continue
            if len(chosen) == limit:
                more = True
                break
            chosen.append(item)
        meta: dict[str, Any] = {"count": len(chosen)}
        if more:
            meta["nextCursor"] = encode_cursor(chosen[-1].name, chosen[-1].version)
        body = (
            b'{"servers":[' + b",".join(i.body for i in chosen) + b'],"metadata":' + orjson.dumps(meta) + b"}"
        )
        return self._store(key, body)

    def versions_page(self, name: str, include_deleted: bool) -> Page | None:
        """All versions of `name`, newest published first; None when the server is unknown."""
        key = ("versions", name, include_deleted)
        page = self._cached(key)
        if page is not None:
            return page
        items = [i for i in self.by_name.get(name, ()) if include_deleted or i.status != STATUS_DELETED]
        if not items:
            return None
        items.sort(key=lambda i: (i.published_at, i.is_latest, i.version), reverse=True)
        meta = orjson.dumps({"count": len(items)})
        body = b'{"servers":[' + b",".join(i.body for i in items) + b'],"metadata":' + meta + b"}"
        return self._store(key, body)

    def get(self, name: str, version: str, include_deleted: bool) -> Page | None:
        """One version (`latest` = the latest one); None when unknown. Not page-cached: each item
        carries its serialized body and ETag already."""
        found: Item | None = None
        for item in self.by_name.get(name, ()):
            if not include_deleted and item.status == STATUS_DELETED:
                continue
            if item.is_latest if version == "latest" else item.version == version:
                found = item
                break
        if found is None:
            return None
        return Page(found.body, found.etag)
