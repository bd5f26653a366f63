"""An image MCPServer under `mcpfleet up` with podman (issue 29), from the project's own image built
offline (`make image`, loaded into podman here): a tool call through the proxy, the permission
profile proven from inside the running container, and no container outliving `up` (kill -9) or
escaping `down`.

Needs root (the image build: debootstrap + chroot, cached by content under ~/.cache/mcpfleet/image)
and podman; without either every test fails with the reason.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.platform.local.launch import fleet_id
from mcpfleet.platform.local.reaper import FLEET_LABEL, RUN_LABEL, tagged
from tests.local.conftest import MCPFLEET, Up, manifest
from tests.waiting import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
# mcp-server-time, warmed into the image's uv cache at build time (`devcluster/image.py`, WARM_UVX):
# the tool environment uvx made there, run directly (the root filesystem is read-only).
TIME_SERVER = 'exec /home/mcpfleet/.cache/uv/archive-v0/*/bin/mcp-server-time "$@"'
CANARY_ENV = "CANARY_FROM_UPS_SHELL"


def _podman() -> str:
    found = shutil.which("podman")
    if found is None:
        pytest.fail("podman is not installed (Debian: apt-get install podman)", pytrace=False)
    return found


def _run(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([_podman(), *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise AssertionError(
            f"podman {' '.join(args)} failed ({done.returncode}): {done.stderr}{done.stdout}"
        )
    return done


@pytest.fixture(scope="session")
def mcpfleet_image_in_podman() -> str:
    """`make image` (cached by content), loaded into podman's store unless it is there already."""
    from mcpfleet.devcluster.image import ImageBuildError, build_image
    from mcpfleet.devcluster.ociimage import ImageError

    _podman()
    if os.geteuid() != 0:
        pytest.fail("building the mcpfleet image needs root (debootstrap + chroot)", pytrace=False)
    try:
        ref, archive = build_image(REPO_ROOT, lambda text: print(f"[image] {text}", flush=True))
    except (ImageBuildError, ImageError) as exc:
        pytest.fail(f"the mcpfleet image could not be built:\n{exc}", pytrace=False)
    if _run("image", "exists", ref, check=False).returncode != 0:
        _run("load", "--input", str(archive), timeout=600)
    return ref


def _containers(state_dir: Path) -> list[str]:
    return _run(
        "ps", "-a", "--format", "{{.ID}}", "--filter", f"label={FLEET_LABEL}={fleet_id(state_dir)}"
    ).stdout.split()


def _image_server(image: str) -> str:
    return manifest(
        "MCPServer",
        "imgtime",
        {
            "image": image,
            "transport": "stdio",
            "args": ["--local-timezone=UTC"],
            "env": [{"name": "DECLARED", "value": "declared-value"}],
            "permissionProfile": {"type": "configmap", "name": "profiles", "key": "none.json"},
            "podTemplateSpec": {
                "spec": {"containers": [{"name": "mcp", "command": ["sh", "-c", TIME_SERVER, "srv"]}]}
            },
        },
    )


def _start(
    running_up: Any, tmp_path: Path, image: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Up, Path, Path]:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "granted.txt").write_text("granted\n")
    secret = tmp_path / "not-granted.txt"
    secret.write_text("the user's file\n")
    monkeypatch.setenv(CANARY_ENV, "canary-value")
    monkeypatch.setenv("MCPFLEET_CONTAINER_RUNTIME", "podman")
    profile = f'{{"read": ["{shared}"], "network": {{"outbound": {{}}}}}}'
    state_dir = tmp_path / "state"
    (state_dir / "configmaps" / "profiles").mkdir(parents=True)
    (state_dir / "configmaps" / "profiles" / "none.json").write_text(profile)
    up: Up = running_up({"server.yaml": _image_server(image)})
    return up, shared, secret


async def _closed(opening: Any) -> None:
    await (await opening).close()


def _exec(container: str, script: str) -> subprocess.CompletedProcess[str]:
    """A shell in the server's own container (its namespaces, mounts and limits)."""
    return _run("exec", container, "sh", "-c", script, check=False, timeout=60)


@pytest.mark.timeout(600)
async def test_image_server_runs_confined_and_leaves_nothing_after_kill_9(
    mcpfleet_image_in_podman: str, running_up: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp.client.client import Client

    up, shared, secret = _start(running_up, tmp_path, mcpfleet_image_in_podman, monkeypatch)
    status = await up.wait_phase("MCPServer", "imgtime", {"Running"}, limit=180)
    # A tool call through the proxy, answered by mcp-server-time inside the container.
    async with Client(status["url"]) as client:
        result = await client.call_tool("get_current_time", {"timezone": "UTC"})
    assert not result.is_error and '"timezone": "UTC"' in str(result.content)
    assert "Permissions" in {c["type"] for c in status["conditions"]}

    (container,) = _containers(up.state_dir)[:1]
    inspect = _run(
        "inspect",
        container,
        "--format",
        "{{.HostConfig.ReadonlyRootfs}}|{{.HostConfig.NetworkMode}}|{{.HostConfig.SecurityOpt}}|"
        '{{index .Config.Labels "' + RUN_LABEL + '"}}',
    ).stdout.strip()
    readonly, network, security, run = inspect.split("|")
    assert (readonly, network) == ("true", "none") and "no-new-privileges" in security and run

    # From inside: no network at all, no capabilities, a read-only root, only the granted host path.
    probe = _exec(
        container,
        "python3 -c 'import socket; s=socket.socket(); s.settimeout(3); s.connect((\"1.1.1.1\", 80))' 2>&1 | tail -1;"
        " grep CapEff /proc/self/status; touch /written 2>&1;"
        f" cat {shared}/granted.txt; touch {shared}/new 2>&1;"
        f" test -e {secret} && echo SECRET-VISIBLE; test -e {tmp_path / 'state'} && echo STATE-VISIBLE;"
        " tr '\\0' '\\n' < /proc/1/environ",
    )
    out = probe.stdout + probe.stderr
    assert "Network is unreachable" in out, out
    assert "CapEff:\t0000000000000000" in out, out
    assert "touch: cannot touch '/written': Read-only file system" in out, out
    assert "granted" in out and f"touch: cannot touch '{shared}/new': Read-only file system" in out, out
    assert "SECRET-VISIBLE" not in out and "STATE-VISIBLE" not in out, out
    # Only the declared environment (and the image's own): never `up`'s shell.
    assert "DECLARED=declared-value" in out and CANARY_ENV not in out, out

    # kill -9 of `up`: within 5 s no container and no process of the fleet is left.
    up.process.send_signal(signal.SIGKILL)
    up.process.wait(10)
    killed = time.monotonic()
    await wait_until(
        lambda: not _containers(up.state_dir) and not tagged(fleet_id(up.state_dir)),
        "no container or process of the fleet after kill -9 of up",
        within=5.0,
        interval=0.2,
    )
    print(f"kill -9 of up: nothing of the fleet left after {time.monotonic() - killed:.2f}s")


@pytest.mark.timeout(300)
async def test_a_clean_stop_removes_the_container(
    mcpfleet_image_in_podman: str, running_up: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    up, _shared, _secret = _start(running_up, tmp_path, mcpfleet_image_in_podman, monkeypatch)
    await up.wait_phase("MCPServer", "imgtime", {"Running"}, limit=180)
    assert _containers(up.state_dir)
    up.process.send_signal(signal.SIGTERM)
    assert up.process.wait(30) == 0
    assert _containers(up.state_dir) == [] and tagged(fleet_id(up.state_dir)) == []


HTTP_PORT = 32611
"""In the tests' port range; an http server's port is its own (mcpPort), published at the same number."""


@pytest.mark.timeout(300)
async def test_http_image_server_is_published_on_loopback(
    mcpfleet_image_in_podman: str, running_up: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An image with transport streamable-http: no proxy in front locally, its mcpPort published on
    127.0.0.1. The server here is mcpfleet's own proxy inside the image, serving mcp-server-time."""
    from mcp.client.client import Client

    monkeypatch.setenv("MCPFLEET_CONTAINER_RUNTIME", "podman")
    serve = f"exec mcpfleet proxy --host 0.0.0.0 --port {HTTP_PORT} -- sh -c '{TIME_SERVER}' srv"
    server = manifest(
        "MCPServer",
        "webtime",
        {
            "image": mcpfleet_image_in_podman,
            "transport": "streamable-http",
            "mcpPort": HTTP_PORT,
            "podTemplateSpec": {"spec": {"containers": [{"name": "mcp", "command": ["sh", "-c", serve]}]}},
        },
    )
    up: Up = running_up({"web.yaml": server})
    status = await up.wait_phase("MCPServer", "webtime", {"Running"}, limit=180)
    assert status["url"] == f"http://127.0.0.1:{HTTP_PORT}/mcp"

    async def answered() -> Any:
        async with Client(status["url"]) as client:
            return await client.call_tool("get_current_time", {"timezone": "UTC"})

    result = await wait_until(
        answered, "a tool call through the published port", within=60, tolerate=(Exception,)
    )
    assert not result.is_error
    (container,) = _containers(up.state_dir)
    ports = _run("port", container).stdout
    assert f"127.0.0.1:{HTTP_PORT}" in ports and "0.0.0.0" not in ports
    up.process.send_signal(signal.SIGTERM)
    assert up.process.wait(30) == 0
    assert _containers(up.state_dir) == []


def _leftover_container(image: str, state_dir: Path) -> None:
    """A container of this fleet from a run whose watchdog died too (labels only: its runtime holds
    it, not a tagged process)."""
    _run(
        "run",
        "-d",
        "--ulimit=nofile=1024:1024",
        "--ulimit=nproc=1024:1024",
        f"--label={FLEET_LABEL}={fleet_id(state_dir)}",
        f"--label={RUN_LABEL}=an-older-run",
        "--entrypoint=sleep",
        image,
        "300",
    )


@pytest.mark.timeout(300)
async def test_a_new_up_removes_a_container_left_by_an_older_run(
    mcpfleet_image_in_podman: str, running_up: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcpfleet.platform.local.state import State

    state_dir = tmp_path / "state"
    await _closed(State.open(state_dir))
    _leftover_container(mcpfleet_image_in_podman, state_dir)
    try:
        assert len(_containers(state_dir)) == 1
        monkeypatch.setenv("MCPFLEET_CONTAINER_RUNTIME", "podman")
        up: Up = running_up({})
        await up.wait_for(
            "up reports the leftover", lambda: "ended 1 process(es) left behind" in up.output.read_text()
        )
        assert _containers(state_dir) == []
    finally:
        for leftover in _containers(state_dir):
            _run("rm", "-f", leftover, check=False)


@pytest.mark.timeout(300)
def test_down_removes_a_container_left_by_an_older_run(mcpfleet_image_in_podman: str, tmp_path: Path) -> None:
    from mcpfleet.platform.local.state import State

    state_dir = tmp_path / "state"
    asyncio.run(_closed(State.open(state_dir)))  # the state an earlier `up` left
    _leftover_container(mcpfleet_image_in_podman, state_dir)
    try:
        assert len(_containers(state_dir)) == 1
        env = {**os.environ, "MCPFLEET_CONTAINER_RUNTIME": "podman"}
        down = subprocess.run(
            [MCPFLEET, "down", "--state-dir", str(state_dir)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert "removed 1 container(s)" in " ".join(down.stdout.split())  # the console wraps
        assert _containers(state_dir) == []
    finally:
        for leftover in _containers(state_dir):
            _run("rm", "-f", leftover, check=False)
