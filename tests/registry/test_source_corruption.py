"""Source corruption: every broken document of the corpus (`corruption.py`), in both formats, through
real sources — a file, an HTTP URL served locally, a local git repository and a ConfigMap on the dev cluster — fails the sync with an
error naming the field, keeps the last good data served, and lists the source under the readiness
probe's failingSources. Legitimately empty documents are good syncs. Issue 11 defect 9: a ToolHive
document without `servers` and an upstream document whose every entry is rejected used to count as a
successful empty sync that tombstoned everything.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from mcpfleet.registry.sources.base import MAX_DOCUMENT_BYTES
from tests.local_http import serving
from tests.registry.conftest import Harness, make_config, running
from tests.registry.corruption import EMPTY, GOOD_TOOLHIVE, GOOD_UPSTREAM, Case, corpus, good

CASES = corpus()
FORMATS = ("upstream", "toolhive")


def sqlite(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'registry.db'}"


def good_name(fmt: str) -> str:
    return GOOD_UPSTREAM if fmt == "upstream" else GOOD_TOOLHIVE


async def served(h: Harness) -> list[str]:
    return [s["server"]["name"] for s in (await h.get("/v0.1/servers")).json()["servers"]]


async def check_failed(h: Harness, case: Case, problems: list[str]) -> None:
    """One corrupt fetch: a failed sync naming the problem, the good entry still served, readiness says so."""
    try:
        result = await h.service.syncer.sync_source("s")
    except Exception as exc:
        problems.append(f"{case.id}: sync raised {type(exc).__name__}: {exc}")
        return
    status = (await h.get("/status")).json()["sources"][0]
    error = status["lastError"] or ""
    if result != "failed":
        problems.append(f"{case.id}: sync {result}, not failed ({status['entries']} entries)")
        return
    if case.expect not in error:
        problems.append(f"{case.id}: lastError {error[:300]!r} lacks {case.expect!r}")
    if len(error) > 2000:
        problems.append(f"{case.id}: lastError is {len(error)} characters long")
    names = await served(h)
    if names != [good_name(case.fmt)]:
        problems.append(f"{case.id}: the last good data is gone: {names}")
    readiness = await h.get("/readiness")
    body = readiness.json()
    if readiness.status_code != 200 or [s["name"] for s in body.get("failingSources", [])] != ["s"]:
        problems.append(f"{case.id}: readiness {readiness.status_code} {body}")


# -- file source: the whole corpus -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
async def test_file_source_corpus(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    path.write_bytes(good(fmt))
    cfg = make_config([{"name": "s", "format": fmt, "file": {"path": str(path)}}], sqlite(tmp_path))
    cases = [c for c in CASES if c.fmt == fmt]
    assert len(cases) >= 60, len(cases)
    problems: list[str] = []
    async with running(cfg, tmp_path) as h:
        await h.sync()
        assert await served(h) == [good_name(fmt)]
        for case in cases:
            path.write_bytes(case.content)
            await check_failed(h, case, problems)
        # Recovery: the good document again clears the error and the failing list.
        path.write_bytes(good(fmt) + b" ")
        assert await h.service.syncer.sync_source("s") == "applied"
        assert (await h.get("/status")).json()["sources"][0]["lastError"] is None
        assert "failingSources" not in (await h.get("/readiness")).json()
    assert not problems, f"{len(problems)} of {len(cases)} cases:\n" + "\n".join(problems)


@pytest.mark.parametrize("fmt", FORMATS)
async def test_first_sync_of_a_structurally_wrong_document_is_not_ready(fmt: str, tmp_path: Path) -> None:
    """Defect 9 at start-up: `{}` is no registry, so the service must not turn ready with nothing."""
    path = tmp_path / "registry.json"
    path.write_bytes(b"{}")
    cfg = make_config([{"name": "s", "format": fmt, "file": {"path": str(path)}}], sqlite(tmp_path))
    async with running(cfg, tmp_path) as h:
        await h.sync()
        readiness = await h.get("/readiness")
        assert readiness.status_code == 503
        assert readiness.json()["failingSources"][0]["name"] == "s"
        assert (await h.get("/status")).json()["sources"][0]["lastError"]


@pytest.mark.parametrize(("fmt", "content"), EMPTY, ids=[f"{f}:{c.decode()}" for f, c in EMPTY])
async def test_legitimately_empty_documents_are_good_syncs(fmt: str, content: bytes, tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    path.write_bytes(good(fmt))
    cfg = make_config([{"name": "s", "format": fmt, "file": {"path": str(path)}}], sqlite(tmp_path))
    async with running(cfg, tmp_path) as h:
        await h.sync()
        path.write_bytes(content)
        assert await h.service.syncer.sync_source("s") == "applied"
        assert await served(h) == []
        status = (await h.get("/status")).json()["sources"][0]
        assert status["lastError"] is None and status["entries"] == 0
        assert (await h.get("/readiness")).status_code == 200


async def test_some_bad_entries_still_load_the_good_ones(tmp_path: Path) -> None:
    """Not every problem fails a sync: a good entry beside bad ones loads, the bad ones are reported."""
    path = tmp_path / "registry.json"
    path.write_bytes(
        b'{"servers": {"good": {"image": "ghcr.io/acme/good:1.0", "description": "d"},'
        b' "bad": {"image": 5}, "good": {"image": "ghcr.io/acme/good:1.0", "description": "again"}}}'
    )
    cfg = make_config([{"name": "s", "format": "toolhive", "file": {"path": str(path)}}], sqlite(tmp_path))
    async with running(cfg, tmp_path) as h:
        await h.sync()
        assert await served(h) == [GOOD_TOOLHIVE]
        errors = (await h.get("/status")).json()["sources"][0]["entryErrors"]
        messages = " | ".join(e["message"] for e in errors)
        assert "servers.bad.image: expected a string" in messages and "duplicate name" in messages


async def test_oversized_file_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "registry.json"
    path.write_bytes(good("upstream"))
    cfg = make_config([{"name": "s", "file": {"path": str(path)}}], sqlite(tmp_path))
    async with running(cfg, tmp_path) as h:
        await h.sync()
        with path.open("wb") as handle:  # sparse: 1 MiB past the limit, costs no disk
            handle.truncate(MAX_DOCUMENT_BYTES + 2**20)
        problems: list[str] = []
        await check_failed(h, Case("upstream", "oversized file", b"", "MiB limit"), problems)
        assert not problems, problems


# -- url source: the whole corpus over HTTP ----------------------------------------------------------


class Served:
    """A local HTTP server answering GET /registry.json with whatever `content` holds now."""

    def __init__(self) -> None:
        self.content = b""
        self.stream_bytes = 0
        self.url = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.stream_bytes:
            response = web.StreamResponse()
            await response.prepare(request)
            chunk = b" " * 2**20
            sent = 0
            try:
                while sent < self.stream_bytes:
                    await response.write(chunk)
                    sent += len(chunk)
            except (ConnectionResetError, RuntimeError):
                pass  # the reader stopped at its limit
            return response
        return web.Response(body=self.content, content_type="application/json")


@pytest.fixture
async def http_source() -> AsyncIterator[Served]:
    served_ = Served()
    app = web.Application()
    app.router.add_get("/registry.json", served_.handle)
    async with serving(app) as url:
        served_.url = f"{url}/registry.json"
        yield served_


@pytest.mark.parametrize("fmt", FORMATS)
async def test_url_source_corpus(fmt: str, http_source: Served, tmp_path: Path) -> None:
    http_source.content = good(fmt)
    cfg = make_config([{"name": "s", "format": fmt, "url": {"url": http_source.url}}], sqlite(tmp_path))
    cases = [c for c in CASES if c.fmt == fmt]
    problems: list[str] = []
    async with running(cfg, tmp_path) as h:
        await h.sync()
        assert await served(h) == [good_name(fmt)]
        for case in cases:
            http_source.content = case.content
            await check_failed(h, case, problems)
        # An endless-looking body: reading stops at the limit (memory stays bounded).
        http_source.stream_bytes = MAX_DOCUMENT_BYTES + 8 * 2**20
        await check_failed(h, Case(fmt, "oversized body", b"", "MiB limit"), problems)
    assert not problems, f"{len(problems)} of {len(cases) + 1} cases:\n" + "\n".join(problems)


# -- git source: the corpus committed to a local repository ------------------------------------------


def git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), *args],
        check=True,
        capture_output=True,
        env={
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
            "HOME": str(repo),
            "PATH": "/usr/bin:/bin",
        },
    )


@pytest.fixture
def repo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    yield path


@pytest.mark.parametrize("fmt", FORMATS)
async def test_git_source_corpus(fmt: str, repo: Path, tmp_path: Path) -> None:
    def commit(content: bytes, message: str) -> None:
        (repo / "registry.json").write_bytes(content)
        git(repo, "add", "registry.json")
        git(repo, "commit", "-q", "--allow-empty", "-m", message)

    commit(good(fmt), "good")
    source: dict[str, Any] = {"repository": str(repo), "branch": "main", "path": "registry.json"}
    cfg = make_config([{"name": "s", "format": fmt, "git": source}], sqlite(tmp_path))
    cases = sample(fmt)  # each case is a commit and a fetch
    problems: list[str] = []
    async with running(cfg, tmp_path) as h:
        await h.sync()
        assert await served(h) == [good_name(fmt)]
        for case in cases:
            await asyncio.to_thread(commit, case.content, case.id)
            await check_failed(h, case, problems)
    assert not problems, f"{len(problems)} of {len(cases)} cases:\n" + "\n".join(problems)


async def test_url_credentials_never_reach_last_error(tmp_path: Path) -> None:
    url = "http://reader:hunter2@127.0.0.1:9/registry.json?api_key=s3cr3t&v=1"
    cfg = make_config([{"name": "s", "url": {"url": url}}], sqlite(tmp_path))
    async with running(cfg, tmp_path) as h:
        await h.sync()
        error = (await h.get("/status")).json()["sources"][0]["lastError"]
        assert error.startswith("GET http://***@127.0.0.1:9/registry.json?api_key=***&v=*** failed")
        assert "hunter2" not in error and "s3cr3t" not in error and "reader" not in error


# -- configMap source: the corpus through the dev cluster's API server ---------------------------------


def sample(fmt: str) -> list[Case]:
    """Every structural case and a quarter of the rest (each one is a write through the API server)."""
    cases = [c for c in CASES if c.fmt == fmt]
    return [c for i, c in enumerate(cases) if "required" in c.expect or "expected" in c.expect or i % 4 == 0]


@pytest.mark.cluster
@pytest.mark.parametrize("fmt", FORMATS)
async def test_configmap_source_corpus(
    fmt: str, dev_cluster: Any, crds_installed: list[str], namespace: str, tmp_path: Path
) -> None:
    import base64

    from tests.registry.test_kubernetes import client_factory

    path = f"/api/v1/namespaces/{namespace}/configmaps"

    def put(content: bytes, create: bool = False) -> None:
        # binaryData carries any bytes, as a ConfigMap volume or `kubectl create --from-file` would.
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "registry", "namespace": namespace},
            "binaryData": {"registry.json": base64.b64encode(content).decode()},
        }
        with dev_cluster.api(timeout=30) as api:
            response = api.post(path, json=body) if create else api.put(f"{path}/registry", json=body)
            response.raise_for_status()

    put(good(fmt), create=True)
    source = {"namespace": namespace, "name": "registry", "key": "registry.json"}
    cfg = make_config([{"name": "s", "format": fmt, "configMap": source}], sqlite(tmp_path))
    cases = sample(fmt)
    problems: list[str] = []
    async with running(cfg, tmp_path, kube_client=client_factory(dev_cluster)) as h:
        await h.sync()
        assert await served(h) == [good_name(fmt)]
        for case in cases:
            await asyncio.to_thread(put, case.content)
            await check_failed(h, case, problems)
    assert not problems, f"{len(problems)} of {len(cases)} cases:\n" + "\n".join(problems)
