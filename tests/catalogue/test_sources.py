"""Catalogue sources: registries speaking the official API (a real HTTP server on loopback), catalogue
files in both formats, the user's registries.yaml and a local fleet's registries; hostile answers
are reported and skipped, never fatal, and bounded."""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from mcpfleet.catalogue import sources
from mcpfleet.catalogue.entries import CatalogueError, from_file, search
from tests.local_http import serving
from tests.reference import TOOLHIVE_FILE

SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"


def server(name: str, description: str = "A test server.") -> dict[str, Any]:
    return {
        "$schema": SCHEMA,
        "name": name,
        "description": description,
        "version": "1.0.0",
        "packages": [
            {
                "registryType": "npm",
                "identifier": "weather-x",
                "version": "1.0.0",
                "transport": {"type": "stdio"},
            }
        ],
    }


def registry_app(answer: web.StreamResponse | None = None, seen: list[Any] | None = None) -> web.Application:
    async def servers(request: web.Request) -> web.StreamResponse:
        if seen is not None:
            seen.append(dict(request.query) | {"accept-encoding": request.headers.get("Accept-Encoding")})
        if answer is not None:
            return answer
        page = {
            "servers": [
                {"server": server("io.example/weather", "Weather by city"), "_meta": {}},
                {"server": {"name": "bad"}, "_meta": {}},
            ],
            "metadata": {"count": 2},
        }
        return web.json_response(page)

    app = web.Application()
    app.router.add_get("/v0.1/servers", servers)
    return app


@pytest.fixture(autouse=True)
def _no_user_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


async def _gather(*args: Any, **kwargs: Any) -> sources.Catalogue:
    import asyncio

    return await asyncio.to_thread(sources.gather, *args, **kwargs)


async def test_registry_is_searched_and_invalid_entries_reported() -> None:
    seen: list[Any] = []
    async with serving(registry_app(seen=seen)) as url:
        found = await _gather("weather", [url], [], None, include_bundled=False)
    assert [e.name for e in found.entries] == ["io.example/weather"]
    assert found.entries[0].source.startswith("http://127.0.0.1:")
    assert any("entry 1" in p or "bad" in p for p in found.problems)
    assert seen[0]["search"] == "weather" and seen[0]["version"] == "latest"
    assert seen[0]["accept-encoding"] == "identity"


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (web.Response(status=500, text="boom"), "HTTP 500"),
        (web.Response(text="not json"), ""),
        (web.json_response({"servers": "x"}), ""),
        (web.Response(body=b"[" * 100_000, content_type="application/json"), ""),
    ],
    ids=["5xx", "not-json", "not-a-list", "deep"],
)
async def test_broken_registry_answers_are_reported_not_fatal(answer: web.Response, problem: str) -> None:
    async with serving(registry_app(answer)) as url:
        found = await _gather("", [url], [], None)
    assert found.problems and problem in found.problems[0]
    assert [e.short_name for e in found.entries][:1] == ["time"]  # the bundled catalogue still answers


async def test_oversized_and_compressed_answers_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "MAX_CATALOGUE_BYTES", 64 * 1024)
    big = web.Response(body=b" " * (200 * 1024) + b"{}", content_type="application/json")
    async with serving(registry_app(big)) as url:
        found = await _gather("", [url], [], None, include_bundled=False)
    assert "larger than" in found.problems[0]
    bomb = web.Response(
        body=gzip.compress(b" " * (8 * 1024 * 1024)),
        content_type="application/json",
        headers={"Content-Encoding": "gzip"},
    )
    async with serving(registry_app(bomb)) as url:
        found = await _gather("", [url], [], None, include_bundled=False)
    assert found.entries == [] and "larger than" in found.problems[0]


async def test_unreachable_registry_is_reported() -> None:
    found = await _gather("", ["http://127.0.0.1:9/"], [], None, include_bundled=False)
    assert "not reachable" in found.problems[0]


def test_catalogue_files_in_both_formats(tmp_path: Path) -> None:
    entries, problems = from_file(TOOLHIVE_FILE)
    assert len(entries) > 50 and not problems
    assert search(entries, "github")
    upstream = tmp_path / "servers.json"
    upstream.write_text(json.dumps([server("io.example/a"), {"name": "broken"}]))
    entries, problems = from_file(upstream)
    assert [e.name for e in entries] == ["io.example/a"] and len(problems) == 1
    with pytest.raises(CatalogueError, match="not a file"):
        from_file(tmp_path)


def test_user_registries_file(tmp_path: Path) -> None:
    folder = tmp_path / "config" / "mcpfleet"
    folder.mkdir(parents=True)
    (folder / "registries.yaml").write_text(
        "registries:\n  - name: team\n    url: http://127.0.0.1:9\n  - file:///etc/passwd\n"
    )
    problems: list[str] = []
    assert sources.user_registries(problems) == ["http://127.0.0.1:9"]
    assert "registries[1].url" in problems[0]
    (folder / "registries.yaml").write_text("a: &a [*a]\n" + "b: " + "[" * 500)
    problems = []
    assert sources.user_registries(problems) == [] and problems


def test_running_fleet_registries_are_read_from_its_state(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute(
            "CREATE TABLE objects (kind, namespace, name, manifest, spec_hash, generation, status, source, created)"
        )
        db.execute(
            "INSERT INTO objects VALUES ('MCPRegistry','default','catalogue','{}','',1,?, '', '')",
            (json.dumps({"url": "http://127.0.0.1:24306"}),),
        )
        db.execute("INSERT INTO objects VALUES ('MCPRegistry','default','off','{}','',1,'{}', '', '')")
    assert sources.running_registries(tmp_path) == ["http://127.0.0.1:24306"]
    assert sources.running_registries(tmp_path / "missing") == []
