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


def test_up_settles_on_the_phase_a_gateway_waiting_for_its_report_is_pending() -> None:
    """`up`'s progress ends when every workload's phase is final: a gateway that serves but has not
    reported a backend is Pending (the VirtualMCPServer status rule), so `up` waits for it; a gateway
    Degraded because a member Failed is final, one Degraded on a member that still runs is not."""
    from mcpfleet.platform.local.commands import _settled

    def world(gateway: dict[str, object], time_phase: str = "Running") -> list[StoredObject]:
        return [
            _stored("MCPServer", "time", {"phase": time_phase, "observedGeneration": 1}),
            _stored("VirtualMCPServer", "gw", {"observedGeneration": 1, **gateway}),
        ]

    def backend(status: str) -> dict[str, object]:
        return {"discoveredBackends": [{"name": "time", "status": status}]}

    waiting = {"phase": "Pending", "url": "http://127.0.0.1:1/mcp", **backend("unknown")}
    assert not _settled(world(waiting))
    assert _settled(world({"phase": "Ready", **backend("healthy")}))
    assert _settled(world({"phase": "Degraded", **backend("unavailable")}, time_phase="Failed"))
    assert not _settled(world({"phase": "Degraded", **backend("unhealthy")}))
