"""An immutable in-memory view of the merged catalogue, rebuilt whenever the generation changes.

Every entry's response object (`{server, _meta}`) is serialized once with orjson at build time; a list
page is then the concatenation of pre-serialized bytes, and whole pages are cached per generation.
Pagination is keyset over (name, version) on the sorted snapshot, so a cursor taken from an older
snapshot still resumes at the right place after a sync: entries present during the whole walk are
returned exactly once. As on the official registry, every full page carries a `nextCursor` (a walk
ends on a short or empty page).

Search is served from trigram indexes (`SearchIndex`, built on first use per field set), so a search
the page cache cannot answer walks one posting list from the cursor on instead of every entry.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
from array import array
from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from mcpfleet.registry.entry import OFFICIAL_META, STATUS_DELETED
from mcpfleet.registry.memory import return_free_memory
from mcpfleet.registry.rows import CatalogueRow

# Full pages are ~70 KB; 512 of them bound the cache near 36 MB.
_PAGE_CACHE_SIZE = 512
_PAGE_CACHE_BYTES = 16 * 1024 * 1024
"""Also bounded in bytes: a whole walk of 10,000 entries (~9 MB) fits, a larger catalogue's does not."""
_TRIM_AFTER_BYTES = 4 * 1024 * 1024
"""Evicted page bytes after which freed heap pages are handed back to the OS (`return_free_memory`):
pages are 1-70 KB, below the mmap threshold, so without it they stay in the RSS once evicted."""


# What `search` matches: the name only (the official registry's behaviour and the default), or also
# the title and the description (opt-in with `search_fields`).
SEARCH_NAME = "name"
SEARCH_TEXT = "text"


class BadRequest(Exception):
    """A query parameter is invalid; answered as a problem document naming the parameter."""

    def __init__(self, message: str, location: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.location = location
        self.value = value


@dataclass(frozen=True, slots=True)
class Item:
    name: str
    version: str
    status: str
    is_latest: bool
    published_at: str
    updated_at: str
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
        raise BadRequest("Invalid cursor parameter", "query.cursor", cursor) from None
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        raise BadRequest("Invalid cursor parameter", "query.cursor", cursor)
    return value[0], value[1]


def _etag(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'


def _item(row: CatalogueRow) -> Item:
    official: dict[str, Any] = {
        "status": row.status,
        "publishedAt": row.published_at,
        "updatedAt": row.updated_at,
        "isLatest": row.is_latest,
        # Always present, as on the official registry (a new entry: its publish time).
        "statusChangedAt": row.status_changed_at,
    }
    if row.status_message is not None:
        official["statusMessage"] = row.status_message
    # The stored document is orjson's compact serialization already: spliced in as it is rather than
    # parsed and serialized again (most of the time of loading the catalogue at start-up), and the
    # concatenation is an exact-size bytes object (orjson's own results keep a 4 KB buffer).
    meta = orjson.dumps({OFFICIAL_META: official})
    body = b'{"server":' + row.document.encode() + b',"_meta":' + meta + b"}"
    return Item(
        row.name,
        row.version,
        row.status,
        row.is_latest,
        row.published_at,
        row.updated_at,
        body,
        _etag(body),
    )


def items_of(rows: list[CatalogueRow]) -> list[Item]:
    """The served items of catalogue rows."""
    return [_item(r) for r in rows]


def _text(item: Item) -> str:
    """Lower-cased name, title and description: what the opt-in full-text search matches."""
    server = orjson.loads(item.body)["server"]
    return f"{item.name}\n{server.get('title', '')}\n{server.get('description', '')}".lower()


def _trigrams(text: str) -> set[str]:
    return {text[i : i + 3] for i in range(len(text) - 2)}


@dataclass(slots=True)
class SearchIndex:
    """Trigram → ascending positions (in the sorted snapshot) of the entries whose text holds it.

    A needle of three characters or more (the API's minimum) is looked up by walking the shortest
    posting list of its trigrams from the cursor's position and checking each candidate: a common
    needle stops after `limit` hits, a rare one has a short list. Positions are 32-bit arrays, not
    lists of ints, to keep the index a few megabytes at 10,000 entries."""

    texts: list[str]
    postings: dict[str, array[int]] = field(default_factory=dict)

    @classmethod
    def build(cls, texts: list[str]) -> SearchIndex:
        grouped: dict[str, list[int]] = defaultdict(list)
        for position, text in enumerate(texts):
            for gram in _trigrams(text):
                grouped[gram].append(position)
        return cls(texts, {gram: array("I", positions) for gram, positions in grouped.items()})

    def candidates(self, needle: str, start: int) -> Iterator[int]:
        """Positions >= start whose text contains `needle` (lower-cased, >= 3 characters), ascending."""
        lists = [self.postings.get(gram) for gram in _trigrams(needle)]
        if not lists or any(p is None for p in lists):
            return
        shortest = min((p for p in lists if p is not None), key=len)
        texts = self.texts
        for i in range(bisect.bisect_left(shortest, start), len(shortest)):
            position = shortest[i]
            if needle in texts[position]:
                yield position


class Catalogue:
    """One generation of the catalogue: sorted items, per-name versions, a page cache."""

    def __init__(self, generation: int, rows: list[CatalogueRow], items: list[Item] | None = None) -> None:
        """From the store's rows, or from `items` already built (`items_of`, chunk by chunk while
        the rows are read: the whole row set and the whole item set never sit in memory together)."""
        self.generation = generation
        self.items: list[Item] = items if items is not None else items_of(rows)
        self.items.sort(key=lambda i: (i.name, i.version))
        self.keys: list[tuple[str, str]] = [(i.name, i.version) for i in self.items]
        self.by_name: dict[str, list[Item]] = defaultdict(list)
        for item in self.items:
            self.by_name[item.name].append(item)
        self.active_count = sum(1 for i in self.items if i.status != STATUS_DELETED)
        self._indexes: dict[str, SearchIndex] = {}
        self._pages: OrderedDict[tuple[Any, ...], Page] = OrderedDict()
        self._page_bytes = 0
        self._evicted_bytes = 0

    def _cached(self, key: tuple[Any, ...]) -> Page | None:
        page = self._pages.get(key)
        if page is not None:
            self._pages.move_to_end(key)
        return page

    def _store(self, key: tuple[Any, ...], body: bytes) -> Page:
        page = Page(body, _etag(body))
        self._pages[key] = page
        self._page_bytes += len(body)
        while len(self._pages) > _PAGE_CACHE_SIZE or self._page_bytes > _PAGE_CACHE_BYTES:
            _, evicted = self._pages.popitem(last=False)
            self._page_bytes -= len(evicted.body)
            self._evicted_bytes += len(evicted.body)
        if self._evicted_bytes > _TRIM_AFTER_BYTES:
            self._evicted_bytes = 0
            return_free_memory()
        return page

    def index(self, fields: str) -> SearchIndex:
        """The search index of `fields` (SEARCH_NAME or SEARCH_TEXT), built on first use."""
        found = self._indexes.get(fields)
        if found is None:
            if fields == SEARCH_NAME:
                texts = [i.name.lower() for i in self.items]
            else:
                texts = [_text(i) for i in self.items]
            found = self._indexes[fields] = SearchIndex.build(texts)
        return found

    def list_page(
        self,
        cursor: str | None,
        limit: int,
        search: str | None,
        updated_since: str | None,
        version: str | None,
        include_deleted: bool,
        search_fields: str = SEARCH_NAME,
    ) -> Page:
        """A `ServerList` page; `updated_since` is a normalized fixed-width UTC timestamp; `search`
        (already checked to be >= 3 characters) matches `search_fields`."""
        key = ("list", cursor, limit, search, updated_since, version, include_deleted, search_fields)
        page = self._cached(key)
        if page is not None:
            return page
        start = 0
        if cursor:
            start = bisect.bisect_right(self.keys, decode_cursor(cursor))
        positions: Iterator[int] | range = (
            self.index(search_fields).candidates(search.lower(), start)
            if search
            else range(start, len(self.items))
        )
        items = self.items
        chosen: list[Item] = []
        for position in positions:
            item = items[position]
            if not include_deleted and item.status == STATUS_DELETED:
                continue
            if updated_since is not None and item.updated_at <= updated_since:
                continue
            if version is not None and (
                (version == "latest" and not item.is_latest)
                or (version != "latest" and item.version != version)
            ):
                continue
            chosen.append(item)
            if len(chosen) == limit:
                break
        meta: dict[str, Any] = {"count": len(chosen)}
        if len(chosen) == limit:
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
