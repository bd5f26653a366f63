"""The proxy reads a sandboxed command with `mcpfleet.sandboxcmd` (standard library, data-plane safe);
its names must match what the local sandbox writes."""

from __future__ import annotations

from mcpfleet import sandboxcmd
from mcpfleet.platform.local import egress


def test_relay_path_and_wrappers_are_read_back() -> None:
    assert egress.RELAY == sandboxcmd.EGRESS_RELAY
    wrapped = [
        "/usr/bin/bwrap",
        "--unshare-all",
        "--",
        "python",
        "-I",
        egress.RELAY,
        "inside",
        "--",
        "uvx",
        "pkg",
    ]
    assert sandboxcmd.server_command(wrapped) == ["uvx", "pkg"]
    outer = ["python", "-I", egress.__file__, "outside", "--", *wrapped]
    assert sandboxcmd.server_command(outer) == ["uvx", "pkg"]
    assert sandboxcmd.server_command(["uvx", "--", "x"]) == ["uvx", "--", "x"]
