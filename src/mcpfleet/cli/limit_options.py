"""The HTTP limit flags shared by `mcpfleet proxy` and `mcpfleet vmcp serve` (docs/security.md).

Each flag defaults to its `MCPFLEET_*` environment variable, then to `HttpLimits`' default; the
help text names both, so `--help` is the reference.
"""

from __future__ import annotations

from mcpfleet.cli.options import Opt
from mcpfleet.httpsettings import ENV, HttpLimits

_D = HttpLimits()

MAX_BODY_BYTES = Opt(
    None,
    "--max-body-bytes",
    help=f"Largest request body accepted, bytes (413 above). Default: ${ENV['max_body_bytes']} or "
    f"{_D.max_body_bytes}.",
)
BODY_TIMEOUT = Opt(
    None,
    "--body-timeout",
    help=f"Seconds to receive a request body (408 after). Default: ${ENV['body_timeout']} or {_D.body_timeout:g}.",
)
HEADER_TIMEOUT = Opt(
    None,
    "--header-timeout",
    help=f"Seconds for a connection to send complete request headers (then closed). Default: "
    f"${ENV['header_timeout']} or {_D.header_timeout:g}.",
)
MAX_HEADER_BYTES = Opt(
    None,
    "--max-header-bytes",
    help=f"Largest request line + headers, bytes (431 above). Default: ${ENV['max_header_bytes']} or "
    f"{_D.max_header_bytes}.",
)
KEEP_ALIVE_TIMEOUT = Opt(
    None,
    "--keep-alive-timeout",
    help=f"Seconds an idle keep-alive connection stays open. Default: ${ENV['keep_alive_timeout']} or "
    f"{_D.keep_alive_timeout}.",
)
MAX_JSON_DEPTH = Opt(
    None,
    "--max-json-depth",
    help=f"Deepest JSON nesting accepted in a message (JSON-RPC error -32600 above). Default: "
    f"${ENV['max_json_depth']} or {_D.max_json_depth}.",
)


def limits(
    max_body_bytes: int | None,
    body_timeout: float | None,
    header_timeout: float | None,
    max_header_bytes: int | None,
    keep_alive_timeout: int | None,
    max_json_depth: int | None,
) -> HttpLimits:
    """The limits from flags, environment and defaults; a bad value is a usage error naming it."""
    try:
        return HttpLimits.from_env(
            max_body_bytes=max_body_bytes,
            body_timeout=body_timeout,
            header_timeout=header_timeout,
            max_header_bytes=max_header_bytes,
            keep_alive_timeout=keep_alive_timeout,
            max_json_depth=max_json_depth,
        )
    except ValueError as exc:
        import typer  # only on this error: the fast start path never loads typer

        raise typer.BadParameter(str(exc)) from None
