"""The HTTP limit settings: `HttpLimits` (defaults, `MCPFLEET_*` environment variables, the CLI
flag names read by `mcpfleet proxy` / `mcpfleet vmcp serve`) and the default JSON nesting depth.

Standard library only, so `mcpfleet`'s option definitions (`cli/limit_options.py`) do not load
uvicorn or pydantic when the command starts; what enforces the limits is `httplimits`, which
re-exports these. Documented in docs/security.md. Changing a default here means changing it there.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final

# Levels of JSON arrays / objects, the message object itself being level 1 (so a tool's
# `arguments` object is level 3). Far above what real tools use, far below orjson's 254.
DEFAULT_MAX_DEPTH: Final = 64

MiB: Final = 1024 * 1024


@dataclass(frozen=True)
class HttpLimits:
    """Limits of one HTTP server (see docs/security.md for the reasoning behind each default)."""

    # Largest request body accepted (413 above). MCP client messages are small; the largest
    # legitimate ones are sampling answers carrying an image.
    max_body_bytes: int = 4 * MiB
    # Seconds to receive a whole request body once its headers arrived (408 after).
    body_timeout: float = 30.0
    # Seconds from connection open (or from the first byte of a follow-up request) to complete headers.
    header_timeout: float = 10.0
    # Total bytes of request line + headers (431 above).
    max_header_bytes: int = 64 * 1024
    # Seconds an idle keep-alive connection stays open between requests (uvicorn's own timer).
    keep_alive_timeout: int = 5
    # Nesting levels of arrays / objects in a JSON-RPC message (-32600 above).
    max_json_depth: int = DEFAULT_MAX_DEPTH

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) <= 0:
                raise ValueError(f"{FLAGS[f.name]} must be positive, got {getattr(self, f.name)!r}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> HttpLimits:
        """Defaults, overridden by `MCPFLEET_*` variables, overridden by explicit (non-None) values."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get(ENV[f.name])
            if raw is not None and raw.strip():
                kind = int if f.type in ("int", int) else float
                try:
                    values[f.name] = kind(raw)
                except ValueError:
                    raise ValueError(f"{ENV[f.name]}: expected a number, got {raw!r}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return replace(cls(), **values)


# Field -> environment variable / CLI flag (one table so docs, errors and CLIs agree).
ENV: Final = {
    "max_body_bytes": "MCPFLEET_MAX_BODY_BYTES",
    "body_timeout": "MCPFLEET_BODY_TIMEOUT",
    "header_timeout": "MCPFLEET_HEADER_TIMEOUT",
    "max_header_bytes": "MCPFLEET_MAX_HEADER_BYTES",
    "keep_alive_timeout": "MCPFLEET_KEEP_ALIVE_TIMEOUT",
    "max_json_depth": "MCPFLEET_MAX_JSON_DEPTH",
}
FLAGS: Final = {name: "--" + name.replace("_", "-") for name in ENV}
