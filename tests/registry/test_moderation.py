"""Moderation (issue 32 item 8): `PUT …/versions/{version}` by a token with an `edit` grant replaces a
published version's content, as on the official registry (200), audited; publishers still cannot change
a published version (403), and the body passes every publish check."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from mcpfleet.registry.entry import OFFICIAL_META
from tests.registry.conftest import server_doc
from tests.registry.test_publish import SYNCED, assert_problem, bearer, path, registry, token

NAME = "com.acme/moderated"


async def test_an_edit_grant_replaces_a_version_audited(
    db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with registry(db_url, tmp_path) as (issuer, h):
        publisher = bearer(token(issuer))
        moderator = bearer(token(issuer, sub="moderator", groups=[]))
        for v in ("1.0.0", "2.0.0"):
            assert (
                await h.client.post("/v0.1/publish", json=server_doc(NAME, v), headers=publisher)
            ).status_code == 200
        deprecated = {"status": "deprecated", "statusMessage": "use 2"}
        target = path(NAME, "versions", "1.0.0")
        assert (
            await h.client.patch(target + "/status", json=deprecated, headers=publisher)
        ).status_code == 200
        before = await h.get(target)

        # A publisher cannot change a published version, even one it may publish.
        edited = server_doc(NAME, "1.0.0", description="Replaced by a moderator")
        body = assert_problem(
            await h.client.put(target, json=edited, headers=publisher), 403, "path.serverName"
        )
        assert "immutable" in body["detail"]
        assert (await h.get(target)).json() == before.json()

        with caplog.at_level(logging.INFO, logger="mcpfleet.registry.audit"):
            r = await h.client.put(target, json=edited, headers=moderator)
        assert r.status_code == 200, r.text
        served = await h.get(target)
        assert served.json()["server"] == edited and served.headers["etag"] != before.headers["etag"]
        official = served.json()["_meta"][OFFICIAL_META]
        assert official["status"] == "deprecated" and official["isLatest"] is False  # kept
        assert (await h.get(path(NAME, "versions", "latest"))).json()["server"]["version"] == "2.0.0"
        events = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mcpfleet.registry.audit"]
        assert len(events) == 1
        event = events[0]
        assert event["action"] == "edit_version" and event["subject"]["sub"] == "moderator"
        assert (event["name"], event["version"]) == (NAME, "1.0.0")
        assert event["previousContentHash"] != event["contentHash"]
        assert "token" not in json.dumps(event).lower()


async def test_edits_are_checked_like_publishes(db_url: str, tmp_path: Path) -> None:
    async with registry(db_url, tmp_path) as (issuer, h):
        publisher = bearer(token(issuer))
        moderator = bearer(token(issuer, sub="moderator", groups=[]))
        assert (
            await h.client.post("/v0.1/publish", json=server_doc(NAME), headers=publisher)
        ).status_code == 200
        target = path(NAME, "versions", "1.0.0")
        cases = [
            (server_doc(NAME, "1.0.1"), 422, "body.version"),
            (server_doc("com.acme/other"), 422, "body.name"),
            (server_doc(NAME, _meta={OFFICIAL_META: {"isLatest": True}}), 422, f"body._meta.{OFFICIAL_META}"),
            (server_doc(NAME, websiteUrl="http://acme.com"), 422, "body.websiteUrl"),
            ({"name": NAME}, 422, None),
        ]
        for document, status, location in cases:
            assert_problem(await h.client.put(target, json=document, headers=moderator), status, location)
        assert_problem(await h.client.put(target, json=server_doc(NAME)), 401)
        unknown = path(NAME, "versions", "9.9.9")
        assert_problem(await h.client.put(unknown, json=server_doc(NAME, "9.9.9"), headers=moderator), 404)
        synced = path(SYNCED, "versions", "1.0.0")
        assert_problem(await h.client.put(synced, json=server_doc(SYNCED), headers=moderator), 409)
        assert (await h.get(target)).json()["server"] == server_doc(NAME)
