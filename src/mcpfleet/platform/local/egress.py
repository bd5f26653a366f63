"""The egress filter of a local sandbox whose profile allows only some hosts / ports.

Such a sandbox has no network at all (its own network namespace). Its one way out is an HTTP proxy:

    outside (`egress outside`): an HTTP proxy on a unix socket that checks each CONNECT (or
        absolute-URI request) against the profile's allow_host / allow_port, then connects; it
        starts `bwrap …` with inherited stdio and exits with its exit code.
    inside (`egress inside`, the sandbox's first process): listens on 127.0.0.1:PROXY_PORT in the
        sandbox's namespace, relays each connection to the socket (bound into the sandbox), starts
        the server with HTTP(S)_PROXY pointing at it and exits with the server's exit code.

    then (`egress then --first=JSON`): runs the first argv (the package manager fetching the
        server's package, in a sandbox with network) and, when it succeeds, becomes the second
        (exec: no process stays between `up` and the sandbox).

    serve (`egress serve --listen HOST:PORT`): the same filtering proxy on TCP, as its own workload:
        on Kubernetes the egress proxy of a server with `allow_host` (`render/permissions.py`).

A direct connection from the server fails (no route out of its namespace); a request through the
proxy to a host or port the profile does not list gets `403` naming the profile field. Request
heads are bounded (16 KiB, 10 s), as every mcpfleet HTTP front is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

PROXY_PORT = 3128
SOCKET_NAME = "egress.sock"
INSIDE_DIR = "/run/mcpfleet-egress"
RELAY = "/run/mcpfleet-egress.py"  # = sandboxcmd.EGRESS_RELAY (this script imports nothing of mcpfleet)
"""Where this file is bound inside the sandbox (run there as the relay)."""
MAX_HEAD = 16 * 1024
HEAD_TIMEOUT = 10.0
CONNECT_TIMEOUT = 10.0
MAX_CONNECTIONS = 256
"""Connections the filter relays at once per server; more wait (a server cannot exhaust the host's fds)."""
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class EgressPolicy:
    """allow_host (exact names, or `.domain` for the domain and its subdomains) and allow_port;
    an empty list does not restrict that part."""

    hosts: tuple[str, ...] = ()
    ports: tuple[int, ...] = ()

    def allows(self, host: str, port: int) -> bool:
        host = host.lower().rstrip(".")
        if self.ports and port not in self.ports:
            return False
        if not self.hosts:
            return True
        for allowed in (h.lower() for h in self.hosts):
            if allowed.startswith("."):
                if host == allowed[1:] or host.endswith(allowed):
                    return True
            elif host == allowed:
                return True
        return False


def _die_with_parent() -> None:
    """Ask the kernel to end this process when its parent ends (Linux); best effort elsewhere."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _relay(a: tuple[Any, Any], b: tuple[Any, Any]) -> None:
    """Copy both ways between two (reader, writer) pairs until both sides end."""
    await asyncio.gather(_pipe(a[0], b[1]), _pipe(b[0], a[1]))


def parse_target(head: bytes) -> tuple[str, int, bool]:
    """(host, port, is_connect) of a proxy request head; ValueError when it is not one."""
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("not an HTTP/1.x request line")
    method, target = parts[0], parts[1]
    if method == "CONNECT":
        host, sep, port = target.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError("CONNECT needs host:port")
        return host.strip("[]"), int(port), True
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError("a proxied request names an absolute http:// URL (https goes through CONNECT)")
    return url.hostname, url.port or 80, False


class _Outside:
    def __init__(self, policy: EgressPolicy) -> None:
        self.policy = policy
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)

    async def _answer(self, writer: asyncio.StreamWriter, status: str, text: str) -> None:
        body = text.encode()
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + body
        )
        with contextlib.suppress(ConnectionError, OSError):
            await writer.drain()
        writer.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with self._slots:
            await self._handle(reader, writer)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT)
        except (asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            await self._answer(writer, "400 Bad Request", "request head too large, incomplete or too slow\n")
            return
        try:
            host, port, connect = parse_target(head)
        except ValueError as exc:
            await self._answer(writer, "400 Bad Request", f"{exc}\n")
            return
        if not self.policy.allows(host, port):
            await self._answer(
                writer,
                "403 Forbidden",
                f"{host}:{port} is not allowed by spec.permissionProfile network.outbound"
                " (allow_host / allow_port)\n",
            )
            return
        try:
            upstream = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as exc:
            await self._answer(writer, "502 Bad Gateway", f"{host}:{port} not reached: {exc}\n")
            return
        if connect:
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            upstream[1].write(head)  # absolute-form request line: origin servers accept it (RFC 9112)
        await _relay((reader, writer), upstream)


async def _run_child(argv: Sequence[str], env: dict[str, str] | None = None) -> int:
    child = await asyncio.create_subprocess_exec(*argv, env=env)
    return await child.wait()


def socket_path(socket_dir: Path) -> Path:
    """The filter's socket in SOCKET_DIR, made private (0700) and checked to be this user's folder."""
    socket_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    if socket_dir.is_symlink() or socket_dir.stat().st_uid != os.getuid():
        raise SystemExit(f"egress: {socket_dir} is not this user's folder")
    path = socket_dir / SOCKET_NAME
    path.unlink(missing_ok=True)
    return path


async def outside(path: Path, policy: EgressPolicy, argv: Sequence[str]) -> int:
    """Serve the filtering proxy on the unix socket `path` while `argv` (bwrap …) runs."""
    server = await asyncio.start_unix_server(_Outside(policy).handle, path=str(path), limit=MAX_HEAD)
    try:
        return await _run_child(argv)
    finally:
        server.close()


async def serve(host: str, port: int, policy: EgressPolicy) -> None:
    """The filtering proxy on TCP until the process is stopped."""
    server = await asyncio.start_server(_Outside(policy).handle, host, port, limit=MAX_HEAD)
    async with server:
        await server.serve_forever()


async def inside(socket_path: str, argv: Sequence[str]) -> int:
    """Relay 127.0.0.1:PROXY_PORT to the outside proxy's socket while the server `argv` runs."""

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream = await asyncio.open_unix_connection(socket_path)
        except OSError:
            writer.close()
            return
        await _relay((reader, writer), upstream)

    server = await asyncio.start_server(relay, "127.0.0.1", PROXY_PORT)
    proxy = f"http://127.0.0.1:{PROXY_PORT}"
    env = dict(os.environ)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        env[name] = proxy
    env["NO_PROXY"] = env["no_proxy"] = ""
    try:
        return await _run_child(argv, env)
    finally:
        server.close()


def main(args: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcpfleet.platform.local.egress")
    parser.add_argument("side", choices=("outside", "inside", "then", "serve"))
    parser.add_argument("--listen", help="serve: HOST:PORT")
    parser.add_argument("--socket-dir")
    parser.add_argument("--first", help="then: the JSON argv to run first")
    parser.add_argument("--allow-host", action="append", default=[])
    parser.add_argument("--allow-port", action="append", default=[], type=int)
    argv = list(sys.argv[1:] if args is None else args)
    if argv[:1] == ["serve"]:
        options = parser.parse_args(argv)
        host, _, port = (options.listen or "").rpartition(":")
        if not host or not port.isdigit():
            parser.error("serve needs --listen HOST:PORT")
        policy = EgressPolicy(tuple(options.allow_host), tuple(options.allow_port))
        asyncio.run(serve(host, int(port), policy))
        return 0
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("a command after --")
    split = argv.index("--")
    options, command = parser.parse_args(argv[:split]), argv[split + 1 :]
    _die_with_parent()
    if options.side == "then":
        # Its output goes to stderr: stdout is the server's JSON-RPC stream.
        first = json.loads(options.first)
        code = subprocess.run(
            first, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), check=False
        ).returncode
        if code != 0:
            return code
        os.execvp(command[0], command)
    if options.socket_dir is None:
        parser.error("--socket-dir is required")
    if options.side == "outside":
        policy = EgressPolicy(tuple(options.allow_host), tuple(options.allow_port))
        path = socket_path(Path(options.socket_dir))
        try:
            return asyncio.run(outside(path, policy, command))
        finally:
            path.unlink(missing_ok=True)
    return asyncio.run(inside(os.path.join(options.socket_dir, SOCKET_NAME), command))


if __name__ == "__main__":
    sys.exit(main())
