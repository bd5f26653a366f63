"""Catalogue items build their answer on first use (issue 17: a start at 10,000 entries needs a handful).

An item's body and ETag must be exactly what building them at load time gave; once built, the stored
document is dropped, and the freed documents are handed back to the OS every few megabytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading

import orjson
import pytest

from mcpfleet import malloctune
from mcpfleet.registry import catalogue
from mcpfleet.registry.catalogue import Catalogue, Item, items_of
from mcpfleet.registry.entry import OFFICIAL_META
from mcpfleet.registry.rows import CatalogueRow, row_of

T1 = "2026-01-01T00:00:00Z"


def _row(name: str, message: str | None = None) -> CatalogueRow:
    document = orjson.dumps({"name": name, "version": "1.0.0", "description": "d"})
    return CatalogueRow(name, "1.0.0", "active", True, T1, T1, T1, document, message)


def test_body_and_etag_are_the_served_response_and_its_hash() -> None:
    row = _row("io.example/a", message="moved")
    item = Item(row)
    assert item._body is None and item._row is row  # nothing built at load
    body = orjson.loads(item.body)
    assert body["server"] == orjson.loads(row.document)
    assert body["_meta"][OFFICIAL_META] == {
        "status": "active",
        "publishedAt": T1,
        "updatedAt": T1,
        "isLatest": True,
        "statusChangedAt": T1,
        "statusMessage": "moved",
    }
    assert item.etag == '"' + hashlib.blake2b(item.body, digest_size=12).hexdigest() + '"'
    assert item._row is None  # the document is dropped once the answer exists
    assert item.body is item.body  # built once


def test_etag_first_builds_the_same_body() -> None:
    a, b = Item(_row("io.example/a")), Item(_row("io.example/a"))
    etag = b.etag
    assert (b.body, etag) == (a.body, a.etag)


def test_concurrent_first_use_gives_one_answer() -> None:
    items = items_of([_row(f"io.example/s{i:04d}") for i in range(2000)])
    seen: list[list[bytes]] = []

    def read() -> None:
        seen.append([i.body for i in items])

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(s == seen[0] for s in seen) and len(seen) == 4


def test_stored_rows_as_text_or_bytes_give_the_same_row() -> None:
    fields = ("n", "1", "active", 1, T1, T1, T1)
    assert row_of((*fields, '{"a":1}', None)) == row_of((*fields, b'{"a":1}', None))
    assert row_of((*fields, b"{}", None)).is_latest is True


def test_freed_documents_are_handed_back_every_few_megabytes(monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[None] = []
    monkeypatch.setattr(catalogue, "return_free_memory", lambda: trims.append(None))
    monkeypatch.setattr(catalogue, "_released_bytes", 0)
    row = _row("io.example/big")
    size = len(row.document)
    count = catalogue._TRIM_AFTER_BYTES // size + 1
    cat = Catalogue(1, [dataclasses.replace(row, name=f"io.example/s{i:05d}") for i in range(count)])
    assert not trims
    for item in cat.items:
        item.body  # noqa: B018 (built on first use)
    assert len(trims) == 1


def test_one_arena_can_be_asked_for() -> None:
    malloctune.one_arena()  # (False without glibc; with it, every later allocation still works)
    assert len(bytes(1 << 20)) == 1 << 20
