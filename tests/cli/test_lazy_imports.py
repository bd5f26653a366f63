"""Start-up cost guards (issue 19): what each entry point loads, asserted on `sys.modules`.

Timings are measured by bench/startup.py, never asserted here; what keeps them low is that each
entry imports only what it serves with. Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("pydantic", "uvicorn", "mcp", "starlette", "sqlalchemy", "aiohttp", "httpx", "kopf")
HEAVY += ("opentelemetry", "rich", "yaml", "watchfiles", "lightkube", "uvloop")


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=120
    )
    return set(json.loads(out.stdout.splitlines()[-1]))


def _tops(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_cli_entry_loads_no_service_stack() -> None:
    """`mcpfleet --help`, `mcpfleet get` & co. pay for typer only: every command imports its stack itself."""
    loaded = _tops(_loaded_after("import mcpfleet.cli.main\nmcpfleet.cli.main.command()"))
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_plain_stdio_proxy_loads_no_auth_remote_or_control_plane() -> None:
    """A stdio proxy without --auth-config builds its app without aiohttp, the OIDC stack, the
    Kubernetes attach client or anything of the control plane."""
    code = """
import typer
from mcpfleet.cli import proxy
app = typer.Typer()
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(proxy.proxy)
ctx = typer.main.get_command(app).make_context("proxy", ["--port", "0", "--", "true"])
proxy.build(list(ctx.args), **ctx.params)
"""
    loaded = _loaded_after(code)
    unwanted = {"aiohttp", "sqlalchemy", "kopf", "lightkube"}  # (the mcp SDK itself loads opentelemetry)
    assert _tops(loaded).isdisjoint(unwanted), sorted(_tops(loaded) & unwanted)
    for package in ("mcpfleet.auth", "mcpfleet.proxy.attach", "mcpfleet.proxy.remote", "mcpfleet.operator"):
        assert package not in loaded, package


@pytest.mark.parametrize(
    ("module", "unwanted"),
    [
        ("mcpfleet.vmcp.server", {"sqlalchemy", "kopf", "lightkube"}),
        ("mcpfleet.registry.app", {"mcp", "kopf", "lightkube", "fastapi", "alembic"}),
    ],
)
def test_services_load_only_their_stack(module: str, unwanted: set[str]) -> None:
    loaded = _loaded_after(f"import {module}")
    assert _tops(loaded).isdisjoint(unwanted), sorted(_tops(loaded) & unwanted)
    assert not any(m.startswith("mcpfleet.operator") for m in loaded)
