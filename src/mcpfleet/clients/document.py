"""What every file format module gives `setup`: a parsed document whose servers container can be
read, and the file's text with our entry set or removed (everything else kept).

`servers` walks the key path (`mcpServers`, `servers`, `context_servers`, `mcp_servers`,
`extensions`) the same way for every format: a missing key means "no servers yet", a value that is
not a mapping is an unexpected shape, refused rather than overwritten.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class FormatError(ValueError):
    """The text is not valid in its format; the message says where."""


class ShapeError(FormatError):
    """Valid text, but a value on the key path is not a mapping (e.g. `mcpServers` is a list)."""


class Document(Protocol):
    """A client file, parsed."""

    def servers(self) -> Mapping[str, Any] | None:
        """The plain values under the key path; None when the path does not exist yet."""

    def with_entry(self, name: str, entry: Mapping[str, Any]) -> str:
        """The file's text with `name` set to `entry` under the key path."""

    def without_entry(self, name: str) -> str:
        """The file's text without `name` under the key path (unchanged when absent)."""


def kind_of(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def walk(root: Any, path: Sequence[str]) -> Mapping[str, Any] | None:
    """The mapping at `path` under `root` (a mapping); None if a key is missing; ShapeError if a
    value on the way is not a mapping."""
    if root is None:
        return None
    if not isinstance(root, Mapping):
        raise ShapeError(f"the document is {kind_of(root)}, expected a mapping")
    node: Mapping[str, Any] = root
    for depth, key in enumerate(path):
        if key not in node:
            return None
        value = node[key]
        if not isinstance(value, Mapping):
            raise ShapeError(f"`{'.'.join(path[: depth + 1])}` is {kind_of(value)}, expected a mapping")
        node = value
    return node
