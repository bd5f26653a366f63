"""A round-robin HTTP front over gateway replicas, as a Kubernetes Service without session affinity.

Every request goes to the next replica; a replica that refuses the connection (killed) is skipped,
as a Service drops a pod whose readiness fails. `served` records which replica answered each
request, so a test can prove consecutive requests of one session landed on different replicas.
"""

from __future__ import annotations

from typing import Any

import aiohttp

_HOP = {b"host", b"content-length", b"connection", b"transfer-encoding", b"keep-alive"}


class RoundRobin:
    def __init__(self, bases: list[str]) -> None:
        self.bases = bases
        self.next = 0
        self.served: list[tuple[str, str]] = []  # (replica base URL, HTTP method)
        self._http: aiohttp.ClientSession | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None, sock_connect=2))
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"] if k not in _HOP}
        for _ in range(len(self.bases)):
            base = self.bases[self.next % len(self.bases)]
            self.next += 1
            try:
                response = await self._http.request(
                    scope["method"], base + scope["path"], headers=headers, data=body or None
                )
            except aiohttp.ClientConnectionError:
                continue  # a dead replica: the next one
            self.served.append((base, scope["method"]))
            async with response:
                out = [(k.lower().encode(), v.encode()) for k, v in response.headers.items()]
                out = [(k, v) for k, v in out if k not in _HOP]
                await send({"type": "http.response.start", "status": response.status, "headers": out})
                try:
                    async for chunk in response.content.iter_any():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except aiohttp.ClientError:
                    pass  # the replica died mid-stream: the client sees the stream end
                await send({"type": "http.response.body", "body": b""})
            return
        await send({"type": "http.response.start", "status": 503, "headers": []})
        await send({"type": "http.response.body", "body": b"no replica"})

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            else:
                if self._http is not None:
                    await self._http.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
