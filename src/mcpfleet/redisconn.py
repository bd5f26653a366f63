"""The Redis connection of the data plane, from a `sessionStorage` (ToolHive's shape).

The password never sits in a config file: the platforms pass the Secret key named by
`sessionStorage.passwordRef` as the environment variable `MCPFLEET_REDIS_PASSWORD`, read here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis.asyncio

    from mcpfleet.api.ratelimit import SessionStorage

# A Redis that does not answer must not hang a request: the callers turn this into an error.
TIMEOUT_SECONDS = 2.0


def redis_client(storage: SessionStorage) -> redis.asyncio.Redis:
    """A client for `storage.address` (host:port), db and password from the environment."""
    # Imported here: only a service configured with Redis pays for loading it (~0.2 s).
    import redis.asyncio

    from mcpfleet.api.ratelimit import REDIS_PASSWORD_ENV

    if storage.address is None:
        raise ValueError("sessionStorage.address is required for provider redis")
    host, _, port = storage.address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"sessionStorage.address: expected host:port, got {storage.address!r}")
    return redis.asyncio.Redis(
        host=host.strip("[]"),
        port=int(port),
        db=storage.db,
        password=os.environ.get(REDIS_PASSWORD_ENV) or None,
        socket_timeout=TIMEOUT_SECONDS,
        socket_connect_timeout=TIMEOUT_SECONDS,
    )
