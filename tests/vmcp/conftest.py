"""Fixtures for the vMCP gateway tests: in-process backends and gateways on free loopback ports."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from mcpfleet.vmcp.config import VMCPConfig, parse_config
from mcpfleet.vmcp.server import ServeOptions, build_app
from tests.vmcp.servers import Served, free_port, sdk_backend

GatewayFactory = Callable[..., Awaitable[Served]]


@pytest.fixture
async def served() -> AsyncIterator[Callable[[Any], Awaitable[Served]]]:
    """Start ASGI apps in-process; all are stopped at the end of the test."""
    running: list[Served] = []

    async def start(app: Any, port: int | None = None) -> Served:
        s = await Served(app, port).start()
        running.append(s)
        return s

    yield start
    for s in reversed(running):
        await s.stop()


@pytest.fixture
async def gateway(served: Callable[[Any], Awaitable[Served]]) -> AsyncIterator[GatewayFactory]:
    """`await gateway(config_dict)` -> the running vMCP (its `.app` is the VMCPApp)."""

    apps: list[Any] = []

    async def start(raw: dict[str, Any], **opts: Any) -> Served:
        cfg: VMCPConfig = parse_config(raw)
        port = free_port()
        app = build_app(cfg, ServeOptions(host="127.0.0.1", port=port, **opts))
        apps.append(app)
        return await served(app, port)

    yield start
    # Servers are force-stopped (open notification streams), which skips the lifespan shutdown: close
    # the apps explicitly (gateway and the OIDC authenticator's HTTP session).
    for app in apps:
        await app.aclose()


@pytest.fixture
async def alpha_beta(served: Callable[[Any], Awaitable[Served]]) -> tuple[Served, Served]:
    a = await served(sdk_backend("alpha").streamable_http_app())
    b = await served(sdk_backend("beta").streamable_http_app())
    return a, b
