"""`mcpfleet up` on a ToolHive-style v1beta1 VirtualMCPServer setting the superseded
`spec.config.groupRef`: the gateway runs on that group and the terminal shows the warning once, naming
the file, the object and the current field."""

from __future__ import annotations

from typing import Any

import pytest

from tests.local.conftest import Up

GROUP = "apiVersion: mcpfleet.dev/v1beta1\nkind: MCPGroup\nmetadata: {name: team}\nspec: {}\n"
GATEWAY = """apiVersion: mcpfleet.dev/v1beta1
kind: VirtualMCPServer
metadata: {name: gw}
spec:
  config: {groupRef: team}
  incomingAuth: {type: anonymous}
"""


@pytest.mark.timeout(180)
async def test_up_warns_about_a_superseded_field(running_up: Any) -> None:
    up: Up = running_up({"group.yaml": GROUP, "gw.yaml": GATEWAY})
    await up.wait_for("the summary", lambda: "watching" in up.output.read_text(), limit=120)
    terminal = up.output.read_text()
    line = (
        "gw.yaml (document 1) VirtualMCPServer/gw: spec.config.groupRef is superseded: read as"
        " spec.groupRef.name; set spec.groupRef.name instead"
    )
    assert terminal.replace("\n", " ").count(line) == 1, terminal
    assert "invalid manifest" not in terminal, terminal
    listing = up.get("get", "vmcp", "gw", "-o", "yaml")
    assert "groupRef: team" in listing, listing
