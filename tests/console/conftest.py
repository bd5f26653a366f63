"""Fixtures of the console tests: a fleet state folder written with the local platform's own `State`,
and the console app over it (in-process ASGI, reached with httpx)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpfleet.console.app import create_app
from mcpfleet.console.security import CsrfToken
from mcpfleet.platform.local.state import State

BASE = "http://127.0.0.1:8765"
TOKEN = "test-token-0123456789"


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}


async def write_state(
    state_dir: Path, objects: list[tuple[dict[str, Any], dict[str, Any]]], meta: dict[str, Any] | None = None
) -> None:
    """Store (manifest, status) pairs as `up` stores them; `meta` adds meta rows (load errors, manifests)."""
    state = await State.open(state_dir)
    try:
        for document, status in objects:
            kind, name = document["kind"], document["metadata"]["name"]
            await state.upsert_object(kind, "default", name, document, f"/fleet/{name}.yaml")
            await state.set_status(kind, "default", name, status)
        for key, value in (meta or {}).items():
            await state.set_meta(key, value if isinstance(value, str) else json.dumps(value))
    finally:
        await state.close()


def running(url: str) -> dict[str, Any]:
    return {
        "phase": "Running",
        "url": url,
        "message": "1/1 replicas ready",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }


def failed(message: str) -> dict[str, Any]:
    return {
        "phase": "Failed",
        "message": message,
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "Crashed",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }


Client = Callable[[Path], Awaitable[httpx.AsyncClient]]


@pytest.fixture
async def console_client() -> AsyncIterator[Callable[[Path], httpx.AsyncClient]]:
    """httpx clients on the console app of a state folder (Host 127.0.0.1:8765, a known CSRF token)."""
    clients: list[httpx.AsyncClient] = []

    def make(state_dir: Path) -> httpx.AsyncClient:
        app = create_app(state_dir, csrf=CsrfToken(TOKEN))
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE, timeout=60)
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


def post_headers(htmx: bool = True) -> dict[str, str]:
    headers = {"Origin": BASE, "Content-Type": "application/x-www-form-urlencoded"}
    if htmx:
        headers["HX-Request"] = "true"
    return headers
