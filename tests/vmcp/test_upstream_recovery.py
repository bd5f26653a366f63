"""A backend process restarts under load: clients never see the backend's "Missing session ID".

Before the fix, `Upstream` cleared its backend session before re-initialising, so calls made during
the re-initialisation (or after a failed one) went out without `Mcp-Session-Id` and the backend's
`400 {"code": -32600, "message": "Bad Request: Missing session ID"}` came back as the answer. Now
those calls wait for the new session or get a gateway error naming the backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from tests.mcp_messages import STREAMABLE_HTTP_HEADERS, initialize_request
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import free_port

REPO = Path(__file__).resolve().parents[2]
FAST = {
    "failureHandling": {
        "healthCheckInterval": "200ms",
        "healthCheckTimeout": "1s",
        "unhealthyThreshold": 2,
        "partialFailureMode": "fail",
    }
}
BACKEND = (
    "import sys, uvicorn\n"
    "from tests.vmcp.servers import sdk_backend\n"
    "uvicorn.run(sdk_backend('alpha').streamable_http_app(), host='127.0.0.1', port=int(sys.argv[1]),"
    " log_level='error')\n"
)


async def _start_backend(port: int) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", BACKEND, str(port), cwd=REPO, stdout=asyncio.subprocess.DEVNULL
    )
    end = time.monotonic() + 60
    while time.monotonic() < end:
        assert proc.returncode is None, "the backend process exited during start-up"
        with contextlib.suppress(OSError):
            _, w = await asyncio.open_connection("127.0.0.1", port)
            w.close()
            return proc
        await asyncio.sleep(0.05)
    proc.kill()
    raise AssertionError(f"backend did not listen on {port} within 60 s")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGKILL)
        await proc.wait()


async def test_backend_process_restart_never_answers_missing_session(gateway: GatewayFactory) -> None:
    port = free_port()
    backend = await _start_backend(port)
    try:
        gw = await gateway(
            {"backends": [{"name": "alpha", "url": f"http://127.0.0.1:{port}/mcp"}], "operational": FAST}
        )
        answers: list[tuple[float, dict[str, Any]]] = []
        stop = asyncio.Event()
        async with aiohttp.ClientSession() as h:
            async with h.post(gw.url, json=initialize_request(), headers=STREAMABLE_HTTP_HEADERS) as r:
                sid = r.headers["mcp-session-id"]
            hdrs = {**STREAMABLE_HTTP_HEADERS, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}

            async def call(i: int) -> dict[str, Any]:
                msg = {
                    "jsonrpc": "2.0",
                    "id": i,
                    "method": "tools/call",
                    "params": {"name": "alpha_echo", "arguments": {"text": "x"}},
                }
                async with h.post(gw.url, json=msg, headers=hdrs) as r:
                    assert r.status == 200, await r.text()
                    body = await r.read()
                    if r.headers.get("content-type", "").startswith("text/event-stream"):
                        body = body.split(b"data: ", 1)[1]
                    return dict(json.loads(body))

            first = await call(0)
            assert first["result"]["content"][0]["text"] == "alpha:x", first

            async def load(worker: int) -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    answers.append((time.monotonic(), await call(worker * 100_000 + n)))
                    await asyncio.sleep(0.005)

            workers = [asyncio.create_task(load(w)) for w in range(1, 5)]
            await asyncio.sleep(0.3)
            await _stop(backend)  # the process dies...
            await asyncio.sleep(0.3)
            backend = await _start_backend(port)  # ...and a new one (new sessions) takes the port
            back_at = time.monotonic()
            await asyncio.sleep(4.0)
            stop.set()
            await asyncio.gather(*workers)

        errors = [a["error"] for _, a in answers if "error" in a]
        assert all("Missing session" not in e["message"] for e in errors), errors[:5]
        assert all("'alpha'" in e["message"] for e in errors), errors[:5]
        ok_times = [t for t, a in answers if "result" in a and t > back_at]
        assert ok_times, f"no call succeeded after the backend came back: {errors[-5:]}"
        assert ok_times[0] - back_at < 3.0, "calls did not recover within 3 s of the restart"
        late = [a for t, a in answers if t > ok_times[0] + 0.5 and "error" in a]
        assert late == [], f"calls still failed after recovering: {late[:5]}"
    finally:
        await _stop(backend)
