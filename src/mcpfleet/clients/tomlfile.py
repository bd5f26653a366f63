"""TOML client files (Codex CLI's `config.toml`, `[mcp_servers.NAME]` tables), edited with
`tomlkit`, which keeps comments, order and layout of everything it does not change.

A new server goes in as its own `[mcp_servers.NAME]` table at the end of the file (the way Codex's
documentation writes them), under an implicit `mcp_servers` table when there is none yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable, Table

from mcpfleet.clients.document import FormatError, walk


def _inline(entry: Mapping[str, Any]) -> InlineTable:
    table = tomlkit.inline_table()
    for key, value in entry.items():
        table[key] = _inline(value) if isinstance(value, Mapping) else value
    return table


def _table(entry: Mapping[str, Any]) -> Table:
    """A `[mcp_servers.NAME]` table; nested mappings (headers) as inline tables, as Codex's docs
    write them."""
    table = tomlkit.table()
    for key, value in entry.items():
        table.add(key, _inline(value) if isinstance(value, Mapping) else value)
    return table


def _plain(value: Any) -> Any:
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


class TomlDocument:
    def __init__(self, text: str | None, path: Sequence[str]) -> None:
        self.text, self.path = text or "", tuple(path)
        try:
            self.doc = tomlkit.parse(self.text)
        except TOMLKitError as exc:
            raise FormatError(f"not valid TOML: {exc}") from None
        except RecursionError:
            raise FormatError("not valid TOML: nested too deeply") from None
        walk(self.doc, self.path)

    def servers(self) -> Mapping[str, Any] | None:
        found = walk(self.doc, self.path)
        return None if found is None else {k: _plain(v) for k, v in found.items()}

    def _parent(self) -> Any:
        node: Any = self.doc
        for key in self.path:
            if key not in node:
                node.add(key, tomlkit.table(is_super_table=True))
            node = node[key]
        return node

    def with_entry(self, name: str, entry: Mapping[str, Any]) -> str:
        try:
            parent = self._parent()
            existing = parent.get(name)
            if isinstance(existing, Table):  # keep the table where it is, replace its content
                for key in list(existing.keys()):
                    del existing[key]
                for key, value in _table(entry).items():
                    existing.add(key, value)
            elif isinstance(parent, InlineTable) or existing is not None:
                parent[name] = _inline(entry)  # an inline layout stays inline, in its place
            else:
                parent.add(name, _table(entry))
            return tomlkit.dumps(self.doc)
        except (TOMLKitError, ValueError) as exc:
            raise FormatError(
                f"mcpfleet cannot edit this TOML layout ({exc}); edit [mcp_servers] by hand"
            ) from None

    def without_entry(self, name: str) -> str:
        parent = walk(self.doc, self.path)
        if parent is None or name not in parent:
            return self.text
        try:
            del parent[name]  # type: ignore[attr-defined]
            text = tomlkit.dumps(self.doc)
        except (TOMLKitError, ValueError) as exc:
            raise FormatError(
                f"mcpfleet cannot edit this TOML layout ({exc}); edit [mcp_servers] by hand"
            ) from None
        if text.endswith("\n\n") and not self.text.endswith("\n\n"):  # the blank line before our table
            text = text.rstrip("\n") + "\n"
        return text
