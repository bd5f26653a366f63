"""An immutable in-memory view of the merged catalogue, rebuilt whenever the generation changes.

Every entry's response object (`{server, _meta}`) is serialized once with orjson at build time; a list
page is then the concatenation of pre-serialized bytes, and whole pages are cached per generation.
Pagination is keyset over (name, version) on the sorted snapshot, so a cursor taken from an older
snapshot still resumes at the right place after a sync: entries present during the whole walk are
returned exactly once. As on the official registry, every full page carries a `nextCursor` (a walk
ends on a short or empty page).

Search is served from trigram indexes (`SearchIndex`, built on first use per field set), so a search
the page cache cannot answer walks one posting list from the cursor on instead of every entry.

A publish or a status change touches one name: `Catalogue.replaced` derives the next generation from
the current one with just that name's items swapped, keeping every cached page whose span (the names
it was built from) does not reach that name, and the search indexes when no position moved.
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


class Item:
    """One stored version as served: the fields a listing filters and sorts on, and its response
    body (`{server, _meta}`, serialized) and ETag.

    The body and the ETag are built from the stored row on first use, not when the catalogue is
    loaded: building them is most of the time of loading 10,000 entries (~0.1 s of a start, issue
    17), and the first answers of a start need a handful. The row is dropped once they exist, so an
    item holds either its stored document or its body, never both."""

    __slots__ = (
        "_body",
        "_etag",
        "_row",
        "is_latest",
        "name",
        "published_at",
        "status",
        "updated_at",
        "version",
    )

    def __init__(self, row: CatalogueRow) -> None:
        self.name = row.name
        self.version = row.version
        self.status = row.status
        self.is_latest = row.is_latest
        self.published_at = row.published_at
        self.updated_at = row.updated_at
        self._row: CatalogueRow | None = row
        self._body: bytes | None = None
        self._etag = ""

    @property
    def body(self) -> bytes:
        """The serialized ServerResponse `{server, _meta}`."""
        body = self._body
        return body if body is not None else self._build()

    @property
    def etag(self) -> str:
        if self._body is None:
            self._build()
        return self._etag

    def _build(self) -> bytes:
        row = self._row
        if row is None:  # built meanwhile by another thread (the body is set before the row is dropped)
            assert self._body is not None
            return self._body
        body = _body_of(row)
        self._etag = _etag(body)
        self._body = body
        self._row = None
        _released(len(row.document))
        return body


_released_bytes = 0
"""Stored documents dropped by `Item._build` since the heap was last trimmed."""


def _released(size: int) -> None:
    """Count a dropped document; every `_TRIM_AFTER_BYTES`, hand the freed heap pages back. The
    documents were read in a worker thread, so they sit in another glibc arena than the bodies built
    on the event loop, which cannot reuse them: without this, a first walk of 10,000 entries left
    ~8 MB more in the RSS (measured) until the next trim."""
    global _released_bytes
    _released_bytes += size
    if _released_bytes > _TRIM_AFTER_BYTES:
        _released_bytes = 0
        return_free_memory()


@dataclass(frozen=True, slots=True)
class Page:
    body: bytes
    etag: str


Span = tuple[str | None, str | None]
"""The names a cached page was built from: (first, last), None meaning unbounded on that side; a
change to a name outside it cannot change the page."""


def encode_cursor(name: str, version: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([name, version])).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    """The (name, version) a cursor continues after. A cursor that is not one of ours is read as a
    position too — after the server name it spells — as the official registry answers such a cursor
    with a page (200), not an error."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        value = orjson.loads(raw)
    except (binascii.Error, ValueError, orjson.JSONDecodeError):
        return cursor, ""
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        return cursor, ""
    return value[0], value[1]


def _etag(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'


def _body_of(row: CatalogueRow) -> bytes:
    """The serialized ServerResponse `{server, _meta}` of a stored row."""
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
    return b'{"server":' + row.document + b',"_meta":' + meta + b"}"


def items_of(rows: list[CatalogueRow]) -> list[Item]:
    """The served items of catalogue rows."""
    return [Item(r) for r in rows]


def _text(item: Item) -> str:
    """Lower-cased name, title and description: what the opt-in full-text search matches."""
    server = orjson.loads(item.body)["server"]
    return f"{item.name}\n{server.get('title', '')}\n{server.get('description', '')}".lower()


def _field_text(fields: str, item: Item) -> str:
    """What a search of `fields` (SEARCH_NAME or SEARCH_TEXT) matches in `item`."""
    return item.name.lower() if fields == SEARCH_NAME else _text(item)


def _reaches(span: Span, name: str) -> bool:
    """Whether a change to `name` can change a page built from `span`."""
    first, last = span
    return (first is None or first <= name) and (last is None or name <= last)


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
        self._pages: OrderedDict[tuple[Any, ...], tuple[Page, Span]] = OrderedDict()
        self._page_bytes = 0
        self._evicted_bytes = 0

    def replaced(self, generation: int, name: str, rows: list[CatalogueRow]) -> Catalogue:
        """The next generation: this one with the items of `name` replaced by `rows` (all of that
        name's rows in the store, none when it is gone). Equal to a catalogue built from every row;
        this one is left as it is for the readers holding it."""
        new = items_of(rows)
        new.sort(key=lambda i: (i.name, i.version))
        old = self.by_name.get(name, [])
        lo = bisect.bisect_left(self.keys, (name,))  # (name,) sorts before every (name, version)
        hi = lo + len(old)
        out = Catalogue.__new__(Catalogue)
        out.generation = generation
        # One copy each, then the name's span replaced in place (a copy of the slices around it,
        # then of their concatenation, was twice the work: this is on every publish's path).
        out.items = self.items.copy()
        out.items[lo:hi] = new
        out.keys = self.keys.copy()
        out.keys[lo:hi] = [(i.name, i.version) for i in new]
        out.by_name = self.by_name.copy()  # (a plain dict: only read with .get from here on)
        if new:
            out.by_name[name] = new
        else:
            out.by_name.pop(name, None)
        out.active_count = (
            self.active_count
            - sum(1 for i in old if i.status != STATUS_DELETED)
            + sum(1 for i in new if i.status != STATUS_DELETED)
        )
        # An index maps texts to positions: reusable when no position moved and the texts are the
        # same (a status change); otherwise rebuilt on the next search, as after a full reload.
        out._indexes = {}
        if len(new) == len(old):
            for fields, index in self._indexes.items():
                if index.texts[lo:hi] == [_field_text(fields, i) for i in new]:
                    out._indexes[fields] = index
        out._pages = OrderedDict(
            (key, cached) for key, cached in self._pages.items() if not _reaches(cached[1], name)
        )
        out._page_bytes = sum(len(page.body) for page, _span in out._pages.values())
        out._evicted_bytes = 0
        return out

    def _cached(self, key: tuple[Any, ...]) -> Page | None:
        cached = self._pages.get(key)
        if cached is None:
            return None
        self._pages.move_to_end(key)
        return cached[0]

    def _store(self, key: tuple[Any, ...], body: bytes, span: Span) -> Page:
        page = Page(body, _etag(body))
        self._pages[key] = (page, span)
        self._page_bytes += len(body)
        while len(self._pages) > _PAGE_CACHE_SIZE or self._page_bytes > _PAGE_CACHE_BYTES:
            _, (evicted, _span) = self._pages.popitem(last=False)
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
            texts = [_field_text(fields, i) for i in self.items]
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
        after = decode_cursor(cursor) if cursor else None
        start = bisect.bisect_right(self.keys, after) if after else 0
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
        # From the cursor's name (its later versions are on the page) to the last item of a full page;
        # a short page saw every entry after the cursor.
        span: Span = (
            after[0] if after else None,
            chosen[-1].name if len(chosen) == limit else None,
        )
        return self._store(key, body, span)

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
        return self._store(key, body, (name, name))

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
