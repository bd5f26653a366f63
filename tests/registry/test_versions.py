"""Version semantics and `isLatest` (issue 32 items 2-4).

- The comparator against Go's own module semver package: validity and order of 306 version strings
  recorded from `golang.org/x/mod/semver` (tests/registry/data/go_semver.json, written by
  scripts/record_go_semver.py) and a hypothesis property test against an independent reference
  ordering (semver 2.0.0 precedence of generated versions).
- Deleting (or any status change of) the latest version recalculates it, on SQLite and PostgreSQL.
- Non-semantic versions that arrive in one sync keep the source's order, each with its own time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.registry.versions import compare_semantic_versions, is_semantic_version
from tests.registry.conftest import make_config, running, server_doc, write_json
from tests.registry.test_publish import bearer, path, registry, token

GO = json.loads((Path(__file__).parent / "data" / "go_semver.json").read_text())


@pytest.mark.parametrize(("version", "valid"), GO["valid"])
def test_validity_is_gos(version: str, valid: bool) -> None:
    assert is_semantic_version(version) is valid


def test_order_is_gos() -> None:
    order = GO["order"]
    versions = [v for v, _ in order]
    # Rank in Go's order: equal versions share a rank.
    rank: list[int] = []
    for i, (_v, cmp) in enumerate(order):
        rank.append(rank[-1] + (cmp != 0) if i else 0)
    for i, a in enumerate(versions):
        for j, b in enumerate(versions):
            expected = (rank[i] > rank[j]) - (rank[i] < rank[j])
            assert compare_semantic_versions(a, b) == expected, (a, b)


# -- property test against a reference ordering --------------------------------------------------

_NUMBERS = st.integers(0, 10**12).map(str)
_ALNUM = st.from_regex(r"[0-9A-Za-z-]*[A-Za-z-][0-9A-Za-z-]*", fullmatch=True).filter(lambda s: len(s) <= 8)
_IDENTS = st.one_of(_NUMBERS, _ALNUM)


@st.composite
def versions(draw: st.DrawFn) -> tuple[str, tuple[Any, ...]]:
    """A valid semantic version and its semver 2.0.0 precedence key (build metadata ignored)."""
    major, minor, patch = draw(_NUMBERS), draw(_NUMBERS), draw(_NUMBERS)
    pre = draw(st.lists(_IDENTS, max_size=3))
    build = draw(st.lists(st.from_regex(r"[0-9A-Za-z-]{1,4}", fullmatch=True), max_size=2))
    text = draw(st.sampled_from(["", "v"])) + f"{major}.{minor}.{patch}"
    if pre:
        text += "-" + ".".join(pre)
    if build:
        text += "+" + ".".join(build)
    # Reference: a release sorts after every pre-release of the same core; identifiers compare
    # numerically (numeric) or as ASCII (alphanumeric), numeric below alphanumeric; a longer list wins.
    pre_key = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre)
    key = (int(major), int(minor), int(patch), 1 if not pre else 0, pre_key)
    return text, key


@settings(max_examples=200, deadline=None)
@given(a=versions(), b=versions())
def test_comparator_matches_the_reference_ordering(
    a: tuple[str, tuple[Any, ...]], b: tuple[str, tuple[Any, ...]]
) -> None:
    assert is_semantic_version(a[0]) and is_semantic_version(b[0])
    expected = (a[1] > b[1]) - (a[1] < b[1])
    assert compare_semantic_versions(a[0], b[0]) == expected
    assert compare_semantic_versions(b[0], a[0]) == -expected


@settings(max_examples=100, deadline=None)
@given(a=versions(), digit=st.sampled_from("0123456789"))
def test_leading_zeros_are_not_semantic(a: tuple[str, tuple[Any, ...]], digit: str) -> None:
    text = a[0].removeprefix("v")
    assert not is_semantic_version("0" + digit + text)  # a major with a leading zero
    core, _, rest = text.partition("-")
    # (No build metadata anywhere: in `1.0.0+-0` the `-` is part of the build, where leading zeros are fine.)
    if rest and "+" not in text:
        assert not is_semantic_version(f"{core}-{rest}.0{digit}")  # a numeric identifier with one


# -- isLatest in the store ------------------------------------------------------------------------


async def _latest(h: Any, name: str) -> str | None:
    r = await h.get(path(name, "versions", "latest"))
    return r.json()["server"]["version"] if r.status_code == 200 else None


async def test_deleting_the_latest_recalculates_it(db_url: str, tmp_path: Path) -> None:
    name = "com.acme/latest"
    async with registry(db_url, tmp_path) as (issuer, h):
        auth = bearer(token(issuer))
        moderator = bearer(token(issuer, sub="moderator", groups=[]))
        for v in ("1.0.0", "2.0.0"):
            assert (
                await h.client.post("/v0.1/publish", json=server_doc(name, v), headers=auth)
            ).status_code == 200
        assert await _latest(h, name) == "2.0.0"
        assert (await h.client.delete(path(name, "versions", "2.0.0"), headers=auth)).status_code == 200
        assert await _latest(h, name) == "1.0.0"
        listed = (await h.get("/v0.1/servers", params={"version": "latest", "search": "latest"})).json()
        assert [s["server"]["version"] for s in listed["servers"] if s["server"]["name"] == name] == ["1.0.0"]
        assert (
            await h.client.post("/v0.1/publish", json=server_doc(name, "1.5.0"), headers=auth)
        ).status_code == 200
        assert await _latest(h, name) == "1.5.0"
        # Undeleting 2.0.0 makes it the latest again; deprecating keeps it.
        active = {"status": "active"}
        target = path(name, "versions", "2.0.0", "status")
        assert (await h.client.patch(target, json=active, headers=moderator)).status_code == 200
        assert await _latest(h, name) == "2.0.0"
        deprecated = {"status": "deprecated", "statusMessage": "old"}
        assert (await h.client.patch(target, json=deprecated, headers=auth)).status_code == 200
        assert await _latest(h, name) == "2.0.0"
        # Every version deleted: the flag stays on one of them for include_deleted readers.
        everything = path(name, "status")
        assert (await h.client.patch(everything, json={"status": "deleted"}, headers=auth)).status_code == 200
        assert await _latest(h, name) is None
        r = await h.get(path(name, "versions", "latest"), params={"include_deleted": "true"})
        assert r.status_code == 200 and r.json()["server"]["version"] == "2.0.0"


async def test_non_semantic_versions_of_one_sync_keep_the_source_order(tmp_path: Path) -> None:
    name = "io.example/snapshots"
    order = ["zeta", "alpha", "mid"]  # not string order
    write_json(tmp_path / "s.json", [server_doc(name, v) for v in order])
    cfg = make_config([{"name": "s", "file": {"path": "s.json"}}], f"sqlite+aiosqlite:///{tmp_path / 'r.db'}")
    async with running(cfg, tmp_path) as h:
        await h.sync()
        assert await _latest(h, name) == "mid"  # the last one the source listed
        servers = (await h.get(path(name, "versions"))).json()["servers"]
        times = {
            s["server"]["version"]: s["_meta"]["io.modelcontextprotocol.registry/official"]["publishedAt"]
            for s in servers
        }
        assert times["zeta"] < times["alpha"] < times["mid"]
