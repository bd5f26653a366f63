"""Start-up cost guards (issue 19): what each entry point loads, asserted on `sys.modules`.

Timings are measured by bench/startup.py, never asserted here; what keeps them low is that each
entry imports only what it serves with. Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pydantic", "uvicorn", "mcp", "starlette", "sqlalchemy", "aiohttp", "httpx", "kopf")
HEAVY += ("opentelemetry", "rich", "yaml", "watchfiles", "lightkube", "uvloop")


def _loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter holds after `code`; the MCP SDK's packages `mcp`, `mcp.server`
    and `mcp_types`, uvicorn's and prometheus_client's only once their `__init__` ran (mcpfleet
    registers them deferred: `mcpsdk.py`)."""
    probe = (
        f"{code}\nimport sys, json\n"
        "deferred = {n for n in ('mcp', 'mcp.server', 'mcp_types', 'uvicorn', 'prometheus_client') if '__getattr__' in vars(sys.modules.get(n, sys))}\n"
        "print(json.dumps(sorted(set(sys.modules) - deferred)))"
    )
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
from mcpfleet.cli import proxy
from mcpfleet.cli.options import parse
command, params = parse(proxy.proxy, ["--port", "0", "--", "true"], command_line=True)
proxy.build(command, **params)
"""
    loaded = _loaded_after(code)
    unwanted = {"aiohttp", "sqlalchemy", "kopf", "lightkube", "redis", "jwt", "cryptography"}
    # The fast start path (cli/main.py) reads the argv itself. (click still loads: the SDK's transport
    # imports sse_starlette, which patches uvicorn's command-line module.)
    unwanted |= {"typer", "rich"}
    assert _tops(loaded).isdisjoint(unwanted), sorted(_tops(loaded) & unwanted)
    for package in (
        "mcpfleet.auth",
        "mcpfleet.proxy.attach",
        "mcpfleet.proxy.remote",
        "mcpfleet.operator",
        "yaml",
    ):
        assert package not in loaded, package
    # Of the MCP SDK only the transport it serves with: not its package __init__s (client, server
    # frameworks), not every protocol version's request types (loaded after start: jsonrpc.py), not
    # the SSE transport (`--transport sse` only), not the api models of a toolConfig it was not given,
    # not the protocol's wire types (`mcp_types._types`: the transport needs its JSON-RPC envelope only).
    assert "mcp.server.streamable_http" in loaded
    for module in (
        "mcp",
        "mcp_types",
        "mcp_types._types",
        "mcp.client",
        "mcp.server",
        "mcp.server.lowlevel",
        "mcp.server.mcpserver",
        "mcp.server.sse",
        "mcp.server.auth",
        "mcp_types.methods",
        "mcpfleet.api.mcptoolconfig",
        "mcpfleet.policy.config",  # the authz models: only with --authz-config
    ):
        assert module not in loaded, module


@pytest.mark.parametrize(
    ("module", "unwanted"),
    [
        (
            "mcpfleet.vmcp.server",
            {"sqlalchemy", "kopf", "lightkube", "redis", "jwt", "mcp", "mcp_types", "cedarpy"},
        ),
        (
            "mcpfleet.registry.app",
            {"mcp", "kopf", "lightkube", "fastapi", "alembic", "redis", "jwt", "sqlalchemy"},
        ),
    ],
)
def test_services_load_only_their_stack(module: str, unwanted: set[str]) -> None:
    loaded = _loaded_after(f"import {module}")
    assert _tops(loaded).isdisjoint(unwanted), sorted(_tops(loaded) & unwanted)
    assert not any(m.startswith("mcpfleet.operator") for m in loaded)
    # The OpenTelemetry SDK only when tracing is on (telemetry.setup_tracing): the API suffices off.
    assert not any(m.startswith("opentelemetry.sdk") for m in loaded)


def test_deferred_sdk_packages_are_the_real_ones_on_first_use() -> None:
    """The SDK's top-level names still work after mcpfleet deferred its package __init__s: the first
    attribute runs the real __init__ once, and the package is then what a plain import gives."""
    code = """
import mcpfleet.proxy.http_app
import sys
assert "mcp.client" not in sys.modules
from mcp import ClientSession
from mcp.client.session import ClientSession as Direct
assert ClientSession is Direct
import mcp, mcp.server
from mcp.server.lowlevel import Server
assert mcp.server.Server is Server and mcp.types.Tool is not None and "ClientSession" in mcp.__all__
assert "__getattr__" not in vars(mcp) and "__getattr__" not in vars(mcp.server)
try:
    mcp.no_such_name
except AttributeError:
    pass
else:
    raise AssertionError("a missing name must raise AttributeError")
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_deferred_wire_types_are_the_real_ones() -> None:
    """`mcp_types` is deferred like `mcp` (mcpsdk.py): the names the transports take without its
    `__init__` are the SDK's own objects and values, the stand-in of a model class builds the real
    model when called and is swapped for the class once the `__init__` ran, and every other name
    runs the `__init__`."""
    code = """
import sys
import mcpfleet.proxy.http_app
from mcpfleet import mcpsdk
import mcp.shared.inbound as inbound
import mcp_types
assert "mcp_types._types" not in sys.modules
rejection = inbound.unsupported_protocol_version_rejection("1999-01-01")
assert rejection is not None and rejection.data == {"supported": ["2026-07-28"], "requested": "1999-01-01"}
assert "mcp_types._types" in sys.modules
from mcp_types._types import UnsupportedProtocolVersionErrorData
assert inbound.UnsupportedProtocolVersionErrorData is UnsupportedProtocolVersionErrorData
for name, value in mcpsdk.TYPES_CONSTANTS.items():
    assert getattr(mcp_types._types, name) == value, name
import mcp_types.jsonrpc as jsonrpc
import mcp.server.streamable_http as transport
assert transport.JSONRPCRequest is jsonrpc.JSONRPCRequest is mcp_types.JSONRPCRequest
assert "__getattr__" not in vars(mcp_types) and "Tool" in mcp_types.__all__ and mcp_types.Tool is not None
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    # Any other name runs the __init__ at once (a plain `from mcp_types import X` just works).
    code = """
import sys
import mcpfleet
from mcp_types import Tool, JSONRPCRequest
import mcp_types
assert "__getattr__" not in vars(mcp_types) and Tool is mcp_types._types.Tool
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_validators_load_in_the_background() -> None:
    """`preload_validators` (called by the gateway after its first answer) loads the
    per-method wire types without blocking its caller, and `check_params` works during and after it."""
    code = """
import sys, time
from mcpfleet import jsonrpc
assert "mcp_types.methods" not in sys.modules
jsonrpc.preload_validators()
try:
    jsonrpc.check_params("request", "tools/call", {"name": 3}, "2025-06-18", 1)
except jsonrpc.MessageError as exc:
    assert "name" in str(exc), exc
else:
    raise AssertionError("a bad tools/call name must be refused")
deadline = time.monotonic() + 60
while "mcp_types.methods" not in sys.modules and time.monotonic() < deadline:
    time.sleep(0.01)
assert "mcp_types.methods" in sys.modules
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_uvicorn_serves_without_its_command_line() -> None:
    """uvicorn's package `__init__` (its command line, click) is deferred like the SDK's: a server
    built from `uvicorn.config` and `uvicorn.server` (`mcpfleet.uvicornserver`) never loads it, and
    the package's names are the real ones on first use."""
    code = """
import sys
import mcpfleet.uvicornserver as us
server = us.server(lambda scope, receive, send: None, lifespan="on", loop="uvloop", http="httptools", ws="none")
server.config.load()
assert "click" not in sys.modules and "uvicorn.main" not in sys.modules, "uvicorn's command line loaded"
import uvicorn
import uvicorn.config
from uvicorn.lifespan.on import LifespanOn
assert "click" not in sys.modules
assert uvicorn.run is not None and "click" in sys.modules
assert uvicorn.Config is uvicorn.config.Config and uvicorn.Server is uvicorn.server.Server
assert "__getattr__" not in vars(uvicorn) and uvicorn.__version__
assert us.STARTUP_FAILURE == uvicorn.config.STARTUP_FAILURE
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_registry_with_a_json_config_loads_no_yaml(tmp_path: Path) -> None:
    """`mcpfleet registry serve` on a JSON config (no auth) builds its service without PyYAML:
    JSON is parsed with the standard library (`configfile.parse_json_or_yaml`), YAML only for YAML."""
    config = tmp_path / "c.json"
    config.write_text(
        json.dumps({"registryName": "r", "sources": [{"name": "f", "file": {"path": "s.json"}}]})
    )
    code = f"""
from pathlib import Path
import mcpfleet.registry.app
from mcpfleet.registry.config import load_config
assert load_config(Path({str(config)!r})).registryName == "r"
"""
    loaded = _loaded_after(code)
    assert "yaml" not in loaded
    assert not any(m.startswith(("sqlalchemy", "asyncpg", "aiosqlite")) for m in loaded)


def test_registry_counts_without_the_prometheus_exposition() -> None:
    """The registry's metrics come from prometheus_client's submodules: its package `__init__` and
    the exposition format load with the first `/metrics`, which renders them as before."""
    code = """
import sys
from mcpfleet.registry.metrics import RegistryMetrics
metrics = RegistryMetrics()
metrics.requests.labels("list", "200").inc()
assert "prometheus_client.exposition" not in sys.modules
assert b'mcpfleet_registry_http_requests_total{code="200",route="list"} 1.0' in metrics.render()
"""
    loaded = _loaded_after(code)
    assert "prometheus_client" not in loaded and "prometheus_client.metrics" in loaded
