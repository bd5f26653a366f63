"""Every entry of the bundled catalogue is a real server: installed from PyPI / npm with the command
its manifest runs, it starts and lists its tools through the MCP SDK client (stdio).

Needs the package registries (PyPI, npm) the first time; later runs use the uv and npm caches.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from mcpfleet.catalogue.entries import CatalogueEntry, bundled
from mcpfleet.catalogue.manifest import Inputs, plan_add
from mcpfleet.reconcile.common import package_command

ENTRIES = bundled()
EXPECTED_TOOL = {
    "time": "get_current_time",
    "fetch": "fetch",
    "git": "git_status",
    "everything": "echo",
    "filesystem": "read_text_file",
    "memory": "create_entities",
    "sequential-thinking": "sequentialthinking",
}


def test_every_bundled_entry_is_covered() -> None:
    assert sorted(e.short_name for e in ENTRIES) == sorted(EXPECTED_TOOL)


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.short_name for e in ENTRIES])
async def test_bundled_entry_installs_and_lists_its_tools(entry: CatalogueEntry, tmp_path: Path) -> None:
    args = {"directory": [str(tmp_path)]} if entry.short_name == "filesystem" else {}
    spec = plan_add(entry, entry.short_name, Inputs(args=args)).manifest["spec"]
    command = package_command(spec["image"], spec.get("args"))
    # uvx is installed beside this Python (a dependency of mcpfleet), as `mcpfleet up` finds it.
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])
    env = {**os.environ, "PATH": path}
    env["MEMORY_FILE_PATH"] = str(tmp_path / "memory.jsonl")
    params = StdioServerParameters(command=command[0], args=list(command[1:]), env=env, cwd=str(tmp_path))
    async with Client(params, read_timeout_seconds=300) as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
    assert EXPECTED_TOOL[entry.short_name] in tools, tools
