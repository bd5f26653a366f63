"""The local sandbox proven from inside: a Python process run through `sandbox_argv` (the wrapper the
runner puts around every server process) tries what a hostile server would, and reports."""

from __future__ import annotations

import http.server
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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.api.permissions import BUILTIN, PermissionProfile
from mcpfleet.platform.local.sandbox import SandboxError, package_cache, sandbox_argv

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


FILTER_PROBE = r"""
import json, os, socket, sys, urllib.request
args = json.loads(sys.argv[1])
out = {"proxy": os.environ.get("HTTPS_PROXY")}
def connect(port):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
    s.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return s.recv(200).split(b"\r\n")[0].decode()
out["allowed"] = connect(args["allowed"])
out["denied"] = connect(args["denied"])
try:
    socket.create_connection(("127.0.0.1", args["allowed"]), timeout=3).close()
    out["direct"] = "ok"
except OSError as exc:
    out["direct"] = type(exc).__name__
out["http"] = urllib.request.urlopen(f"http://127.0.0.1:{args['allowed']}/", timeout=10).status
print(json.dumps(out))
"""


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"served by port {self.server.server_address[1]}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def http_ports() -> Iterator[tuple[int, int]]:
    """Two loopback HTTP servers on the host answering 200."""
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ok) for _ in range(2)]
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    yield servers[0].server_address[1], servers[1].server_address[1]
    for server in servers:
        server.shutdown()
        server.server_close()


def test_allow_lists_through_the_egress_filter(tmp_path: Path, http_ports: tuple[int, int]) -> None:
    allowed, denied = http_ports
    profile = PermissionProfile.model_validate(
        {"network": {"outbound": {"allow_host": ["127.0.0.1"], "allow_port": [allowed]}}}
    )
    argv = sandbox_argv(
        [sys.executable, "-c", FILTER_PROBE, json.dumps({"allowed": allowed, "denied": denied})],
        dict(os.environ),
        profile,
        tmp_path / "work",
        tmp_path / "cache",
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["proxy"] == "http://127.0.0.1:3128"
    assert seen["allowed"] == "HTTP/1.1 200 Connection established"
    assert seen["denied"] == "HTTP/1.1 403 Forbidden"  # a port the profile does not list
    assert seen["direct"] != "ok"  # no network of its own: only the filter leads out
    assert seen["http"] == 200  # a plain http:// request through HTTP_PROXY


def test_exit_code_of_a_filtered_server_is_its_own(tmp_path: Path) -> None:
    profile = PermissionProfile.model_validate({"network": {"outbound": {"allow_port": [443]}}})
    argv = sandbox_argv(
        [sys.executable, "-c", "import sys; sys.exit(7)"],
        dict(os.environ),
        profile,
        tmp_path / "w",
        tmp_path / "c",
    )
    assert subprocess.run(argv, capture_output=True, timeout=60, check=False).returncode == 7


def _rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any] | None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    if "id" not in message:
        return None
    while True:
        line = proc.stdout.readline()
        assert line, "the server ended"
        answer: dict[str, Any] = json.loads(line)
        if answer.get("id") == message["id"]:
            return answer


def _fetch_text(proc: subprocess.Popen[bytes], url: str, request_id: int) -> str:
    answer = _rpc(
        proc,
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            "params": {"name": "fetch", "arguments": {"url": url, "raw": True}},
        },
    )
    assert answer is not None
    if "error" in answer:
        return f"error: {answer['error'].get('message')}"
    return " ".join(str(c.get("text", "")) for c in answer["result"].get("content", []))


@pytest.mark.timeout(300)
def test_real_fetch_server_reaches_only_the_allowed_port(tmp_path: Path, http_ports: tuple[int, int]) -> None:
    """mcp-server-fetch from PyPI, run by uvx inside the sandbox behind the egress filter: it fetches
    from the allowed loopback port, not from another one."""
    allowed, denied = http_ports
    profile = PermissionProfile.model_validate(
        {"network": {"outbound": {"allow_host": ["127.0.0.1"], "allow_port": [allowed]}}}
    )
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    command = ["uvx", "mcp-server-fetch", "--ignore-robots-txt", "--allow-private-ips"]
    argv = sandbox_argv(command, env, profile, tmp_path / "work", tmp_path / "cache")
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        init = _rpc(
            proc,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "sandbox-test", "version": "1"},
                },
            },
        )
        assert init is not None and "result" in init, init
        _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        ok = _fetch_text(proc, f"http://127.0.0.1:{allowed}/", 2)
        refused = _fetch_text(proc, f"http://127.0.0.1:{denied}/", 3)
    finally:
        proc.kill()
        proc.wait()
    assert f"served by port {allowed}" in ok, ok
    assert "status code 403" in refused and f"served by port {denied}" not in refused, refused


def test_package_caches_are_per_package_and_profile(tmp_path: Path) -> None:
    time_server = ["uvx", "mcp-server-time", "--local-timezone=UTC"]
    same = package_cache(
        tmp_path, ["uvx", "mcp-server-time", "--local-timezone=Europe/Paris"], BUILTIN["none"]
    )
    assert package_cache(tmp_path, time_server, BUILTIN["none"]) == same  # args do not matter
    assert package_cache(tmp_path, time_server, BUILTIN["network"]) != same  # profiles never share
    assert package_cache(tmp_path, ["uvx", "mcp-server-time@1.0"], BUILTIN["none"]) != same
    assert package_cache(tmp_path, ["npx", "-y", "mcp-server-time"], BUILTIN["none"]) != same


def test_a_path_entry_above_the_home_or_the_work_folder_is_not_shown(tmp_path: Path) -> None:
    work = tmp_path / "state" / "sandbox" / "default" / "s"
    env = {
        **os.environ,
        "PATH": os.pathsep.join([str(tmp_path), str(Path.home()), os.environ.get("PATH", "")]),
    }
    argv = sandbox_argv(["true"], env, BUILTIN["none"], work, tmp_path / "cache")
    shown = {argv[i + 1] for i, a in enumerate(argv) if a == "--ro-bind"}
    assert str(tmp_path.resolve()) not in shown and os.path.realpath(Path.home()) not in shown


def _writable(argv: list[str]) -> set[str]:
    """The host paths a sandbox argv binds read-write (bwrap's `--bind SRC DEST`)."""
    return {argv[i + 1] for i, a in enumerate(argv[:-2]) if a == "--bind"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    reads=st.lists(st.integers(0, 3), max_size=4, unique=True),
    writes=st.lists(st.integers(0, 3), max_size=4, unique=True),
    mode=st.sampled_from(["none", "network", "ports"]),
)
def test_only_the_work_folder_cache_and_write_paths_are_writable(
    tmp_path: Path, reads: list[int], writes: list[int], mode: str
) -> None:
    folders = [tmp_path / f"d{i}" for i in range(4)]
    for folder in folders:
        folder.mkdir(exist_ok=True)
    outbound: dict[str, Any] = {"insecure_allow_all": True} if mode == "network" else {}
    if mode == "ports":
        outbound = {"allow_port": [443]}
    profile = PermissionProfile.model_validate(
        {
            "read": [str(folders[i]) for i in reads],
            "write": [str(folders[i]) for i in writes],
            "network": {"outbound": outbound},
        }
    )
    argv = sandbox_argv(["true"], dict(os.environ), profile, tmp_path / "work", tmp_path / "cache")
    expected = {str((tmp_path / "work").resolve()), str((tmp_path / "cache").resolve())}
    assert _writable(argv) == expected | {str(folders[i]) for i in writes}
    assert ("--share-net" in argv) == (mode == "network")
    assert argv.count("--unshare-all") >= 1 and "--remount-ro" in argv
