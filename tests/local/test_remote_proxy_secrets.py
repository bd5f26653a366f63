"""Under a real `mcpfleet up` (issue 27 items 13 and 15): an MCPRemoteProxy whose `remoteURL` carries
credentials (`user:pw@` and a query token) keeps them out of every process's command line (what
`ps` and /proc/PID/cmdline show any local user), the proxy reading the URL from its environment
(owner-only /proc/PID/environ); the state files holding the manifest are 0600; `describe` and
`get -o yaml` show the URL redacted; and `get all` lists a document of an unknown kind that `up`
refused, with the reason.
"""

from __future__ import annotations

import base64
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpfleet.platform.local.state import STATE_FILES
from tests.local.conftest import Up, manifest
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.vmcp.servers import JsonRpcBackend, Served

SECRETS = ("hunter2", "QUERY-SECRET-9")


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")


def _children(pid: int) -> list[int]:
    """Every descendant of `pid` (the processes `up` started, and theirs)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").iterdir():
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def _no_secret_in_argv_and_private_state(up: Up, remote_url: str) -> None:
    """No process of the fleet has a secret on its command line; the proxy reads its environment
    (owner-only); the state files holding the manifest are the owner's only."""
    pids = [up.process.pid, *_children(up.process.pid)]
    commands = {pid: _cmdline(pid) for pid in pids if Path(f"/proc/{pid}").exists()}
    for pid, command in commands.items():
        assert not any(s in command for s in SECRETS), (pid, command)
    (proxy_pid,) = [p for p, c in commands.items() if " proxy --config " in c and "/mcpremoteproxy/" in c]
    # Its config names the variable; neither the URL nor its credentials are in the file.
    (config,) = up.state_dir.glob("config/mcpremoteproxy/*/remote/proxy.json")
    assert '"remoteFromEnv":"MCPFLEET_REMOTE_URL"' in config.read_text()
    assert not any(s in config.read_text() for s in SECRETS)
    environ = Path(f"/proc/{proxy_pid}/environ").read_bytes().split(b"\0")
    assert f"MCPFLEET_REMOTE_URL={remote_url}".encode() in environ
    assert stat.S_IMODE(Path(f"/proc/{proxy_pid}/environ").stat().st_mode) == 0o400

    # The state files holding the manifest are the owner's only.
    for name in STATE_FILES:
        path = up.state_dir / name
        if path.exists():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, (name, oct(path.stat().st_mode))
    assert (up.state_dir / "state.db").exists()


@pytest.mark.timeout(240)
async def test_remote_url_credentials_stay_out_of_argv_and_shared_files(running_up: Any) -> None:
    basic = base64.b64encode(b"user:hunter2").decode()
    backend = JsonRpcBackend("remote", require_header=("authorization", f"Basic {basic}"))
    served = await Served(backend).start()
    remote_url = served.url.replace("http://", "http://user:hunter2@") + "?token=QUERY-SECRET-9"
    unknown_kind = manifest("MCPServr", "typo", {"image": "uvx://x"})
    up = running_up(
        {
            "remote.yaml": manifest("MCPRemoteProxy", "remote", {"remoteURL": remote_url}),
            "typo.yaml": unknown_kind,
        }
    )
    try:
        status = await up.wait_phase("MCPRemoteProxy", "remote", {"Running"}, limit=120)
        async with httpx.AsyncClient(trust_env=False) as http:
            answer = await http.post(
                str(status["url"]),
                json=initialize_request(),
                headers=dict(STREAMABLE_HTTP_HEADERS),
                timeout=10,
            )
        assert answer.status_code == 200, answer.text  # the proxy has the URL, credentials and all

        _no_secret_in_argv_and_private_state(up, remote_url)

        # What a person is shown: redacted.
        for shown in (
            up.get("describe", "mcpremoteproxy", "remote"),
            up.get("get", "mcpremoteproxy", "remote", "-o", "yaml"),
            up.get("get", "mcpremoteproxy", "-o", "json"),
            up.get("get", "all"),
        ):
            assert not any(s in shown for s in SECRETS), shown
        assert "http://***@127.0.0.1" in up.get("describe", "mcpremoteproxy", "remote")

        # `get all` shows the document `up` refused for its unknown kind, with the reason.
        listing = up.get("get", "all")
        assert "typo.yaml" in listing and "MCPServr/typo" in listing, listing
        assert "unknown kind 'MCPServr'" in listing, listing
    finally:
        await served.stop()
