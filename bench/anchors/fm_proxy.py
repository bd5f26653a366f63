"""Anchor: the Python gateway users pick today, fastmcp's `create_proxy` in front of one or more backends.

Usage: python fm_proxy.py PORT BACKEND_URL [BACKEND_URL ...]  (several backends: mounted as b0_, b1_, ...).
Needs fastmcp, which is not a dependency of mcpfleet: run it from the anchors venv (setup.sh).
"""

from __future__ import annotations

import sys

from fastmcp import FastMCP
from fastmcp.server import create_proxy

if __name__ == "__main__":
    port = int(sys.argv[1])
    backends = sys.argv[2:]
    if len(backends) == 1:
        proxy = create_proxy(backends[0])
    else:
        proxy = FastMCP("agg")
        for i, backend in enumerate(backends):
            proxy.mount(create_proxy(backend), namespace=f"b{i}")
    proxy.run(transport="http", host="127.0.0.1", port=port, show_banner=False, log_level="warning")
