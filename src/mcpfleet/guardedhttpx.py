"""The request-forgery guard (`mcpfleet.netguard`) for httpx clients: an httpx transport whose
connections go only to public addresses.

httpx has no socket factory hook like aiohttp's, so the guard is an httpcore network backend: it
resolves the host itself, checks every address with `netguard.check_sockaddr`, and connects to the
address it checked (an IP literal), so no second resolution can swap in another address (DNS
rebinding). TLS is still verified against the name in the URL: httpcore passes the URL's host as
the server name when it starts TLS on the connected stream. Environment proxies are not used (a
proxy would connect on our behalf, unchecked).
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterable

import anyio
import httpcore
import httpx

from mcpfleet.netguard import PrivateAddressError, check_sockaddr

SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
"""httpcore's `SOCKET_OPTION` (not exported by name)."""


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's default backend, connecting only to addresses that pass the private-address rule."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError) as exc:
            raise httpcore.ConnectError(f"{host}: {exc}") from exc
        refused: PrivateAddressError | None = None
        failed: Exception | None = None
        for *_, sockaddr in infos:
            try:
                check_sockaddr(sockaddr)
            except PrivateAddressError as exc:
                refused = exc
                continue
            try:
                return await self._inner.connect_tcp(
                    str(sockaddr[0]), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failed = exc
        if failed is not None:
            raise failed
        raise refused or PrivateAddressError(f"{host}: no address to connect to")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's backend interface
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise PrivateAddressError("refused to connect to a Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """`httpx.AsyncHTTPTransport` (HTTP/1.1, no environment proxy) over `GuardedBackend`. A refused
    address raises `netguard.PrivateAddressError` out of the request (not an `httpx.HTTPError`), so
    callers can say why."""

    def __init__(self, verify: ssl.SSLContext | bool = True) -> None:
        super().__init__(verify=verify, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(verify=verify, trust_env=False),
            network_backend=GuardedBackend(),
        )


def guarded_client(
    *, allow_private: bool, verify: ssl.SSLContext | bool = True, timeout: float = 10.0
) -> httpx.AsyncClient:
    """An httpx client that follows no redirect and, unless `allow_private`, connects only to public
    addresses."""
    transport = GuardedTransport(verify) if not allow_private else httpx.AsyncHTTPTransport(verify=verify)
    return httpx.AsyncClient(transport=transport, timeout=timeout, follow_redirects=False, trust_env=False)
