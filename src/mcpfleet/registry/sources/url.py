"""`url` source: a registry file fetched with HTTP GET."""

from __future__ import annotations

import httpx

from mcpfleet.httplimits import IDENTITY, BodyTooLarge, BodyUnreadable, read_capped
from mcpfleet.redact import redact_text, redact_url
from mcpfleet.registry.sources.base import (
    MAX_DOCUMENT_BYTES,
    Fetched,
    SourceError,
    fetched_bytes,
    too_large,
)


class UrlReader:
    def __init__(self, source: str, fmt: str, url: str, headers: dict[str, str], timeout: float) -> None:
        self.source, self.fmt, self.url = source, fmt, url
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout, follow_redirects=True)

    async def fetch(self) -> Fetched:
        try:
            async with self._client.stream("GET", self.url, headers=IDENTITY) as response:
                if response.status_code != 200:
                    raise SourceError(f"GET {redact_url(self.url)} returned HTTP {response.status_code}")
                try:
                    content = await read_capped(response, MAX_DOCUMENT_BYTES)
                except BodyTooLarge as exc:
                    raise too_large(exc.size) from None  # stopped reading: memory stays bounded
                except BodyUnreadable as exc:
                    raise SourceError(f"GET {redact_url(self.url)}: {exc}") from None
        except httpx.HTTPError as exc:
            raise SourceError(
                f"GET {redact_url(self.url)} failed: {type(exc).__name__}: {redact_text(str(exc))}"
            ) from None
        return fetched_bytes(self.source, self.fmt, content)

    async def close(self) -> None:
        await self._client.aclose()
