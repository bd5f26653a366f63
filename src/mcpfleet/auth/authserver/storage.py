"""Where the authorization server keeps its state: registered clients, pending authorizations,
codes, refresh tokens (and those already rotated out, to recognise a replay) and the upstream tokens
of each login session.

Every record is a small JSON object with a lifetime, stored under `kind` and a key (for codes and
refresh tokens the key is an HMAC of the token, `keys.KeySet.token_keys`). `take` reads and deletes
in one step, so a code or refresh token is redeemed at most once even across replicas (Redis GETDEL).

* `MemoryStorage`: one process; bounded (oldest records evicted first past `MAX_RECORDS` per kind).
* `RedisStorage`: a standalone Redis or a Sentinel-monitored master (redis-py's `Sentinel`), ACL user
  and password from files, optional TLS; what lets several replicas share logins and survive restarts.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Literal, Protocol

import orjson

from mcpfleet.auth.authserver.config import RedisSettings, RedisTLSFiles, read_secret_text

if TYPE_CHECKING:
    import redis.asyncio

# "rotated": refresh tokens already used once (their HMAC -> the login session), kept for the refresh
# token lifespan so that a replay is recognised and revokes the family (the session).
Kind = Literal["client", "pending", "code", "refresh", "rotated", "session"]
MAX_RECORDS = 100_000


class StorageError(Exception):
    """The store did not answer (e.g. Redis down): the endpoint answers `temporarily_unavailable`."""


class Storage(Protocol):
    async def put(self, kind: Kind, key: str, value: dict[str, Any], ttl: float) -> None: ...
    async def get(self, kind: Kind, key: str) -> dict[str, Any] | None: ...
    async def take(self, kind: Kind, key: str) -> dict[str, Any] | None: ...
    async def delete(self, kind: Kind, key: str) -> None: ...
    async def close(self) -> None: ...


class MemoryStorage:
    def __init__(self, max_records: int = MAX_RECORDS) -> None:
        self.max_records = max_records
        self._data: dict[str, OrderedDict[str, tuple[float, bytes]]] = {}

    def _table(self, kind: Kind) -> OrderedDict[str, tuple[float, bytes]]:
        return self._data.setdefault(kind, OrderedDict())

    async def put(self, kind: Kind, key: str, value: dict[str, Any], ttl: float) -> None:
        table = self._table(kind)
        table.pop(key, None)
        table[key] = (time.monotonic() + ttl, orjson.dumps(value))
        while len(table) > self.max_records:
            table.popitem(last=False)

    async def get(self, kind: Kind, key: str) -> dict[str, Any] | None:
        table = self._table(kind)
        found = table.get(key)
        if found is None:
            return None
        if found[0] <= time.monotonic():
            del table[key]
            return None
        value: dict[str, Any] = orjson.loads(found[1])
        return value

    async def take(self, kind: Kind, key: str) -> dict[str, Any] | None:
        value = await self.get(kind, key)
        self._table(kind).pop(key, None)
        return value

    async def delete(self, kind: Kind, key: str) -> None:
        self._table(kind).pop(key, None)

    async def close(self) -> None:
        return None


def _host_port(address: str, default_port: int) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep:
        return address, default_port
    if not host or not port.isdigit():
        raise ValueError(f"expected host:port, got {address!r}")
    return host.strip("[]"), int(port)


def _tls_options(tls: RedisTLSFiles | None) -> dict[str, Any]:
    """redis-py's TLS options for a `tls` / `sentinelTls` block."""
    if tls is None:
        return {}
    options: dict[str, Any] = {"ssl": True, "ssl_ca_certs": tls.ca_file}
    if tls.insecure_skip_verify:
        options |= {"ssl_cert_reqs": "none", "ssl_check_hostname": False}
    return options


def redis_connection(settings: RedisSettings) -> redis.asyncio.Redis:
    """A client for the standalone Redis or, through the Sentinels, the current master."""
    import redis.asyncio
    from redis.asyncio.sentinel import Sentinel

    options: dict[str, Any] = {
        "db": settings.db,
        "username": read_secret_text(settings.username_file) if settings.username_file else None,
        "password": read_secret_text(settings.password_file) if settings.password_file else None,
        "socket_connect_timeout": settings.dial_timeout,
        "socket_timeout": max(settings.read_timeout, settings.write_timeout),
    }
    options.update(_tls_options(settings.tls))
    if settings.addr:
        host, port = _host_port(settings.addr, 6379)
        return redis.asyncio.Redis(host=host, port=port, **options)
    if not settings.sentinel_addrs or not settings.master_name:
        raise ValueError("redis: give addr, or sentinelAddrs and masterName")
    sentinel_options: dict[str, Any] = {
        "socket_connect_timeout": settings.dial_timeout,
        "socket_timeout": settings.read_timeout,
    }
    sentinel_options.update(_tls_options(settings.sentinel_tls))
    sentinel = Sentinel(
        [_host_port(a, 26379) for a in settings.sentinel_addrs],
        sentinel_kwargs=sentinel_options,
        **options,
    )
    master: redis.asyncio.Redis = sentinel.master_for(settings.master_name)
    return master


class RedisStorage:
    def __init__(self, settings: RedisSettings, client: redis.asyncio.Redis | None = None) -> None:
        self.prefix = settings.key_prefix
        self.client = client or redis_connection(settings)

    def _key(self, kind: Kind, key: str) -> str:
        return f"{self.prefix}{kind}:{key}"

    async def put(self, kind: Kind, key: str, value: dict[str, Any], ttl: float) -> None:
        import redis

        try:
            await self.client.set(self._key(kind, key), orjson.dumps(value), px=max(1, int(ttl * 1000)))
        except (redis.RedisError, OSError) as exc:
            raise StorageError(f"redis: {exc}") from exc

    async def _read(self, op: str, kind: Kind, key: str) -> dict[str, Any] | None:
        import redis

        try:
            raw = await (self.client.getdel if op == "take" else self.client.get)(self._key(kind, key))
        except (redis.RedisError, OSError) as exc:
            raise StorageError(f"redis: {exc}") from exc
        if raw is None:
            return None
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    async def get(self, kind: Kind, key: str) -> dict[str, Any] | None:
        return await self._read("get", kind, key)

    async def take(self, kind: Kind, key: str) -> dict[str, Any] | None:
        return await self._read("take", kind, key)

    async def delete(self, kind: Kind, key: str) -> None:
        import redis

        try:
            await self.client.delete(self._key(kind, key))
        except (redis.RedisError, OSError) as exc:
            raise StorageError(f"redis: {exc}") from exc

    async def close(self) -> None:
        await self.client.aclose()
