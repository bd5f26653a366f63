"""A private redis-server for a test (Debian's `redis-server`, installed by scripts/system-deps.sh).

Each test gets its own server on a free loopback port, with a password (so the code paths that read
it from MCPFLEET_REDIS_PASSWORD are the ones tested), no persistence, in a temporary directory.
A missing `redis-server` fails the test with the reason; it is never skipped.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis


@dataclass(frozen=True)
class RedisServer:
    port: int
    password: str
    process: subprocess.Popen[bytes]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(directory: Path) -> RedisServer:
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed: run scripts/system-deps.sh (Debian package redis-server)")
    password = secrets.token_hex(16)
    port = _free_port()
    # The password goes in a config file, not on the command line (visible in `ps`).
    conf = directory / "redis.conf"
    conf.write_text(
        f'port {port}\nbind 127.0.0.1\nrequirepass {password}\nsave ""\nappendonly no\n'
        f"dir {directory}\nlogfile {directory / 'redis.log'}\n"
    )
    proc = subprocess.Popen([binary, str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = RedisServer(port, password, proc)
    deadline = time.monotonic() + 20
    while True:
        try:
            if server.client().ping():
                return server
        except redis.exceptions.ConnectionError:
            pass
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"redis-server exited with {proc.returncode}: {err}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("redis-server did not answer PING within 20 s")
        time.sleep(0.05)


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path)
    yield server
    server.process.terminate()
    try:
        server.process.wait(10)
    except subprocess.TimeoutExpired:
        server.process.kill()
