"""Benchmark of the embedded authorization server (docs/authserver.md), in process, memory storage:

* `validate`: what the proxy's guard adds per request: verifying one of its own access tokens
  (ES256 signature, issuer, audience, time window) — `OwnTokenAuthenticator.authenticate`;
* `refresh`: one `POST /oauth/token` refresh_token grant through the ASGI app (client lookup,
  one-time redemption, a new signed JWT and a new refresh token), the steady cost of a client;
* `register`: one RFC 7591 registration.

Reported: median and p95 in microseconds over `--n` calls, and the machine's 1-minute load average.

    .venv/bin/python -P bench/authserver.py [--n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time

import httpx

from mcpfleet.auth.authserver.config import AuthServerSettings, Upstream
from mcpfleet.auth.authserver.guard import OwnTokenAuthenticator
from mcpfleet.auth.authserver.server import AuthServer

ISSUER = "http://127.0.0.1:1"


def _summary(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[int(len(ordered) * 0.95)]
    return f"{name:10s} median {statistics.median(ordered) * 1e6:8.1f} us   p95 {p95 * 1e6:8.1f} us   n={len(ordered)}"


async def main(n: int) -> None:
    settings = AuthServerSettings(
        issuer=ISSUER,
        upstream=Upstream(
            name="idp",
            type="oauth2",
            authorization_endpoint="http://127.0.0.1:2/a",
            token_endpoint="http://127.0.0.1:2/t",
            client_id="c",
        ),
    )
    server = AuthServer(settings, resource=ISSUER + "/mcp")
    transport = httpx.ASGITransport(app=server)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url=ISSUER) as http:
        client_id = (
            await http.post("/oauth/register", json={"redirect_uris": ["http://127.0.0.1:9/cb"]})
        ).json()["client_id"]
        await server.storage.put("session", "sid", {"upstream": {"access_token": "u"}, "sub": "user-1"}, 3600)
        _, _, body = await server._issue({"client_id": client_id}, "sid", ["openid"], None)
        import orjson

        tokens = orjson.loads(body)
        guard = OwnTokenAuthenticator(server)
        header = f"Bearer {tokens['access_token']}"
        validate: list[float] = []
        for _ in range(n):
            started = time.perf_counter()
            await guard.authenticate(header)
            validate.append(time.perf_counter() - started)
        refresh: list[float] = []
        current = tokens["refresh_token"]
        for _ in range(n // 4):
            started = time.perf_counter()
            answer = await http.post(
                "/oauth/token",
                data={"grant_type": "refresh_token", "refresh_token": current, "client_id": client_id},
            )
            refresh.append(time.perf_counter() - started)
            current = answer.json()["refresh_token"]
        register: list[float] = []
        for _ in range(n // 4):
            started = time.perf_counter()
            await http.post("/oauth/register", json={"redirect_uris": ["http://127.0.0.1:9/cb"]})
            register.append(time.perf_counter() - started)
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    for name, samples in (("validate", validate), ("refresh", refresh), ("register", register)):
        print(_summary(name, samples))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    asyncio.run(main(parser.parse_args().n))
