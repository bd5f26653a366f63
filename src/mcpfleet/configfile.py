"""Bounded reading of the data plane's own config files, and field paths of their validation errors.

Shared by the proxy's run config, the authz (Cedar) config and the webhook config: each reads a file
the renderer wrote, at most one byte over its limit (a huge or endless file is never held whole), and
names the failing field in pydantic's dotted form (`cedar.policies.3`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_bounded(file: Path, limit: int, what: str, error: type[Exception]) -> bytes:
    """The bytes of `file`; raises `error` naming the file when it cannot be read or exceeds `limit`."""
    try:
        with file.open("rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise error(f"{file}: cannot read the {what}: {exc.strerror or exc}") from exc
    if len(raw) > limit:
        raise error(f"{file}: larger than {limit} bytes")
    return raw


def error_location(error: Any) -> str:
    """The dotted field path of one pydantic error (`(top level)` for the document itself)."""
    return ".".join(str(part) for part in error["loc"]) or "(top level)"
