"""`api` source: federation from another upstream-compatible registry (`GET /v0.1/servers`).

The first fetch walks every page; later fetches ask only for `updated_since=<newest updatedAt seen>`
and apply the changes (deleted entries leave). Every tenth fetch is a full walk, so entries an upstream
purges without a tombstone also leave.
"""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import orjson

from mcpfleet.redact import redact_url
from mcpfleet.registry.entry import OFFICIAL_META, ParseResult
from mcpfleet.registry.formats.upstream import entries_from_items
from mcpfleet.registry.sources.base import Fetched, SourceError

_FULL_EVERY = 10
_MAX_PAGES = 10_000


class ApiReader:
    def __init__(
        self, source: str, url: str, page_size: int, headers: dict[str, str], timeout: float
    ) -> None:
        self.source = source
        self.base = url.rstrip("/")
        self.page_size = page_size
        self._client = httpx.AsyncClient(headers=headers, timeout=timeout)
        self._items: dict[tuple[str, str], dict[str, Any]] = {}
        self._since: str | None = None
        self._fetches = 0

    async def _walk(self, since: str | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": self.page_size}
        if since is not None:
            params["updated_since"] = since
        for _ in range(_MAX_PAGES):
            try:
                response = await self._client.get(f"{self.base}/v0.1/servers", params=params)
            except httpx.HTTPError as exc:
                raise SourceError(
                    f"GET {redact_url(self.base)}/v0.1/servers failed: {type(exc).__name__}"
                ) from None
            if response.status_code != 200:
                raise SourceError(
                    f"GET {redact_url(self.base)}/v0.1/servers returned HTTP {response.status_code}"
                )
            try:
                page = orjson.loads(response.content)
                servers = page["servers"]
                cursor = (page.get("metadata") or {}).get("nextCursor")
            except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
                raise SourceError(f"{self.base}/v0.1/servers: not a ServerList response") from None
            out.extend(s for s in servers if isinstance(s, dict))
            if not cursor:
                return out
            params["cursor"] = cursor
        raise SourceError(f"{redact_url(self.base)}/v0.1/servers: more than {_MAX_PAGES} pages")

    async def fetch(self) -> Fetched:
        full = self._since is None or self._fetches % _FULL_EVERY == 0
        items = await self._walk(None if full else self._since)
        self._fetches += 1
        if full:
            self._items = {}
        for item in items:
            server = item.get("server")
            if not isinstance(server, dict):
                continue
            key = (str(server.get("name")), str(server.get("version")))
            official = (item.get("_meta") or {}).get(OFFICIAL_META) or {}
            updated = official.get("updatedAt") if isinstance(official, dict) else None
            if isinstance(updated, str) and (self._since is None or updated > self._since):
                self._since = updated
            if isinstance(official, dict) and official.get("status") == "deleted":
                self._items.pop(key, None)
            else:
                self._items[key] = {"server": server, "_meta": {OFFICIAL_META: official}}
        snapshot = [self._items[k] for k in sorted(self._items)]
        digest = hashlib.sha256(orjson.dumps(snapshot, option=orjson.OPT_SORT_KEYS)).hexdigest()

        def parse() -> ParseResult:
            result = ParseResult()
            entries_from_items(self.source, snapshot, result)
            return result

        return Fetched(digest, parse)

    async def close(self) -> None:
        await self._client.aclose()
