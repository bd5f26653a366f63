"""Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document, used by MCP clients):
a `client_id` that is an https URL names a JSON document at that URL describing the client.

The document is fetched without following redirects, bounded (`MAX_DOCUMENT_BYTES`, 5 s), must name
the same `client_id`, and is cached (`cacheFallbackTtl`, LRU of `cacheMaxSize`). Such a client is
always public (`none`): its redirect URIs are validated like a registration's.

Anyone can name any URL as `client_id` on the unauthenticated `/oauth/authorize`, so the fetch is
behind the request-forgery guard (`mcpfleet.guardedhttpx`): it connects only to public addresses,
checked on the address connected to, unless `cimd.allowPrivateIP` (the OIDC fetches' rule).
"""

from __future__ import annotations

import logging
import ssl
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from mcpfleet.guardedhttpx import guarded_client
from mcpfleet.httplimits import IDENTITY, BodyTooLarge, BodyUnreadable, read_capped
from mcpfleet.netguard import PrivateAddressError

MAX_DOCUMENT_BYTES = 64 * 1024
FETCH_TIMEOUT = 5.0

log = logging.getLogger("mcpfleet.authserver")


class CIMDResolver:
    def __init__(
        self,
        ttl: float,
        max_size: int,
        *,
        allow_private: bool,
        verify: ssl.SSLContext | bool = True,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        # `http` replaces the guarded client only in tests that script the answers themselves.
        self.http = http or guarded_client(allow_private=allow_private, verify=verify, timeout=FETCH_TIMEOUT)
        self.ttl = ttl
        self.max_size = max_size
        self._cache: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()

    async def resolve(self, client_id: str) -> dict[str, Any]:
        from mcpfleet.auth.authserver.server import OAuthError

        now = time.monotonic()
        cached = self._cache.get(client_id)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(client_id)
            return cached[1]
        parts = urlsplit(client_id)
        if parts.scheme != "https" or not parts.hostname or parts.fragment or not parts.path.strip("/"):
            raise OAuthError(
                "invalid_client", "client_id: a metadata document URL must be https with a path", 401
            )
        try:
            async with self.http.stream(
                "GET", client_id, headers={"accept": "application/json", **IDENTITY}, timeout=FETCH_TIMEOUT
            ) as response:
                if response.status_code != 200:
                    raise OAuthError(
                        "invalid_client",
                        f"client_id: its metadata document answered HTTP {response.status_code}",
                        401,
                    )
                try:
                    body = await read_capped(response, MAX_DOCUMENT_BYTES)
                except BodyTooLarge:
                    raise OAuthError(
                        "invalid_client", "client_id: its metadata document is too large", 401
                    ) from None
                except BodyUnreadable:
                    raise OAuthError(
                        "invalid_client", "client_id: its metadata document is in an unreadable encoding", 401
                    ) from None
        except PrivateAddressError as exc:
            log.warning("authorization server: CIMD document %s not fetched: %s", parts.hostname, exc)
            raise OAuthError(
                "invalid_client",
                "client_id: its metadata document is on a non-public address (refused)",
                401,
            ) from None
        except httpx.HTTPError as exc:
            raise OAuthError(
                "invalid_client", "client_id: its metadata document could not be fetched", 401
            ) from exc
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise OAuthError("invalid_client", "client_id: its metadata document is not JSON", 401) from exc
        if not isinstance(document, dict) or document.get("client_id") != client_id:
            raise OAuthError(
                "invalid_client", "client_id: its metadata document names another client_id", 401
            )
        kept = {
            k: document[k]
            for k in ("redirect_uris", "client_name", "grant_types", "response_types", "scope")
            if k in document
        }
        self._cache[client_id] = (now + self.ttl, kept)
        while len(self._cache) > self.max_size:
            self._cache.popitem(last=False)
        return kept

    async def aclose(self) -> None:
        await self.http.aclose()
