"""A code-mode script worker gets none of the gateway's environment (hosted in `mcpfleet up`, that is
the user's shell: tokens and all), only what an interpreter needs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mcpfleet.api.gatewayconfig import CodeMode
from mcpfleet.vmcp.codemode import WORKER_ENV, CodeRunner


async def test_script_worker_environment_is_minimal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "canary-9f2e")
    runner = CodeRunner(CodeMode())
    process = await runner._spawn()
    try:
        raw = await asyncio.to_thread(Path(f"/proc/{process.pid}/environ").read_bytes)
        names = {item.split(b"=", 1)[0].decode() for item in raw.split(b"\0") if item}
        assert b"canary-9f2e" not in raw
        assert names <= set(WORKER_ENV)
    finally:
        process.kill()
        await process.wait()
