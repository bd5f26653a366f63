"""MCPServer `spec.volumes` locally, proven from inside the bubblewrap sandbox: a bound folder's file
is readable at its mountPath, read-only unless `readOnly: false`; a folder that is not bound (even the
bound one's sibling) is not there; a host path that does not exist fails the set-up naming the volume."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.api.hostvolume import HostVolume
from mcpfleet.api.permissions import BUILTIN
from mcpfleet.platform.local.containers import ContainerError, volume_mounts
from mcpfleet.platform.local.sandbox import SandboxError, sandbox_argv

PROBE = r"""
import json, os, sys
out = {}
def attempt(name, action):
    try:
        out[name] = action()
    except OSError as exc:
        out[name] = type(exc).__name__
attempt("read_bound", lambda: open("/data/note.txt").read())
attempt("write_bound", lambda: open("/data/new.txt", "w").write("x") and "ok")
attempt("write_writable", lambda: open("/out/made.txt", "w").write("x") and "ok")
attempt("read_unbound", lambda: open(sys.argv[1]).read())
attempt("read_unbound_in_place", lambda: open(sys.argv[2]).read())
print(json.dumps(out))
"""


def _volume(**fields: Any) -> HostVolume:
    return HostVolume.model_validate(fields)


def test_bound_folder_is_readable_inside_and_an_unbound_one_is_not(tmp_path: Path) -> None:
    bound, writable, unbound = tmp_path / "bound", tmp_path / "writable", tmp_path / "unbound"
    for folder in (bound, writable, unbound):
        folder.mkdir()
    (bound / "note.txt").write_text("from the host")
    (unbound / "secret.txt").write_text("not for the server")
    volumes = [
        _volume(name="data", hostPath=str(bound), mountPath="/data"),
        _volume(name="out", hostPath=str(writable), mountPath="/out", readOnly=False),
    ]
    argv = sandbox_argv(
        [sys.executable, "-c", PROBE, str(unbound / "secret.txt"), str(bound / "note.txt")],
        dict(os.environ),
        BUILTIN["none"],
        tmp_path / "work",
        tmp_path / "cache",
        volumes,
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["read_bound"] == "from the host"
    assert seen["write_bound"] == "OSError" and not (bound / "new.txt").exists()  # read-only: EROFS
    assert seen["write_writable"] == "ok" and (writable / "made.txt").read_text() == "x"
    # Neither the unbound folder nor the bound folder at its host path is in the sandbox.
    assert seen["read_unbound"] == "FileNotFoundError"
    assert seen["read_unbound_in_place"] == "FileNotFoundError"


def test_missing_host_path_fails_naming_the_volume(tmp_path: Path) -> None:
    volume = _volume(name="data", hostPath=str(tmp_path / "nope"), mountPath="/data")
    with pytest.raises(SandboxError, match=r"spec.volumes\[0\] \(data\): hostPath .*nope: does not exist"):
        sandbox_argv(["true"], dict(os.environ), BUILTIN["none"], tmp_path / "w", tmp_path / "c", [volume])
    with pytest.raises(ContainerError, match=r"spec.volumes\[0\] \(data\)"):
        volume_mounts([volume])


def test_container_runtime_gets_the_same_mounts(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    volumes = [
        _volume(name="a", hostPath=str(tmp_path / "a"), mountPath="/a"),
        _volume(name="b", hostPath=str(tmp_path / "b"), mountPath="/b", readOnly=False),
    ]
    assert volume_mounts(volumes) == [f"--volume={tmp_path / 'a'}:/a:ro", f"--volume={tmp_path / 'b'}:/b:rw"]
