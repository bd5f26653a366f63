"""One uvicorn server in this process, as `uvicorn.run` runs it, without uvicorn's command line.

`uvicorn.run` lives in `uvicorn.main`, uvicorn's command line, which imports click: a service that
never parses a uvicorn command line need not load it (issue 19; `mcpsdk.py` defers uvicorn's package
`__init__` for the same reason). `server()` and `run()` are what `uvicorn.run` does for one process
without reload: build a `Server` from a `Config`, run it, treat Ctrl-C as the end, and exit with
uvicorn's start-failure status when it never started. The `Server` is the caller's, to stop it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from uvicorn.server import Server

STARTUP_FAILURE = 3
"""uvicorn's exit status when a server did not start (`uvicorn.config.STARTUP_FAILURE`)."""


def server(app: Any, **options: Any) -> Server:
    """A uvicorn server for `app` with `uvicorn.Config` options."""
    from uvicorn.config import Config
    from uvicorn.server import Server

    return Server(Config(app, **options))


def run(server: Server) -> None:
    """Serve until the server is told to stop (a signal, `should_exit`); exit 3 if it did not start."""
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    if not server.started:
        sys.exit(STARTUP_FAILURE)
