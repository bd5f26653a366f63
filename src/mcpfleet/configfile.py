"""Bounded reading of the data plane's own config files, and field paths of their validation errors.

Shared by the proxy's run config, the authz (Cedar) config and the webhook config: each reads a file
the renderer wrote, at most one byte over its limit (a huge or endless file is never held whole), and
names the failing field in pydantic's dotted form (`cedar.policies.3`). `parse_json_or_yaml` reads a
config that may be either (the registry's, incoming-auth files) without loading PyYAML for JSON.
"""

from __future__ import annotations

import json
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


class DocumentError(ValueError):
    """A document that is neither JSON nor YAML; the message is the YAML parser's."""


def parse_json_or_yaml(text: str) -> Any:
    """A JSON or YAML document as plain data. JSON is YAML, and parses to the same data (where
    the two differ, e.g. `1e5`, as JSON says): it is read with the standard library, and PyYAML
    (~15 ms of import, at every service start) loads only for a document that is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DocumentError(str(exc)) from None
