"""`url` source: a registry file fetched with HTTP GET."""

from __future__ import annotations

import httpx

from mcpfleet.registry.sources.base import Fetched, SourceError, fetched_bytes


class UrlReader:
    def __init__(self, source: str, fmt: str, url: str, headers: dict[str, str], timeout: float) -> None:
        self.source, self.fmt, self.url = source, fmt, url
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout, follow_redirects=True)

    async def fetch(self) -> Fetched:
        try:
            response = await self._client.get(self.url)
        except httpx.HTTPError as exc:
            raise SourceError(f"GET {self.url} failed: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise SourceError(f"GET {self.url} returned HTTP {response.status_code}")
        return fetched_bytes(self.source, self.fmt, response.content)

    async def close(self) -> None:
        await self._client.aclose()
