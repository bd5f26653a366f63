"""No orphan, ever: however `mcpfleet up` ends, no process it started outlives it; `down` and a new
`up` find (by the fleet's tag in /proc) and end what an older run left; a server gets only its
declared environment, never `up`'s."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.platform.local.launch import base_env, fleet_id, server_env
from mcpfleet.platform.local.reaper import FLEET_ENV, RUN_ENV, end_tagged, tagged
from tests.local.conftest import MCPFLEET, TEST_PORT_RANGE, VENV_BIN, Up, manifest, pid_alive, stop_process

CANARY = "canary-from-ups-shell"


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _tagged_leftover(state_dir: Path, run: str = "an-older-run") -> subprocess.Popen[bytes]:
    """A process tree as a killed `up` leaves it: tagged, in a session of its own, a grandchild."""
    env = {"PATH": os.environ["PATH"], FLEET_ENV: fleet_id(state_dir), RUN_ENV: run}
    return subprocess.Popen(
        ["sh", "-c", "sleep 300 & wait"], env=env, start_new_session=True, stdin=subprocess.DEVNULL
    )


def _start_up(tmp_path: Path, files: dict[str, str], extra_env: dict[str, str]) -> Up:
    manifests = tmp_path / "manifests"
    manifests.mkdir(exist_ok=True)
    for name, content in files.items():
        (manifests / name).write_text(content)
    state_dir = tmp_path / "state"
    output = tmp_path / "up.log"
    env = {**os.environ, "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]), **extra_env}
    argv = [MCPFLEET, "up", str(manifests), "--state-dir", str(state_dir), "--port-range", TEST_PORT_RANGE]
    with output.open("w") as out:
        process = subprocess.Popen(
            [*argv, "--no-progress"], stdout=out, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path
        )
    return Up(process, manifests, state_dir, output)


def _server(name: str, image: str, args: list[str]) -> str:
    spec: dict[str, Any] = {
        "image": image,
        "transport": "stdio",
        "args": args,
        "env": [{"name": "DECLARED_VAR", "value": "from-the-manifest"}],
    }
    return manifest("MCPServer", name, spec)


LAUNCHER_LEAVING_A_CHILD = """#!/bin/sh
# Stands for `npm exec`: starts a helper of its own (which does not read the server's stdin, so
# it does not end when the pipe closes), then becomes the server.
sleep 300 &
exec mcp-server-time --local-timezone=UTC
"""


async def _running_fleet(tmp_path: Path) -> tuple[Up, list[int]]:
    """`up` with two stdio servers, Running; the pids carrying the fleet's tag. `clock` runs from
    PyPI through uvx; `stubborn` through an `npx` (first on up's PATH) that leaves a grandchild,
    which only the fleet's tag can find once `up` and the launcher are gone."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "npx").write_text(LAUNCHER_LEAVING_A_CHILD)
    (tools / "npx").chmod(0o755)
    files = {
        "clock.yaml": _server("clock", "uvx://mcp-server-time", ["--local-timezone=UTC"]),
        "stubborn.yaml": _server("stubborn", "npx://stubborn-server", []),
    }
    path = os.pathsep.join([str(VENV_BIN), str(tools), os.environ.get("PATH", "")])
    up = _start_up(tmp_path, files, {"GITHUB_TOKEN": CANARY, "PATH": path})
    try:
        for name in ("clock", "stubborn"):
            await up.wait_phase("MCPServer", name, {"Running"}, limit=120)
    except BaseException:
        stop_process(up.process)
        raise
    pids = tagged(fleet_id(up.state_dir))
    assert pids, "no process carries the fleet's tag"
    return up, pids


def _gone_within(state_dir: Path, seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = tagged(fleet_id(state_dir))
        if not left:
            return []
        time.sleep(0.1)
    return tagged(fleet_id(state_dir))


# -- the environment ---------------------------------------------------------------------------


def test_base_env_is_minimal_and_keeps_the_package_caches(tmp_path: Path) -> None:
    shell = {
        "PATH": "/usr/bin",
        "HOME": "/nonexistent/user",
        "LANG": "C.UTF-8",
        "GITHUB_TOKEN": CANARY,
        "AWS_SECRET_ACCESS_KEY": CANARY,
        "SSH_AUTH_SOCK": "/tmp/agent",
        "UV_INDEX_URL": "https://mirror.example/simple",
        "UV_INDEX_MIRROR_PASSWORD": CANARY,
        "npm_config__authToken": CANARY,
        "HTTPS_PROXY": "http://127.0.0.1:3128",
        "SSL_CERT_FILE": "/etc/ssl/certs/ca.pem",
        "MCPFLEET_SECRET_GH_TOKEN": CANARY,
    }
    env = base_env(shell, fleet="f1", run="r1", state_dir=tmp_path)
    assert CANARY not in env.values()
    assert "SSH_AUTH_SOCK" not in env and "HOME" not in env
    assert env["PATH"].endswith("/usr/bin") and env["LANG"] == "C.UTF-8"
    assert env["UV_INDEX_URL"] == shell["UV_INDEX_URL"] and env["HTTPS_PROXY"] == shell["HTTPS_PROXY"]
    assert env["SSL_CERT_FILE"] == shell["SSL_CERT_FILE"]
    # The user's real caches, named explicitly (HOME will be private).
    assert env["UV_CACHE_DIR"] == "/nonexistent/user/.cache/uv"
    assert env["UV_PYTHON_INSTALL_DIR"] == "/nonexistent/user/.local/share/uv/python"
    assert env["npm_config_cache"] == "/nonexistent/user/.npm"
    assert (env[FLEET_ENV], env[RUN_ENV]) == ("f1", "r1")


def test_a_manifest_cannot_remove_or_forge_the_fleet_tag(tmp_path: Path) -> None:
    base = base_env({"PATH": "/bin"}, fleet="f1", run="r1", state_dir=tmp_path)
    env = server_env(base, tmp_path / "home", {FLEET_ENV: "other", RUN_ENV: "", "HOME": "/root", "A": "b"})
    assert (env[FLEET_ENV], env[RUN_ENV], env["A"]) == ("f1", "r1", "b")
    assert env["HOME"] == "/root"  # a declared HOME is the manifest's choice


_NAMES = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=24
)
_VALUES = st.text(max_size=40).filter(lambda v: "\0" not in v)


@settings(max_examples=150, deadline=None)
@given(
    shell=st.dictionaries(_NAMES, _VALUES, max_size=20), declared=st.dictionaries(_NAMES, _VALUES, max_size=8)
)
def test_property_a_server_sees_only_declared_and_base_variables(
    shell: dict[str, str], declared: dict[str, str]
) -> None:
    """Whatever `up`'s shell and the manifest hold: a variable of the shell reaches the server only
    through the documented base (locale, network, package-tool settings without credentials), a
    credential-looking one never, and the fleet's tag is always the platform's."""
    state_dir = Path("/nonexistent-state")
    base = base_env(shell, fleet="f", run="r", state_dir=state_dir)
    env = server_env(base, state_dir / "home", declared)
    for name, value in env.items():
        if name in declared and name not in (FLEET_ENV, RUN_ENV):
            assert value == declared[name]
        elif name in shell and name not in base:
            raise AssertionError(f"{name} leaked from the shell")
    for name in shell:
        if (
            name in env
            and name not in declared
            and name in base
            and name.upper().startswith(("UV_", "PIP_", "NPM_"))
        ):
            assert not re.search(r"TOKEN|PASSWORD|SECRET|AUTH", name, re.IGNORECASE), name
    assert (env[FLEET_ENV], env[RUN_ENV]) == ("f", "r")
    assert env["PATH"].startswith(str(VENV_BIN))


# -- finding and ending by tag -----------------------------------------------------------------


def test_end_tagged_ends_the_whole_tree_and_nothing_else(tmp_path: Path) -> None:
    leftover = _tagged_leftover(tmp_path)
    other = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(tagged(fleet_id(tmp_path))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        found = tagged(fleet_id(tmp_path))
        assert leftover.pid in found and len(found) == 2  # the shell and its `sleep`
        ended, alive = end_tagged(fleet_id(tmp_path))
        assert ended == set(found) and alive == []
        leftover.wait(5)
        assert other.poll() is None  # untagged: untouched
    finally:
        for process in (leftover, other):
            process.kill()
            process.wait()


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], FLEET_ENV: fleet_id(tmp_path), RUN_ENV: "r"}
    stubborn = subprocess.Popen(
        ["sh", "-c", "trap '' TERM; sleep 300 & wait"], env=env, start_new_session=True
    )
    try:
        time.sleep(0.3)
        started = time.monotonic()
        ended, alive = end_tagged(fleet_id(tmp_path), grace=0.5)
        assert alive == [] and stubborn.pid in ended
        assert time.monotonic() - started < 5
    finally:
        stubborn.kill()
        stubborn.wait()


def test_the_watchdog_ends_its_run_when_its_parent_dies(tmp_path: Path) -> None:
    """A parent that dies by SIGKILL: its watchdog ends the run's processes, not another run's."""
    fleet = fleet_id(tmp_path)
    script = (
        "import subprocess, sys, time\n"
        "from mcpfleet.platform.local.reaper import start_watchdog\n"
        f"w = start_watchdog({fleet!r}, 'run-a')\n"
        "print(w.pid, flush=True)\n"
        "time.sleep(300)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    ours = _tagged_leftover(tmp_path, "run-a")
    theirs = _tagged_leftover(tmp_path, "run-b")
    try:
        assert parent.stdout is not None
        watchdog = int(parent.stdout.readline())
        assert pid_alive(watchdog)
        parent.kill()
        parent.wait()
        ours.wait(10)
        assert theirs.poll() is None
        assert tagged(fleet, "run-a") == []
    finally:
        for process in (parent, ours, theirs):
            process.kill()
            process.wait()


def _check_declared_env_only(pids: list[int], state_dir: Path) -> None:
    """The server sees its declared environment, not `up`'s shell (GITHUB_TOKEN stays out)."""
    for pid in pids:
        env = _environ(pid)
        assert env.get("GITHUB_TOKEN") is None, _cmdline(pid)
        assert env["DECLARED_VAR"] == "from-the-manifest"
        home = Path(env["HOME"])
        assert home.is_relative_to(state_dir.resolve()) and home.is_dir()
    commands = [_cmdline(pid) for pid in pids]
    assert any("uvx -- mcp-server-time" in c for c in commands), commands
    assert any(c.startswith("sleep 300") for c in commands), commands


# -- a real `up` -------------------------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP, signal.SIGTERM])
async def test_no_server_outlives_up(tmp_path: Path, sig: signal.Signals) -> None:
    up, pids = await _running_fleet(tmp_path)
    try:
        _check_declared_env_only(pids, up.state_dir)
        up.process.send_signal(sig)
        left = _gone_within(up.state_dir, 5.0)
        assert left == [], f"still running 5 s after {sig.name}: {[_cmdline(p) for p in left]}"
        up.process.wait(30)
    finally:
        stop_process(up.process)
    if sig != signal.SIGKILL:
        assert "stopped every process started by `mcpfleet up`" in up.output.read_text()


@pytest.mark.timeout(240)
async def test_down_after_a_crash_and_a_new_up_end_the_leftovers(tmp_path: Path) -> None:
    up, _pids = await _running_fleet(tmp_path)
    try:
        watchdogs = [p for p in _children(up.process.pid) if "reaper.py" in _cmdline(p)]
        assert len(watchdogs) == 1
        # The worst crash: `up` and its watchdog gone together. Its direct children die with it
        # (parent-death signal); what they started is orphaned, tag and all.
        os.kill(watchdogs[0], signal.SIGKILL)
        up.process.kill()
        up.process.wait(10)
    finally:
        stop_process(up.process)
    leftover = _tagged_leftover(up.state_dir)  # one more, certain to be left whatever the timing
    try:
        assert tagged(fleet_id(up.state_dir))
        down = up.cli("down")
        assert "checked in /proc" in down.stdout and "left behind" in down.stdout, down.stdout
        assert tagged(fleet_id(up.state_dir)) == []
        leftover.wait(10)
        # A new `up` on the same state dir ends what an older run left before it starts anything.
        older = _tagged_leftover(up.state_dir)
        again = _start_up(tmp_path, {}, {})
        try:
            await again.wait_for("the leftover ended", lambda: older.poll() is not None, limit=60)
            await again.wait_for("the notice", lambda: "left behind" in again.output.read_text(), limit=30)
        finally:
            stop_process(again.process)
        assert again.process.returncode == 0
        assert re.search(r"ended [12] process\(es\) left behind", again.output.read_text())
    finally:
        leftover.kill()
        leftover.wait()
