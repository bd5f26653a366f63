"""aiohttp on demand: the gateway's client session made on first use, aiohttp imported off the loop.

aiohttp is about 0.2 s of a gateway's start (issue 19), and a gateway of plain-http backends never
needs it: its POSTs and notification streams go through `httpclient`. It serves TLS backends, the
HTTP+SSE transport, token exchange and SSE resumption. `LazySession` stands in
for the `aiohttp.ClientSession` those paths are given: `post` / `get` / `delete` work as on a
session (`async with`, or awaited), and the first of them imports aiohttp in a worker thread (the
event loop keeps serving meanwhile) and makes the real session. `errors()` is what an `except`
clause catches for "the HTTP client failed": aiohttp's `ClientError` once aiohttp is loaded (it
cannot be raised before), and `OSError` always.
"""

from __future__ import annotations

import asyncio
import importlib
import sys
from collections.abc import Callable, Generator
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp

_OS_ERRORS: tuple[type[BaseException], ...] = (OSError,)


def errors(*also: type[BaseException]) -> tuple[type[BaseException], ...]:
    """The exceptions of a failed HTTP exchange, plus `also`: `OSError`, and `aiohttp.ClientError`
    once aiohttp is loaded (evaluated where an exception is matched, so a session made elsewhere
    is covered too)."""
    module = sys.modules.get("aiohttp")
    client_error = getattr(module, "ClientError", None) if module is not None else None
    found = _OS_ERRORS if client_error is None else (OSError, client_error)
    return (*found, *also) if also else found


async def load() -> ModuleType:
    """The aiohttp module, imported in a worker thread the first time (never on the event loop)."""
    module = sys.modules.get("aiohttp")
    if module is not None and getattr(module, "ClientSession", None) is not None:
        return module
    return await asyncio.to_thread(importlib.import_module, "aiohttp")


async def no_timeout() -> aiohttp.ClientTimeout:
    """`aiohttp.ClientTimeout(total=None)`: a long-lived stream's request has no overall limit."""
    timeout: aiohttp.ClientTimeout = (await load()).ClientTimeout(total=None)
    return timeout


def default_session(client: ModuleType) -> aiohttp.ClientSession:
    """The gateway's shared session: unlimited pool (the gateway bounds its own concurrency), DNS
    answers cached, bodies passed through as the backend sent them."""
    session: aiohttp.ClientSession = client.ClientSession(
        connector=client.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300),
        timeout=client.ClientTimeout(total=None),
        auto_decompress=False,
    )
    return session


class LazySession:
    """An `aiohttp.ClientSession` made on first use by `factory(aiohttp)` (see the module doc)."""

    def __init__(self, factory: Callable[[ModuleType], aiohttp.ClientSession] = default_session) -> None:
        self._factory = factory
        self._session: aiohttp.ClientSession | None = None
        self._lock = asyncio.Lock()

    async def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            async with self._lock:
                if self._session is None:
                    self._session = self._factory(await load())
        return self._session

    def post(self, url: str, **kwargs: Any) -> _Request:
        return _Request(self, "post", url, kwargs)

    def get(self, url: str, **kwargs: Any) -> _Request:
        return _Request(self, "get", url, kwargs)

    def delete(self, url: str, **kwargs: Any) -> _Request:
        return _Request(self, "delete", url, kwargs)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


class _Request:
    """One request of a `LazySession`: an async context manager, or awaited for the response."""

    def __init__(self, lazy: LazySession, method: str, url: str, kwargs: dict[str, Any]) -> None:
        self._lazy, self._method, self._url, self._kwargs = lazy, method, url, kwargs
        self._cm: Any = None

    async def _start(self) -> aiohttp.ClientResponse:
        session = await self._lazy.session()
        self._cm = getattr(session, self._method)(self._url, **self._kwargs)
        response: aiohttp.ClientResponse = await self._cm
        return response

    def __await__(self) -> Generator[Any, None, aiohttp.ClientResponse]:
        return self._start().__await__()

    async def __aenter__(self) -> aiohttp.ClientResponse:
        session = await self._lazy.session()
        self._cm = getattr(session, self._method)(self._url, **self._kwargs)
        response: aiohttp.ClientResponse = await self._cm.__aenter__()
        return response

    async def __aexit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._cm.__aexit__(typ, exc, tb)
