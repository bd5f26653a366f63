"""The conversion webhook's server (the dev control plane's and the operator's, one `server_config`).

The API server keeps a webhook's idle connections for 90 s (Go's HTTP transport) and does not
retry a POST on a connection the server closed meanwhile: it answers its own client 500
(`conversion webhook ... failed: ... EOF`). So the webhook must keep an idle connection open longer
than that: here a connection idle past uvicorn's default keep-alive (5 s) still answers on the same
socket. And the counts at GET /metrics are what was converted.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

from mcpfleet.api.conversion import KEEP_ALIVE_SECONDS, SERVICE_NAME, ConversionCounts, app, server_config
from mcpfleet.operator.conversion import new_tls
from tests.inprocess_server import InProcessServer
from tests.vmcp.servers import free_port

IDLE = 7.0
"""Longer than uvicorn's default keep-alive timeout (5 s), which closed the webhook's connections."""


async def _exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, method: str, path: str, body: bytes = b""
) -> tuple[int, bytes]:
    """One HTTP/1.1 request on an open (kept-alive) connection; EOF raises IncompleteReadError."""
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
    await writer.drain()
    header = await reader.readuntil(b"\r\n\r\n")
    lines = header.decode().split("\r\n")
    length = next(
        int(v) for k, _, v in (line.partition(": ") for line in lines) if k.lower() == "content-length"
    )
    return int(lines[0].split()[1]), await reader.readexactly(length)


def _review(uid: str) -> bytes:
    server = {"apiVersion": "mcpfleet.dev/v1alpha1", "kind": "MCPServer", "metadata": {"name": "s"}}
    server["spec"] = {"image": "uvx://x", "groupRef": "g"}
    request = {"uid": uid, "desiredAPIVersion": "mcpfleet.dev/v1beta1", "objects": [server]}
    return json.dumps(
        {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request}
    ).encode()


async def test_idle_connection_stays_open_and_conversions_are_counted(tmp_path: Path) -> None:
    assert KEEP_ALIVE_SECONDS > 90, "must outlive the API server's idle-connection timeout"
    tls = new_tls("ns")
    (tmp_path / "tls.crt").write_bytes(tls["tls.crt"])
    (tmp_path / "tls.key").write_bytes(tls["tls.key"])
    counts = ConversionCounts()
    port = free_port()
    config = server_config(
        app(counts), "127.0.0.1", port, str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"), lifespan="off"
    )
    server = InProcessServer(config)
    task = asyncio.create_task(server.serve())
    try:
        for _ in range(200):
            if server.started:
                break
            await asyncio.sleep(0.05)
        assert server.started, "the webhook server did not start"
        context = ssl.create_default_context(cadata=tls["ca.crt"].decode())
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname=f"{SERVICE_NAME}.ns.svc"
        )
        status, body = await _exchange(reader, writer, "POST", "/convert", _review("1"))
        assert status == 200 and json.loads(body)["response"]["result"]["status"] == "Success"

        await asyncio.sleep(IDLE)
        # Same socket: a server that closed it would make this read hit EOF (the API server's 500).
        status, body = await _exchange(reader, writer, "POST", "/convert", _review("2"))
        converted = json.loads(body)["response"]
        assert status == 200 and converted["uid"] == "2"
        assert converted["convertedObjects"][0]["spec"]["groupRef"] == {"name": "g"}

        status, body = await _exchange(reader, writer, "POST", "/convert", b'{"request": {"uid": "3"}}')
        assert status == 200 and json.loads(body)["response"]["result"]["status"] == "Failure"
        status, body = await _exchange(reader, writer, "GET", "/metrics")
        assert status == 200
        text = body.decode()
        assert 'mcpfleet_conversion_reviews_total{result="Success"} 2' in text
        assert 'mcpfleet_conversion_reviews_total{result="Failure"} 1' in text
        assert (
            'mcpfleet_conversion_objects_total{kind="MCPServer",from_version="mcpfleet.dev/v1alpha1",'
            'to_version="mcpfleet.dev/v1beta1"} 2' in text
        )
        writer.close()
    finally:
        server.should_exit = True
        await task


def test_the_gateway_speaks_the_stored_version() -> None:
    """The data plane keeps its own copy of the constant (the API models are heavy for its start)."""
    from mcpfleet.api.versions import STORAGE_VERSION
    from mcpfleet.vmcp import backends, status

    assert backends.API_VERSION == status.API_VERSION == STORAGE_VERSION
