"""Issue 11, defects 3 and 4, against a live `mcpfleet up`: a broken or conflicting edit of the watched
folder never stops what runs.

* A YAML syntax error in a watched file keeps the objects that file defined running as last loaded,
  and reports the error on them (`status.message`, condition `ManifestApplied=False`), until fixed.
* A duplicate of a running object in a newly added file does not take it over, whatever the sort
  order: the newcomer is the one reported as the duplicate.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
import yaml

from tests.local.conftest import Up, manifest


def _remote(name: str, port: int) -> str:
    return manifest("MCPRemoteProxy", name, {"remoteURL": f"http://127.0.0.1:{port}/mcp"})


def _row(up: Up, kind: str, name: str) -> dict[str, Any]:
    with sqlite3.connect(up.state_dir / "state.db", timeout=5) as db:
        found = db.execute(
            "select manifest, status, source from objects where kind = ? and name = ?", (kind, name)
        ).fetchone()
    if found is None:
        return {}
    return {"manifest": json.loads(found[0]), "status": json.loads(found[1]), "source": found[2]}


def _pid(up: Up, name: str) -> int | None:
    return next((pid for key, pid in up.processes().items() if key.split("/")[2] == name), None)


@pytest.mark.timeout(240)
async def test_broken_and_duplicate_edits_keep_running_objects(running_up: Any) -> None:
    keeper_yaml = _remote("keeper", 9) + "\n---\n" + manifest("MCPGroup", "team", {})
    up: Up = running_up({"keeper.yaml": keeper_yaml, "solo.yaml": _remote("solo", 9)})
    await up.wait_phase("MCPRemoteProxy", "keeper", {"Running"}, limit=90)
    await up.wait_phase("MCPRemoteProxy", "solo", {"Running"}, limit=90)
    keeper_pid = await up.wait_for("keeper's pid", lambda: _pid(up, "keeper"))

    # -- defect 3: a syntax error in the watched file ------------------------------------------
    (up.manifests / "keeper.yaml").write_text(keeper_yaml + "\n---\nkind: [unclosed\n")

    def reported() -> dict[str, Any] | None:
        status = _row(up, "MCPRemoteProxy", "keeper")["status"]
        return status if "the current one is invalid" in (status.get("message") or "") else None

    status = await up.wait_for("the YAML error reported on keeper", reported, limit=30)
    assert status["phase"] == "Running" and status["url"], status
    assert "keeper.yaml" in status["message"] and "not valid YAML" in status["message"]
    condition = next(c for c in status["conditions"] if c["type"] == "ManifestApplied")
    assert condition["status"] == "False" and condition["reason"] == "InvalidManifest"
    assert _row(up, "MCPGroup", "team")["source"] == "keeper.yaml#2"  # the group of that file kept too
    group_conditions = _row(up, "MCPGroup", "team")["status"].get("conditions") or []
    assert any(c["type"] == "ManifestApplied" and c["status"] == "False" for c in group_conditions)
    assert _pid(up, "keeper") == keeper_pid
    shown = yaml.safe_load(up.get("get", "rp", "keeper", "-o", "yaml"))
    assert "not valid YAML" in shown["status"]["message"]
    await up.wait_for(
        "the error printed by up", lambda: "invalid manifest" in up.output.read_text(), limit=10
    )

    # Fixed again: the report goes away, the process was never restarted.
    (up.manifests / "keeper.yaml").write_text(keeper_yaml)

    def cleared() -> dict[str, Any] | None:
        status = _row(up, "MCPRemoteProxy", "keeper")["status"]
        conditions = {c["type"] for c in status.get("conditions") or []}
        return status if "ManifestApplied" not in conditions and "invalid" not in status["message"] else None

    await up.wait_for("the report cleared", cleared, limit=30)
    assert _pid(up, "keeper") == keeper_pid

    # -- defect 4: a duplicate in a new file that sorts first ----------------------------------
    (up.manifests / "a-newcomer.yaml").write_text(_remote("keeper", 10))

    def duplicate_reported() -> bool:
        return (
            "a-newcomer.yaml (document 1) MCPRemoteProxy/keeper: metadata.name: duplicate of keeper.yaml#1"
            in (up.output.read_text())
        )

    await up.wait_for("the newcomer reported as the duplicate", duplicate_reported, limit=30)
    row = _row(up, "MCPRemoteProxy", "keeper")
    assert row["source"] == "keeper.yaml#1"
    assert row["manifest"]["spec"]["remoteURL"] == "http://127.0.0.1:9/mcp"
    assert row["status"]["phase"] == "Running"
    assert _pid(up, "keeper") == keeper_pid
    assert _row(up, "MCPRemoteProxy", "solo")["status"]["phase"] == "Running"

    # The owner's file removed: now the newcomer is the only definition, and it takes over.
    (up.manifests / "keeper.yaml").unlink()

    def taken_over() -> bool:
        return _row(up, "MCPRemoteProxy", "keeper").get("source") == "a-newcomer.yaml#1"

    await up.wait_for("the newcomer to take over once alone", taken_over, limit=30)
    assert not _row(up, "MCPGroup", "team")
