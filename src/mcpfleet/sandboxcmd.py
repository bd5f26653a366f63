"""Reading a sandboxed command line: the server's own command inside the local sandbox's wrappers.

`platform/local/sandbox.py` wraps a server's argv in bubblewrap (`bwrap OPTIONS -- CMD`) and, for an
egress allow-list, in the egress filter (`python -I …/egress.py outside|inside OPTIONS -- CMD`). What
a person is shown (messages, status, the proxy's log lines) is the server's own command. This module
is standard library only, so the proxy (data plane) can use it without importing the local platform.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

BWRAP = "bwrap"
EGRESS_SCRIPT = "egress.py"
"""The egress filter's file name (platform/local/egress.py; bound into a sandbox under another name)."""
EGRESS_RELAY = "/run/mcpfleet-egress.py"
"""Where the egress filter's script is bound inside a sandbox (its relay)."""


def server_command(argv: Sequence[str]) -> list[str]:
    """The server's own command inside a sandboxed argv (for messages, status and the offline check):
    bwrap's options and the egress filter's end at their first `--` (none of their values is `--`)."""
    command = list(argv)
    while command and "--" in command:
        wrapper = os.path.basename(command[0]) == BWRAP or (
            len(command) > 2
            and command[1] == "-I"
            and (os.path.basename(command[2]) == EGRESS_SCRIPT or command[2] == EGRESS_RELAY)
        )
        if not wrapper:
            break
        command = command[command.index("--") + 1 :]
    return command
