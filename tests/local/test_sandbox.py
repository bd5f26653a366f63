"""The local sandbox proven from inside: a Python process run through `sandbox_argv` (the wrapper the
runner puts around every server process) tries what a hostile server would, and reports."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.api.permissions import BUILTIN, PermissionProfile
from mcpfleet.platform.local.sandbox import SandboxError, sandbox_argv

PROBE = r"""
import json, os, socket, sys
args = json.loads(sys.argv[1])
out = {"home": os.environ["HOME"], "cwd": os.getcwd()}
def attempt(name, action):
    try:
        action()
        out[name] = "ok"
    except OSError as exc:
        out[name] = type(exc).__name__
attempt("read_canary", lambda: open(args["canary"]).read())
attempt("read_granted", lambda: open(args["granted"]).read())
attempt("write_granted", lambda: open(args["granted"], "a").write("x"))
attempt("write_writable", lambda: open(os.path.join(args["writable"], "made"), "w").write("x"))
attempt("write_outside", lambda: open(args["outside"], "w").write("x"))
attempt("write_tmp", lambda: open(args["tmp"], "w").write("x"))
attempt("write_usr", lambda: open("/usr/mcpfleet-sandbox-probe", "w").write("x"))
attempt("write_root", lambda: open("/mcpfleet-sandbox-probe", "w").write("x"))
attempt("write_home", lambda: open(os.path.join(os.environ["HOME"], "note"), "w").write("x"))
attempt("connect", lambda: socket.create_connection(("127.0.0.1", args["port"]), timeout=3).close())
print(json.dumps(out))
"""


@pytest.fixture
def listener() -> Iterator[int]:
    """A loopback TCP port on the host that accepts connections."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


@pytest.fixture
def canary() -> Iterator[Path]:
    """A file in the user's real home folder, removed afterwards."""
    path = Path.home() / f".mcpfleet-sandbox-canary-{uuid.uuid4().hex}"
    path.write_text("secret")
    yield path
    path.unlink()


def _probe(
    tmp_path: Path, profile: PermissionProfile, canary: Path, port: int, env: dict[str, str] | None = None
) -> dict[str, Any]:
    args = {
        "canary": str(canary),
        "granted": str(tmp_path / "granted.txt"),
        "writable": str(tmp_path / "writable"),
        "outside": str(canary.with_name(canary.name + "-written")),
        "tmp": str(tmp_path / "outside.txt"),
        "port": port,
    }
    argv = sandbox_argv(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        env or dict(os.environ),
        profile,
        tmp_path / "work",
        tmp_path / "cache",
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _profile(tmp_path: Path, base: str) -> PermissionProfile:
    (tmp_path / "granted.txt").write_text("shared")
    (tmp_path / "writable").mkdir()
    return BUILTIN[base].model_copy(
        update={"read": (str(tmp_path / "granted.txt"),), "write": (str(tmp_path / "writable"),)}
    )


def test_none_profile_from_inside(tmp_path: Path, canary: Path, listener: int) -> None:
    seen = _probe(tmp_path, _profile(tmp_path, "none"), canary, listener)
    assert seen["home"] == seen["cwd"] == str((tmp_path / "work").resolve())
    assert seen["read_canary"] == "FileNotFoundError"  # the user's home is not there at all
    assert seen["read_granted"] == "ok"
    assert seen["write_granted"] == "OSError"  # read-only: EROFS
    assert seen["write_writable"] == "ok" and (tmp_path / "writable" / "made").read_text() == "x"
    # Outside its folders a write fails (the home is not there; the sandbox's root is read-only)...
    assert seen["write_outside"] in ("FileNotFoundError", "OSError")
    assert not canary.with_name(canary.name + "-written").exists()
    # ...and /tmp is its own: what it writes there never reaches the host's /tmp.
    assert seen["write_tmp"] == "ok" and not (tmp_path / "outside.txt").exists()
    assert seen["write_usr"] == "OSError" and seen["write_root"] == "OSError"
    assert seen["write_home"] == "ok" and (tmp_path / "work" / "note").exists()
    assert seen["connect"] != "ok"  # no network: the host's loopback port is unreachable


def test_network_profile_reaches_the_host_and_still_hides_the_home(
    tmp_path: Path, canary: Path, listener: int
) -> None:
    seen = _probe(tmp_path, _profile(tmp_path, "network"), canary, listener)
    assert seen["connect"] == "ok"
    assert seen["read_canary"] == "FileNotFoundError"
    assert seen["write_outside"] in ("FileNotFoundError", "OSError")


def test_missing_bubblewrap_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"bubblewrap \(bwrap\) is not installed"):
        sandbox_argv(["true"], {"PATH": str(tmp_path)}, BUILTIN["none"], tmp_path / "w", tmp_path / "c")


def test_profile_paths_checked_against_the_host(tmp_path: Path) -> None:
    missing = BUILTIN["none"].model_copy(update={"read": (str(tmp_path / "nope"),)})
    with pytest.raises(SandboxError, match=r"read\[0\] .*nope: does not exist"):
        sandbox_argv(["true"], dict(os.environ), missing, tmp_path / "w", tmp_path / "c")
    restricted = PermissionProfile.model_validate({"network": {"outbound": {"allow_port": [443]}}})
    with pytest.raises(SandboxError, match="cannot filter outbound"):
        sandbox_argv(["true"], dict(os.environ), restricted, tmp_path / "w", tmp_path / "c")
