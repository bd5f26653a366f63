"""Sync behaviour on both backends: change detection, removals, filters, failures, merging, restarts,
and a cursor walk that stays exact while syncs change the data."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from tests.registry.conftest import make_config, running, server_doc, write_json

OFFICIAL = "io.modelcontextprotocol.registry/official"


def names_of(doc: dict) -> list[str]:  # type: ignore[type-arg]
    return [s["server"]["name"] for s in doc["servers"]]


async def test_change_removal_and_no_write_when_unchanged(db_url: str, tmp_path: Path) -> None:
    path = write_json(tmp_path / "r.json", [server_doc("com.example/a"), server_doc("com.example/b")])
    cfg = make_config([{"name": "s", "file": {"path": str(path)}}], db_url)
    async with running(cfg, tmp_path) as h:
        assert not h.service.ready
        assert (await h.get("/readiness")).status_code == 503
        await h.sync()
        assert h.service.ready
        gen = h.service.catalogue.generation
        assert await h.service.syncer.sync_source("s") == "unchanged"
        assert h.service.catalogue.generation == gen
        first = (await h.get("/v0.1/servers")).json()
        published = {s["server"]["name"]: s["_meta"][OFFICIAL]["publishedAt"] for s in first["servers"]}
        # b changes, a disappears, c appears
        write_json(path, [server_doc("com.example/b", description="changed"), server_doc("com.example/c")])
        assert await h.service.syncer.sync_source("s") == "applied"
        doc = (await h.get("/v0.1/servers")).json()
        assert names_of(doc) == ["com.example/b", "com.example/c"]
        b = doc["servers"][0]
        assert b["server"]["description"] == "changed"
        assert b["_meta"][OFFICIAL]["publishedAt"] == published["com.example/b"]
        assert b["_meta"][OFFICIAL]["updatedAt"] > published["com.example/b"]
        # the removed entry is gone, but visible as deleted to incremental readers
        a = quote("com.example/a", safe="")
        assert (await h.get(f"/v0.1/servers/{a}/versions/latest")).status_code == 404
        with_deleted = (await h.get("/v0.1/servers?include_deleted=true")).json()
        status = {s["server"]["name"]: s["_meta"][OFFICIAL]["status"] for s in with_deleted["servers"]}
        assert status == {"com.example/a": "deleted", "com.example/b": "active", "com.example/c": "active"}
        since = (await h.get("/v0.1/servers", params={"updated_since": published["com.example/b"]})).json()
        assert set(names_of(since)) == {"com.example/a", "com.example/b", "com.example/c"}
        # it comes back when it reappears
        write_json(path, [server_doc("com.example/a")])
        await h.service.syncer.sync_source("s")
        assert names_of((await h.get("/v0.1/servers")).json()) == ["com.example/a"]


async def test_failed_sync_keeps_last_good_data_and_reports(db_url: str, tmp_path: Path) -> None:
    path = write_json(tmp_path / "r.json", [server_doc("com.example/a")])
    cfg = make_config([{"name": "s", "file": {"path": str(path)}}], db_url)
    async with running(cfg, tmp_path) as h:
        await h.sync()
        path.write_text("{broken")
        assert await h.service.syncer.sync_source("s") == "failed"
        assert names_of((await h.get("/v0.1/servers")).json()) == ["com.example/a"]
        status = (await h.get("/status")).json()["sources"][0]
        assert "invalid JSON" in status["lastError"]
        assert 'mcpfleet_registry_source_up{source="s"} 0.0' in (await h.get("/metrics")).text
        assert (
            'mcpfleet_registry_syncs_total{result="failed",source="s"} 1.0' in (await h.get("/metrics")).text
        )
        path.unlink()
        assert await h.service.syncer.sync_source("s") == "failed"
        assert "cannot read" in (await h.get("/status")).json()["sources"][0]["lastError"]
        assert names_of((await h.get("/v0.1/servers")).json()) == ["com.example/a"]
        # recovery clears the error
        write_json(path, [server_doc("com.example/a")])
        await h.service.syncer.sync_source("s")
        assert (await h.get("/status")).json()["sources"][0]["lastError"] is None


async def test_bad_entries_reported_valid_ones_load(db_url: str, tmp_path: Path) -> None:
    docs = [server_doc("com.example/ok"), {"name": "no-slash", "version": "1"}, server_doc("com.example/ok")]
    path = write_json(tmp_path / "r.json", docs)
    cfg = make_config([{"name": "s", "file": {"path": str(path)}}], db_url)
    async with running(cfg, tmp_path) as h:
        await h.sync()
        assert names_of((await h.get("/v0.1/servers")).json()) == ["com.example/ok"]
        errors = (await h.get("/status")).json()["sources"][0]["entryErrors"]
        assert [e["index"] for e in errors] == [1, 2]
        assert "schema violation" in errors[0]["message"] and "duplicate" in errors[1]["message"]


async def test_merge_first_source_wins_and_filters(db_url: str, tmp_path: Path) -> None:
    one = write_json(tmp_path / "one.json", [server_doc("com.example/shared", "1.0.0", "from one")])
    two = write_json(
        tmp_path / "two.json",
        [
            server_doc("com.example/shared", "2.0.0", "from two"),
            server_doc("com.example/only-two"),
            server_doc("com.example/skip-me"),
        ],
    )
    sources = [
        {"name": "one", "file": {"path": str(one)}},
        {"name": "two", "file": {"path": str(two)}, "filter": {"names": {"exclude": ["skip-*"]}}},
    ]
    async with running(make_config(sources, db_url), tmp_path) as h:
        await h.sync()
        doc = (await h.get("/v0.1/servers")).json()
        assert names_of(doc) == ["com.example/only-two", "com.example/shared"]
        assert doc["servers"][1]["server"]["description"] == "from one"
    # Config change: the filter now excludes only-two too; source "one" is removed. Restart = new config.
    sources = [
        {"name": "two", "file": {"path": str(two)}, "filter": {"names": {"include": ["com.example/shared"]}}}
    ]
    async with running(make_config(sources, db_url), tmp_path) as h:
        # before any sync: source "one" left the config and the new filter applies to stored data
        doc = (await h.get("/v0.1/servers")).json()
        assert names_of(doc) == ["com.example/shared"] and doc["servers"][0]["server"]["version"] == "2.0.0"
        await h.sync()
        doc = (await h.get("/v0.1/servers")).json()
        assert names_of(doc) == ["com.example/shared"]
        assert doc["servers"][0]["server"]["version"] == "2.0.0"


async def test_tag_filter_on_toolhive_tags(db_url: str, tmp_path: Path) -> None:
    th = {
        "servers": {
            "db": {
                "image": "x/db:1",
                "description": "database",
                "transport": "stdio",
                "tags": ["database", "sql"],
            },
            "web": {"image": "x/web:1", "description": "web", "transport": "stdio", "tags": ["web"]},
            "old": {
                "image": "x/old:1",
                "description": "old",
                "transport": "stdio",
                "tags": ["database", "deprecated"],
            },
        }
    }
    path = write_json(tmp_path / "th.json", th)
    flt = {"tags": {"include": ["data*"], "exclude": ["deprecated"]}}
    cfg = make_config(
        [{"name": "th", "format": "toolhive", "file": {"path": str(path)}, "filter": flt}], db_url
    )
    async with running(cfg, tmp_path) as h:
        await h.sync()
        assert names_of((await h.get("/v0.1/servers")).json()) == ["io.github.stacklok/db"]


async def test_catalogue_survives_restart_even_if_source_then_fails(db_url: str, tmp_path: Path) -> None:
    path = write_json(tmp_path / "r.json", [server_doc("com.example/a")])
    cfg = make_config([{"name": "s", "file": {"path": str(path)}}], db_url)
    async with running(cfg, tmp_path) as h:
        await h.sync()
        before = (await h.get("/v0.1/servers")).json()
    path.unlink()
    async with running(cfg, tmp_path) as h:
        assert (await h.get("/v0.1/servers")).json() == before
        await h.sync()
        assert (await h.get("/v0.1/servers")).json() == before
        assert h.service.ready  # last good data from before the restart
        assert (await h.get("/status")).json()["sources"][0]["lastError"]


async def test_cursor_walk_exact_while_syncs_change_data(db_url: str, tmp_path: Path) -> None:
    # 400 entries per sync: above the COPY threshold, so PostgreSQL's bulk path is exercised too
    stable = [server_doc(f"com.example/s{i:03d}") for i in range(0, 600, 3)]
    churn_a = [server_doc(f"com.example/s{i:03d}") for i in range(1, 600, 3)]
    churn_b = [server_doc(f"com.example/s{i:03d}") for i in range(2, 600, 3)]
    path = write_json(tmp_path / "r.json", stable + churn_a)
    cfg = make_config([{"name": "s", "file": {"path": str(path)}}], db_url)
    async with running(cfg, tmp_path) as h:
        await h.sync()
        seen: list[str] = []
        cursor = None
        page = 0
        while True:
            params = {"limit": "23"} | ({"cursor": cursor} if cursor else {})
            doc = (await h.get("/v0.1/servers", params=params)).json()
            seen += names_of(doc)
            cursor = doc["metadata"].get("nextCursor")
            if not cursor:
                break
            page += 1
            # between pages the source flips between two different sets of churning entries
            write_json(path, stable + (churn_b if page % 2 else churn_a))
            await h.service.syncer.sync_source("s")
        assert len(seen) == len(set(seen)), "an entry was returned twice"
        assert {d["name"] for d in stable} <= set(seen), "an entry present throughout the walk was skipped"
        assert seen == sorted(seen)


async def test_git_source(db_url: str, tmp_path: Path) -> None:
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> str:
        env = {
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@e",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@e",
            "PATH": "/usr/bin:/bin",
        }
        return subprocess.run(
            ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
        ).stdout

    git("init", "-q", "-b", "main")
    write_json(
        repo / "reg" / "r.json" if (repo / "reg").mkdir() is None else repo, [server_doc("com.example/v1")]
    )
    git("add", ".")
    git("commit", "-qm", "v1")
    first = git("rev-parse", "HEAD").strip()
    git("tag", "v1")
    write_json(repo / "reg" / "r.json", [server_doc("com.example/v2")])
    git("commit", "-qam", "v2")
    sources = [
        {"name": "head", "git": {"repository": str(repo), "branch": "main", "path": "reg/r.json"}},
        {
            "name": "tag",
            "git": {"repository": f"file://{repo}", "tag": "v1", "path": "reg/r.json"},
            "filter": {"names": {"include": ["v1"]}},
        },
        {
            "name": "commit",
            "git": {"repository": str(repo), "commit": first, "path": "reg/r.json"},
            "filter": {"names": {"include": ["nothing"]}},
        },
        {"name": "missing", "git": {"repository": str(repo), "path": "nope.json"}},
    ]
    async with running(make_config(sources, db_url), tmp_path) as h:
        await h.sync()
        status = {s["name"]: s for s in (await h.get("/status")).json()["sources"]}
        assert status["commit"]["lastError"] is None and status["commit"]["entries"] == 0
        assert "nope.json" in status["missing"]["lastError"]
        assert names_of((await h.get("/v0.1/servers")).json()) == ["com.example/v1", "com.example/v2"]
        write_json(repo / "reg" / "r.json", [server_doc("com.example/v3")])
        git("commit", "-qam", "v3")
        assert await h.service.syncer.sync_source("head") == "applied"
        assert names_of((await h.get("/v0.1/servers")).json()) == ["com.example/v1", "com.example/v3"]
        assert json.loads(json.dumps(status))  # status is plain JSON


async def test_api_federation_and_url_sources(db_url: str, tmp_path: Path) -> None:
    """Registry B federates registry A (paged, then incremental) and reads A's page as a url source."""
    import asyncio

    import uvicorn

    from tests.inprocess_server import InProcessServer

    upstream_dir = tmp_path / "a"
    upstream_dir.mkdir()
    path = write_json(upstream_dir / "r.json", [server_doc(f"com.example/f{i:02d}") for i in range(25)])
    cfg_a = make_config(
        [{"name": "s", "file": {"path": str(path)}}], f"sqlite+aiosqlite:///{upstream_dir / 'a.db'}"
    )
    async with running(cfg_a, upstream_dir) as a:
        await a.sync()
        server = InProcessServer(
            uvicorn.Config(a.app, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
        )
        task = asyncio.create_task(server.serve())
        for _ in range(500):  # uvicorn exposes no event for "listening"; poll its flag
            if server.started:
                break
            await asyncio.sleep(0.02)
        assert server.started, "in-process upstream registry did not start"
        port = server.servers[0].sockets[0].getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        try:
            # over real HTTP/1.1 keep-alive: 304 without a body, then the connection still works
            import httpx

            async with httpx.AsyncClient(base_url=base) as http:
                first = await http.get("/v0.1/servers?limit=5")
                etag = first.headers["etag"]
                again = await http.get("/v0.1/servers?limit=5", headers={"If-None-Match": etag})
                assert again.status_code == 304 and again.content == b""
                head = await http.head("/v0.1/servers?limit=5")
                assert head.status_code == 200 and int(head.headers["content-length"]) == len(first.content)
                assert (await http.get("/v0.1/servers?limit=5")).json() == first.json()
            sources = [
                {"name": "fed", "api": {"url": base, "pageSize": 10}},
                {
                    "name": "page",
                    "url": {"url": f"{base}/v0.1/servers?limit=3&search=/f2"},
                    "filter": {"names": {"include": ["f2*"]}},
                },
                {"name": "down", "url": {"url": "http://127.0.0.1:9/nothing", "timeout": "2s"}},
            ]
            async with running(make_config(sources, db_url), tmp_path) as b:
                await b.sync()
                status = {s["name"]: s for s in (await b.get("/status")).json()["sources"]}
                assert status["fed"]["entries"] == 25 and status["fed"]["lastError"] is None
                assert status["page"]["entries"] == 3 and status["page"]["lastError"] is None
                assert "failed" in status["down"]["lastError"]
                assert not b.service.ready
                assert b.service.catalogue.active_count == 25
                # upstream drops one entry and changes another: the incremental fetch carries both
                write_json(
                    path,
                    [
                        server_doc(f"com.example/f{i:02d}", description="v2" if i == 1 else "A test server")
                        for i in range(1, 25)
                    ],
                )
                await a.service.syncer.sync_source("s")
                assert await b.service.syncer.sync_source("fed") == "applied"
                doc = (await b.get("/v0.1/servers?limit=100")).json()
                names = [s["server"]["name"] for s in doc["servers"]]
                assert "com.example/f00" not in names and len(names) == 24
                assert (
                    next(s for s in doc["servers"] if s["server"]["name"] == "com.example/f01")["server"][
                        "description"
                    ]
                    == "v2"
                )
                assert await b.service.syncer.sync_source("fed") == "unchanged"
        finally:
            server.should_exit = True
            await task


async def test_running_loops_pick_up_a_file_edit_before_the_interval(tmp_path: Path) -> None:
    import asyncio

    from mcpfleet.registry.service import RegistryService

    data = tmp_path / "data"
    data.mkdir()
    path = write_json(data / "r.json", [server_doc("com.example/a")])
    cfg = make_config(
        [{"name": "s", "file": {"path": str(path)}, "syncPolicy": {"interval": "1h"}}],
        f"sqlite+aiosqlite:///{tmp_path / 'w.db'}",
    )
    service = RegistryService(cfg, tmp_path)  # loops on, as in production
    await service.start()
    try:
        for _ in range(200):
            if service.ready:
                break
            await asyncio.sleep(0.05)
        assert service.ready
        await asyncio.sleep(0.5)  # let the watcher settle
        # replace the file by rename, the way editors and volume updates do
        tmp = write_json(data / ".r.json.tmp", [server_doc("com.example/b")])
        tmp.replace(path)
        for _ in range(200):
            if [i.name for i in service.catalogue.items if i.status == "active"] == ["com.example/b"]:
                break
            await asyncio.sleep(0.05)
        assert [i.name for i in service.catalogue.items if i.status == "active"] == ["com.example/b"]
    finally:
        await service.stop()


async def test_database_outage_keeps_serving_and_reports(tmp_path: Path) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    path = write_json(tmp_path / "r.json", [server_doc("com.example/a")])
    cfg = make_config(
        [{"name": "s", "file": {"path": str(path)}}], f"sqlite+aiosqlite:///{tmp_path / 'o.db'}"
    )
    async with running(cfg, tmp_path) as h:
        await h.sync()
        healthy = h.service.store.engine
        # the database goes away (nothing listens on port 1)
        h.service.store.engine = create_async_engine("postgresql+asyncpg://x@127.0.0.1:1/none")
        try:
            write_json(path, [server_doc("com.example/b")])
            assert await h.service.syncer.sync_source("s") == "failed"
            assert names_of((await h.get("/v0.1/servers")).json()) == ["com.example/a"]
            status = (await h.get("/status")).json()["sources"][0]
            assert "Connect call failed" in status["lastError"], status["lastError"]
            assert (await h.get("/health")).status_code == 200
        finally:
            await h.service.store.engine.dispose()
            h.service.store.engine = healthy
        # back: the change is applied
        assert await h.service.syncer.sync_source("s") == "applied"
        assert names_of((await h.get("/v0.1/servers")).json()) == ["com.example/b"]


async def test_deleted_entries_are_purged_after_the_retention(db_url: str, tmp_path: Path) -> None:
    from mcpfleet.registry.config import parse_config

    path = write_json(tmp_path / "r.json", [server_doc("com.example/a"), server_doc("com.example/b")])
    doc = {
        "registryName": "t",
        "sources": [{"name": "s", "file": {"path": str(path)}}],
        "database": {"url": db_url},
    }
    async with running(parse_config(doc), tmp_path) as h:
        await h.sync()
        write_json(path, [server_doc("com.example/b")])
        await h.sync()  # a becomes a tombstone; the default retention keeps it
        assert len((await h.get("/v0.1/servers?include_deleted=true")).json()["servers"]) == 2
    doc["deletedRetention"] = "1ms"
    async with running(parse_config(doc), tmp_path) as h:
        await h.sync()  # the round ends with a purge
        listed = (await h.get("/v0.1/servers?include_deleted=true")).json()["servers"]
        assert [s["server"]["name"] for s in listed] == ["com.example/b"]
