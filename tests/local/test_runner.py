"""The reconcile loop in-process: an edited manifest rolls its process, a removed one stops it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mcpfleet.platform.local import runner as runner_module
from mcpfleet.platform.local import watching
from mcpfleet.platform.local.runner import Runner
from mcpfleet.platform.local.state import State
from tests.local.conftest import gateway_fleet, manifest, pid_alive, reconcile_until
from tests.vmcp.servers import Served, sdk_backend
from tests.waiting import wait_until


def _environ(pid: int | None) -> list[bytes]:
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


@pytest.mark.timeout(120)
async def test_edit_rolls_and_remove_stops(tmp_path: Path) -> None:
    manifests = tmp_path / "m"
    manifests.mkdir()
    path = manifests / "remote.yaml"
    path.write_text(manifest("MCPRemoteProxy", "up", {"remoteURL": "http://127.0.0.1:9/mcp"}))
    state = await State.open(tmp_path / "state")
    runner = Runner(manifests, state, port_range=(43000, 43999))
    key = "MCPRemoteProxy/default/up/proxy/0"
    try:

        async def running(generation: int) -> bool:
            obj = await state.get_object("MCPRemoteProxy", "default", "up")
            return (
                obj is not None
                and obj.status.get("phase") == "Running"
                and (obj.status.get("observedGeneration") == generation)
            )

        await reconcile_until(runner, "generation 1 Running", lambda: running(1), within=45, interval=0.2)
        first = runner.supervisor.state(key)
        assert first is not None and first.pid is not None
        first_pid = first.pid
        first_url = (await state.get_object("MCPRemoteProxy", "default", "up")).status["url"]  # type: ignore[union-attr]

        # An edited spec: generation 2, the process restarts with the new command, the URL stays.
        path.write_text(manifest("MCPRemoteProxy", "up", {"remoteURL": "http://127.0.0.1:10/mcp"}))
        runner.manifests_changed()
        await reconcile_until(runner, "generation 2 Running", lambda: running(2), within=45, interval=0.2)
        second = runner.supervisor.state(key)
        assert second is not None and second.pid not in (None, first_pid)
        assert not pid_alive(first_pid)
        obj = await state.get_object("MCPRemoteProxy", "default", "up")
        assert obj is not None and obj.generation == 2 and obj.status["url"] == first_url
        # The new URL reached the new process (by its environment: never its argv, issue 27 item 13).
        assert b"MCPFLEET_REMOTE_URL=http://127.0.0.1:10/mcp" in _environ(second.pid)

        # A removed manifest: the process stops and the object leaves the state.
        second_pid = second.pid
        assert second_pid is not None
        path.unlink()
        runner.manifests_changed()

        async def gone() -> bool:
            return await state.get_object("MCPRemoteProxy", "default", "up") is None and not pid_alive(
                second_pid
            )

        await reconcile_until(
            runner, "the process stopped and the object gone", gone, within=45, interval=0.2
        )
        assert runner.supervisor.keys() == set()
    finally:
        await runner.shutdown()
        await state.close()


@pytest.mark.timeout(120)
async def test_a_pass_gives_the_gateway_the_url_its_backend_got_in_that_pass(tmp_path: Path) -> None:
    """The gateway's status is computed after its members' in the same pass: once a pass made a
    member Running with a URL, the gateway's status written by that pass lists the URL too (not
    "not running" until the next pass, a second later in `up`)."""
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "fleet.yaml").write_text(gateway_fleet("http://127.0.0.1:9/mcp", {}))
    state = await State.open(tmp_path / "state")
    runner = Runner(manifests, state, port_range=(43000, 43999))
    try:

        async def member_running() -> str | None:
            member = await state.get_object("MCPRemoteProxy", "default", "alpha")
            gateway = await state.get_object("VirtualMCPServer", "default", "gw")
            assert member is not None and gateway is not None
            url = member.status.get("url")
            listed = {b["name"]: b for b in gateway.status.get("discoveredBackends") or []}
            if url is not None:
                # Checked after every pass: never a pass that made it Running but left the gateway behind.
                assert listed["alpha"].get("url") == url, gateway.status
            # Until the gateway serves too (stopping it during its start-up is another test's matter).
            # Its backend answers nothing, so it is never Ready: serving shows as its status URL.
            return str(url) if url is not None and gateway.status.get("url") else None

        await reconcile_until(
            runner, "the member Running, the gateway serving", member_running, within=90, interval=0.1
        )
    finally:
        await runner.shutdown()
        await state.close()


@pytest.mark.timeout(120)
async def test_gateway_ready_once_its_report_lists_every_backend_without_waiting_for_a_resync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway is Pending while serving until its report says it connected to its backend,
    then Ready; the reconcile loop takes that report as soon as the gateway rewrote it (the
    periodic passes are switched off here: only the report watch can bring that pass). The
    gateway's timeline (its log) shows when each backend was reported."""
    # No periodic pass (nor periodic manifest re-read): only an event can bring a pass.
    monkeypatch.setattr(runner_module, "RESYNC_SECONDS", 3600.0)
    monkeypatch.setattr(watching, "RELOAD_SECONDS", 3600.0)
    backend = await Served(sdk_backend("alpha").streamable_http_app()).start()
    manifests = tmp_path / "m"
    manifests.mkdir()
    (manifests / "fleet.yaml").write_text(gateway_fleet(backend.url, {}))
    state = await State.open(tmp_path / "state")
    runner = Runner(manifests, state, port_range=(43000, 43999))
    stop = asyncio.Event()
    loop = asyncio.create_task(runner.run(stop))
    try:

        async def ready() -> dict[str, object] | None:
            gateway = await state.get_object("VirtualMCPServer", "default", "gw")
            if gateway is None:
                return None  # before the first pass
            status = gateway.status
            backends = {b["name"]: b["status"] for b in status.get("discoveredBackends") or []}
            if status.get("phase") == "Ready":
                assert backends == {"alpha": "healthy"}, status  # never Ready on an unreported backend
                return status
            return None

        status = await wait_until(ready, "the gateway Ready", within=60, interval=0.05)
        assert status["toolCount"]
        log = (tmp_path / "state" / "logs" / "virtualmcpserver-gw.log").read_text()
        timeline = [line.split(": ", 1)[1] for line in log.splitlines() if "s since up: " in line]
        assert "backend alpha healthy" in timeline, timeline
        assert timeline.index("backend alpha healthy") <= timeline.index("status Ready"), timeline
    finally:
        stop.set()
        await loop
        await runner.shutdown()
        await state.close()
        await backend.stop()
