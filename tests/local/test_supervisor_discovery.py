"""The supervisor's start-up crash handling and the local discovery sources, in-process."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from mcpfleet.backoff import Backoff
from mcpfleet.platform.local.discovery import LocalBackendSource, LocalWorkloads
from mcpfleet.platform.local.state import State
from mcpfleet.platform.local.supervisor import ProcessSpec, ProcessState, Supervisor


async def _noop(*_args: object) -> None:
    return None


async def test_crash_at_start_fails_with_stderr_tail_and_keeps_retrying(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "logs", lambda: None, _noop, _noop, Backoff(initial=0.05, maximum=0.1))
    code = "import sys; print('starting', file=sys.stderr); print('boom: bad flag', file=sys.stderr); sys.exit(3)"
    spec = ProcessSpec(
        key="MCPServer/default/x/proxy/0",
        kind="MCPServer",
        name="x",
        log_name="x",
        argv=(sys.executable, "-c", code),
        env={"PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        port=None,
        health_url="tcp://127.0.0.1:9",
        fingerprint="1",
    )
    try:
        await supervisor.ensure(spec)
        deadline = time.monotonic() + 20
        state: ProcessState | None = None
        while time.monotonic() < deadline:
            state = supervisor.state(spec.key)
            if state is not None and state.failed and state.restarts >= 2:
                break
            await asyncio.sleep(0.05)
        assert state is not None and state.failed, state
        assert state.failure_message is not None
        assert "exited with code 3 during start-up" in state.failure_message
        assert "boom: bad flag" in state.failure_message
        assert state.restarts >= 2  # still retried, with backoff
        assert "boom: bad flag" in (tmp_path / "logs" / "x.log").read_text()
    finally:
        await supervisor.stop_all()


async def test_local_sources_follow_the_state(tmp_path: Path) -> None:
    state = await State.open(tmp_path)
    try:

        async def server(name: str, group: str | None, url: str | None, label: str | None = "cat") -> None:
            manifest = {
                "kind": "MCPServer",
                "metadata": {"name": name, "labels": {"mcpfleet.dev/registry": label} if label else {}},
                "spec": {"image": "uvx://x", "groupRef": group} if group else {"image": "uvx://x"},
            }
            await state.upsert_object("MCPServer", "default", name, manifest, "f#1")
            await state.set_status(
                "MCPServer", "default", name, {"phase": "Running", "url": url} if url else {}
            )

        await server("a", "g", "http://127.0.0.1:1/mcp")
        await server("b", "g", None)  # not running yet: not a backend, not listed
        await server("c", "other", "http://127.0.0.1:3/mcp", label=None)

        # No periodic re-read within the test: a write is noticed from the file's size and time alone.
        source = LocalBackendSource(tmp_path, "g", "default", interval=3600.0)
        stream = source.watch()
        first = await anext(stream)
        assert [(b.name, b.url) for b in first] == [("a", "http://127.0.0.1:1/mcp")]
        await server("b", "g", "http://127.0.0.1:2/mcp")
        second = await asyncio.wait_for(anext(stream), 5)
        assert [b.name for b in second] == ["a", "b"]
        await state.delete_object("MCPServer", "default", "a")
        third = await asyncio.wait_for(anext(stream), 5)
        assert [b.name for b in third] == ["b"]
        await stream.aclose()  # type: ignore[attr-defined]

        workloads = LocalWorkloads(tmp_path, "cat", ["default"])
        listed = await workloads.workloads()
        assert [(w.name, w.url, w.kind) for w in listed] == [("b", "http://127.0.0.1:2/mcp", "MCPServer")]
        before = await workloads.fingerprint()
        await server("a", None, "http://127.0.0.1:1/mcp")
        assert await workloads.fingerprint() != before
        await workloads.close()
    finally:
        await state.close()
