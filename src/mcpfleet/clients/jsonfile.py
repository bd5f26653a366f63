"""JSON and JSONC client files (`mcpServers`, `servers`, `context_servers`), edited in place by
`jsonc` so other entries, comments and layout stay byte for byte.

`strict` files (read by their client with a plain JSON parser) refuse comments and trailing commas:
such a file does not load in its client either, and mcpfleet will not add an entry to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mcpfleet.clients import jsonc
from mcpfleet.clients.document import walk


class JsonDocument:
    def __init__(self, text: str | None, path: Sequence[str], strict: bool) -> None:
        self.text, self.path, self.strict = text or "", tuple(path), strict
        self.value = jsonc.loads(self.text, strict)
        walk(self.value, self.path)  # refuse an unexpected shape now, before any edit

    def servers(self) -> Mapping[str, Any] | None:
        return walk(self.value, self.path)

    def with_entry(self, name: str, entry: Mapping[str, Any]) -> str:
        return jsonc.set_member(self.text, self.path, name, dict(entry), self.strict)

    def without_entry(self, name: str) -> str:
        return jsonc.remove_member(self.text, self.path, name, self.strict)
