"""vMCP client sessions: a cap and an idle expiry (configurable), and binding to the subject.

Before: no cap (every `initialize` added a session for an hour, whatever the rate), a fixed 1 h idle
expiry, and a session opened with subject A's token worked with subject B's valid token.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.vmcp.app import VMCPApp
from mcpfleet.vmcp.backends import StaticBackendSource
from mcpfleet.vmcp.config import parse_config
from mcpfleet.vmcp.gateway import Gateway, SessionLimitError, SubjectSessionLimitError, session_owner
from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.oidc import Issuer
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import JsonRpcBackend, Served, free_port
from tests.vmcp.test_auth import post

HDR = dict(STREAMABLE_HTTP_HEADERS)
REPO = Path(__file__).resolve().parents[2]


def _call(i: int = 2) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "be_echo", "arguments": {}}}


async def test_session_cap_refuses_initialize_with_503_and_holds_memory(
    gateway: GatewayFactory, served: Any
) -> None:
    s = await served(JsonRpcBackend("be"))
    gw = await gateway({"backends": [{"name": "be", "url": s.url}]}, max_sessions=3)
    app: VMCPApp = gw.app
    async with aiohttp.ClientSession() as h:
        sids = []
        for _ in range(3):
            status, headers, _ = await post(h, gw.url, initialize_request(), HDR)
            assert status == 200
            sids.append(headers["mcp-session-id"])
        for i in range(50):
            status, headers, body = await post(h, gw.url, initialize_request(request_id=i), HDR)
            assert status == 503
            assert headers.get("Retry-After") == "5"
            assert body["id"] == i and "too many open sessions (limit 3)" in body["error"]["message"]
        assert len(app.gateway.sessions) == 3  # refused initializes leave nothing behind
        # The open sessions keep working...
        status, _, body = await post(h, gw.url, _call(), {**HDR, "mcp-session-id": sids[0]})
        assert status == 200 and "result" in body
        # ...and ending one makes room for a new one.
        async with h.delete(gw.url, headers={"mcp-session-id": sids[1]}) as r:
            assert r.status == 200
        status, _, _ = await post(h, gw.url, initialize_request(), HDR)
        assert status == 200


async def test_idle_sessions_expire_after_the_configured_time(gateway: GatewayFactory, served: Any) -> None:
    s = await served(JsonRpcBackend("be"))
    gw = await gateway({"backends": [{"name": "be", "url": s.url}]}, session_idle_seconds=0.4)
    app: VMCPApp = gw.app
    async with aiohttp.ClientSession() as h:
        _, headers, _ = await post(h, gw.url, initialize_request(), HDR)
        busy = headers["mcp-session-id"]
        _, headers, _ = await post(h, gw.url, initialize_request(), HDR)
        idle = headers["mcp-session-id"]
        for _ in range(8):  # one session is used every 0.15 s, the other never
            status, _, _ = await post(h, gw.url, _call(), {**HDR, "mcp-session-id": busy})
            assert status == 200
            await asyncio.sleep(0.15)
        status, _, body = await post(h, gw.url, _call(), {**HDR, "mcp-session-id": idle})
        assert status == 404 and body["error"]["message"] == "Session not found"
        assert set(app.gateway.sessions) == {busy}


async def test_expired_sessions_make_room_under_the_cap(gateway: GatewayFactory, served: Any) -> None:
    s = await served(JsonRpcBackend("be"))
    gw = await gateway({"backends": [{"name": "be", "url": s.url}]}, max_sessions=2, session_idle_seconds=0.3)
    async with aiohttp.ClientSession() as h:
        for _ in range(2):
            assert (await post(h, gw.url, initialize_request(), HDR))[0] == 200
        assert (await post(h, gw.url, initialize_request(), HDR))[0] == 503
        await asyncio.sleep(1.2)  # both expire (and the limit check scans at most once a second)
        assert (await post(h, gw.url, initialize_request(), HDR))[0] == 200


async def test_one_anonymous_address_cannot_take_every_session(gateway: GatewayFactory, served: Any) -> None:
    """Issue 27 risk: the cap was global only, so one caller could fill it and lock everyone out.
    Anonymous callers are counted per client address (here 127.0.0.1 against 127.0.0.2)."""
    s = await served(JsonRpcBackend("be"))
    gw = await gateway(
        {"backends": [{"name": "be", "url": s.url}]}, max_sessions=10, max_sessions_per_subject=2
    )
    other = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    async with aiohttp.ClientSession() as h, aiohttp.ClientSession(connector=other) as h2:
        sids = []
        for _ in range(2):
            status, headers, _ = await post(h, gw.url, initialize_request(), HDR)
            assert status == 200
            sids.append(headers["mcp-session-id"])
        status, headers, body = await post(h, gw.url, initialize_request(request_id=9), HDR)
        assert status == 429 and headers.get("Retry-After") == "5"
        assert (
            body["id"] == 9 and "too many open sessions for this caller (limit 2" in body["error"]["message"]
        )
        # Another address still gets sessions; ending one of the first frees its slot.
        assert (await post(h2, gw.url, initialize_request(), HDR))[0] == 200
        async with h.delete(gw.url, headers={"mcp-session-id": sids[0]}) as r:
            assert r.status == 200
        assert (await post(h, gw.url, initialize_request(), HDR))[0] == 200


async def test_one_subject_cannot_take_every_session(gateway: GatewayFactory, served: Any) -> None:
    """With incoming auth the per-caller cap counts a token's subject, whatever its address."""
    issuer = Issuer()
    iss = await served(issuer)
    issuer.base = iss.base
    issuer.add_rsa("k")
    s = await served(JsonRpcBackend("be"))
    auth = {"type": "oidc", "oidc": {"issuer": issuer.base, "audience": "vmcp", "insecureAllowHTTP": True}}
    gw = await gateway(
        {"backends": [{"name": "be", "url": s.url}], "incomingAuth": auth}, max_sessions_per_subject=2
    )
    alice = {**HDR, "authorization": "Bearer " + issuer.token("k", sub="alice")}
    bob = {**HDR, "authorization": "Bearer " + issuer.token("k", sub="bob")}
    async with aiohttp.ClientSession() as h:
        for _ in range(2):
            assert (await post(h, gw.url, initialize_request(), alice))[0] == 200
        status, _, body = await post(h, gw.url, initialize_request(), alice)
        assert status == 429 and "for this caller" in body["error"]["message"]
        assert (await post(h, gw.url, initialize_request(), bob))[0] == 200


def test_cli_rejects_a_bad_idle_timeout(tmp_path: Path) -> None:
    cfg = tmp_path / "vmcp.json"
    cfg.write_text(json.dumps({"backends": [{"name": "be", "url": "http://127.0.0.1:1/mcp"}]}))
    for args, needle in (
        (["--session-idle-timeout", "soon"], "--session-idle-timeout"),
        (["--session-idle-timeout", "0s"], "must be positive"),
        (["--max-sessions", "0"], "--max-sessions"),
        (["--max-sessions-per-subject", "0"], "--max-sessions-per-subject"),
    ):
        p = subprocess.run(
            [sys.executable, "-m", "mcpfleet.cli.main", "vmcp", "serve", "-c", str(cfg), *args],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert p.returncode == 2, (args, p.stderr)
        assert needle in p.stderr, (args, p.stderr)


async def test_cli_env_sets_the_session_cap(served: Any, tmp_path: Path) -> None:
    """`mcpfleet vmcp serve` as a process, the cap from $MCPFLEET_VMCP_MAX_SESSIONS."""
    s: Served = await served(JsonRpcBackend("be"))
    cfg = tmp_path / "vmcp.json"
    cfg.write_text(json.dumps({"backends": [{"name": "be", "url": s.url}]}))
    port = free_port()
    env = {"MCPFLEET_VMCP_MAX_SESSIONS": "1", "MCPFLEET_VMCP_SESSION_IDLE_TIMEOUT": "10m"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "mcpfleet.cli.main", "vmcp", "serve", "-c", str(cfg), "--port", str(port)),
        env={**__import__("os").environ, **env},
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        async with aiohttp.ClientSession() as h:
            for _ in range(600):
                try:
                    async with h.get(f"http://127.0.0.1:{port}/readyz") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                assert proc.returncode is None, "the gateway exited"
                await asyncio.sleep(0.1)
            assert (await post(h, url, initialize_request(), HDR))[0] == 200
            status, _, body = await post(h, url, initialize_request(), HDR)
            assert status == 503 and "limit 1" in body["error"]["message"]
    finally:
        proc.terminate()
        await proc.wait()


# ---- binding to the subject --------------------------------------------------------------------


@pytest.fixture
async def issuer(served: Any) -> Issuer:
    iss = Issuer()
    s: Served = await served(iss)
    iss.base = s.base
    iss.add_rsa("r1")
    return iss


async def test_session_is_bound_to_the_subject_that_opened_it(
    issuer: Issuer, gateway: GatewayFactory, served: Any
) -> None:
    s = await served(JsonRpcBackend("be"))
    auth = {"type": "oidc", "oidc": {"issuer": issuer.base, "audience": "vmcp", "insecureAllowHTTP": True}}
    gw = await gateway({"backends": [{"name": "be", "url": s.url}], "incomingAuth": auth})
    alice = {**HDR, "authorization": "Bearer " + issuer.token("r1", sub="alice")}
    bob = {**HDR, "authorization": "Bearer " + issuer.token("r1", sub="bob")}
    async with aiohttp.ClientSession() as h:
        status, headers, _ = await post(h, gw.url, initialize_request(), alice)
        assert status == 200
        sid = headers["mcp-session-id"]
        # Bob's token is valid, but the session is Alice's: it does not exist for him.
        status, _, body = await post(h, gw.url, _call(), {**bob, "mcp-session-id": sid})
        assert status == 404 and body["error"]["message"] == "Session not found"
        async with h.get(gw.url, headers={**bob, "accept": "text/event-stream", "mcp-session-id": sid}) as r:
            assert r.status == 404
        async with h.delete(gw.url, headers={**bob, "mcp-session-id": sid}) as r:
            assert r.status == 404
        # Alice, with a fresh token of hers (a refresh), still uses it; Bob's DELETE did not end it.
        alice2 = {**HDR, "authorization": "Bearer " + issuer.token("r1", sub="alice", exp=2e9)}
        status, _, body = await post(h, gw.url, _call(), {**alice2, "mcp-session-id": sid})
        assert status == 200 and body["result"]["content"][0]["text"].startswith("be:")
        async with h.delete(gw.url, headers={**alice, "mcp-session-id": sid}) as r:
            assert r.status == 200


def test_session_limits_flags_env_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpfleet.platform.local.dataplane import _parser
    from mcpfleet.vmcp.config import ConfigError
    from mcpfleet.vmcp.server import ENV_MAX_SESSIONS, ENV_SESSION_IDLE, session_limits

    monkeypatch.delenv(ENV_MAX_SESSIONS, raising=False)
    monkeypatch.delenv(ENV_SESSION_IDLE, raising=False)
    assert session_limits(None, None) == (10_000, 3600.0)
    monkeypatch.setenv(ENV_MAX_SESSIONS, "7")
    monkeypatch.setenv(ENV_SESSION_IDLE, "90s")
    assert session_limits(None, None) == (7, 90.0)
    assert session_limits(3, "2m") == (3, 120.0)  # flags win over the environment
    for bad in (("x", None), (0, None), (None, "-1s"), (None, "later")):
        with pytest.raises(ConfigError, match=r"--max-sessions|--session-idle-timeout"):
            session_limits(*bad)
    # The local platform's data-plane entry takes the same flags.
    args = _parser().parse_args(
        ["vmcp", "--state-dir", "s", "-c", "c.yaml", "--port", "1", "--max-sessions", "5"]
    )
    assert session_limits(args.max_sessions, args.session_idle_timeout) == (5, 90.0)


@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["open", "end", "prune"]), st.sampled_from(["a", "b", None]), st.integers(0, 9)
        ),
        max_size=60,
    )
)
@settings(max_examples=150, deadline=None, database=None)
def test_session_caps_property(ops: list[tuple[str, str | None, int]]) -> None:
    """Any sequence of opens, ends and prunes by two callers (and callers with no known owner):
    the gateway's per-owner counts always equal its sessions, no owner ever holds more than its cap,
    the global cap holds, and a refusal is the per-caller one exactly when that caller is full."""
    cfg = parse_config({"backends": [{"name": "be", "url": "http://127.0.0.1:1/mcp"}]})
    gw = Gateway(cfg, StaticBackendSource([]), max_sessions=5, max_sessions_per_subject=2)
    opened: list[str] = []
    for op, who, pick in ops:
        owner = session_owner(None, f"127.0.0.{who}") if who else None
        if op == "open":
            full_owner = owner is not None and sum(s.owner == owner for s in gw.sessions.values()) >= 2
            full_all = len(gw.sessions) >= 5
            try:
                opened.append(gw.new_session("2025-11-25", None, None, owner).id)
                assert not full_owner and not full_all
            except SubjectSessionLimitError:
                assert full_owner and not full_all
            except SessionLimitError:
                assert full_all
        elif op == "end" and opened:
            gw.end_session(opened.pop(pick % len(opened)))
        elif op == "prune":
            gw.prune_sessions(idle=0.0)
            opened.clear()
        counts: dict[str, int] = {}
        for s in gw.sessions.values():
            if s.owner is not None:
                counts[s.owner] = counts.get(s.owner, 0) + 1
        assert counts == gw.client_sessions._owned
        assert all(n <= 2 for n in counts.values()) and len(gw.sessions) <= 5
