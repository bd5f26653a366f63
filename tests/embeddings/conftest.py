"""A real `mcpfleet embeddings serve` process (the bundled model) for the embedding tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conformance.harness import free_port

# The vMCP suite's fixtures (in-process SDK backends and gateways), for the gateway tests here.
from tests.vmcp.conftest import alpha_beta, gateway, served

__all__ = ["alpha_beta", "embed_server", "embed_server_log", "gateway", "served"]


@pytest.fixture(scope="session")
def embed_server_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the server's stdout and stderr go (the hostile suite checks it for tracebacks)."""
    return tmp_path_factory.mktemp("embeddings") / "server.log"


@pytest.fixture(scope="session")
def embed_server(embed_server_log: Path) -> Iterator[str]:
    """Base URL of `mcpfleet embeddings serve` on a free loopback port (its default model)."""
    port = free_port()
    log = embed_server_log.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpfleet.cli.main", "embeddings", "serve", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                out = embed_server_log.read_text(errors="replace")
                raise RuntimeError(f"embeddings server exited {proc.returncode}: {out}")
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("embeddings server did not answer /health within 60 s")
            time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()
