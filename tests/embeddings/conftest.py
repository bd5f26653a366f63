"""A real `mcpfleet embeddings serve` process (the bundled model) for the embedding tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conformance.harness import free_port

# The vMCP suite's fixtures (in-process SDK backends and gateways), for the gateway tests here.
from tests.vmcp.conftest import alpha_beta, gateway, served

__all__ = ["alpha_beta", "embed_server", "gateway", "served"]


@pytest.fixture(scope="session")
def embed_server() -> Iterator[str]:
    """Base URL of `mcpfleet embeddings serve` on a free loopback port (its default model)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpfleet.cli.main", "embeddings", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            if proc.poll() is not None:
                out = proc.stdout.read().decode() if proc.stdout else ""
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
