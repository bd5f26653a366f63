"""`mcpfleet get` columns: the kinds' printer columns (the CRDs' additionalPrinterColumns)."""

from __future__ import annotations

from mcpfleet.api.mcpserver import MCPServer
from mcpfleet.api.virtualmcpserver import VirtualMCPServer
from mcpfleet.platform.local.display import age, json_path, plain_table, rows
from mcpfleet.platform.local.snapshot import StoredObject


def _stored(kind: str, name: str, status: dict[str, object]) -> StoredObject:
    return StoredObject(
        kind,
        "default",
        name,
        {"kind": kind, "metadata": {"name": name}},
        1,
        status,
        "x#1",
        "2026-01-01T00:00:00Z",
    )


def test_columns_match_kubectl_get() -> None:
    status = {
        "phase": "Running",
        "url": "http://127.0.0.1:31000/mcp",
        "readyReplicas": 1,
        "conditions": [{"type": "GroupRefValidated", "status": "False"}, {"type": "Ready", "status": "True"}],
    }
    header, body = rows(MCPServer, [_stored("MCPServer", "time", status)])
    assert header == ["NAME", "STATUS", "READY", "REPLICAS", "URL", "AGE"]
    assert body[0][:5] == ["time", "Running", "True", "1", "http://127.0.0.1:31000/mcp"]
    assert body[0][5].endswith("d")
    header, _ = rows(VirtualMCPServer, [])
    assert header == ["NAME", "STATUS", "READY", "REPLICAS", "URL", "BACKENDS", "AGE"]
    text = plain_table(header, [["gw", "Ready", "True", "1", "http://x", "2", "5s"]])
    assert text.splitlines()[0].startswith("NAME   STATUS   READY")


def test_json_path_and_age() -> None:
    doc = {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    assert json_path(doc, '.status.conditions[?(@.type=="Ready")].status') == "False"
    assert json_path(doc, ".status.url") is None
    assert age(None) == "<unknown>"
