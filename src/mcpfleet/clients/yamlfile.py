"""YAML client files (Goose's `config.yaml`, `extensions:` keyed by name), edited with
ruamel.yaml's round-trip mode, which keeps comments, key order and quoting (PyYAML drops comments).

Aliases are not expanded when reading (a "billion laughs" file stays small in memory), and only the
one entry mcpfleet owns is ever converted to plain values.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from mcpfleet.clients.document import FormatError, walk


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=2, offset=0)  # as Goose (serde_yaml) writes it
    return yaml


MAX_NODES = 10_000
"""Values converted to plain Python per read: aliases are shared in the parsed document, but a
conversion would copy each use, so a small "billion laughs" file is refused here."""


def _plain(value: Any, budget: list[int]) -> Any:
    budget[0] -= 1
    if budget[0] < 0:
        raise FormatError(f"more than {MAX_NODES} values under the servers key (aliases expanded)")
    if isinstance(value, Mapping):
        return {str(k): _plain(v, budget) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, budget) for v in value]
    return value


class YamlDocument:
    def __init__(self, text: str | None, path: Sequence[str]) -> None:
        self.text, self.path = text or "", tuple(path)
        try:
            loaded = _yaml().load(self.text)
        except YAMLError as exc:
            raise FormatError(f"not valid YAML: {' '.join(str(exc).split())}") from None
        except RecursionError:
            raise FormatError("not valid YAML: nested too deeply") from None
        self.empty = loaded is None  # empty, or comments only: kept above what we add
        self.doc: Any = CommentedMap() if loaded is None else loaded
        if isinstance(self.doc, CommentedMap) and self.path and self.doc.get(self.path[0], 0) is None:
            self.doc[self.path[0]] = CommentedMap()  # `extensions:` with nothing under it: empty
        walk(self.doc, self.path)

    def servers(self) -> Mapping[str, Any] | None:
        found = walk(self.doc, self.path)
        budget = [MAX_NODES]
        return None if found is None else {str(k): _plain(v, budget) for k, v in found.items()}

    def _dump(self) -> str:
        out = io.StringIO()
        _yaml().dump(self.doc, out)
        if self.empty and self.text.strip():
            return self.text + ("" if self.text.endswith("\n") else "\n") + out.getvalue()
        return out.getvalue()

    def with_entry(self, name: str, entry: Mapping[str, Any]) -> str:
        node = self.doc
        for key in self.path:
            if key not in node:
                node[key] = CommentedMap()
            node = node[key]
        node[name] = CommentedMap(_plain(entry, [MAX_NODES]))
        return self._dump()

    def without_entry(self, name: str) -> str:
        parent = walk(self.doc, self.path)
        if parent is None or name not in parent:
            return self.text
        del parent[name]  # type: ignore[attr-defined]
        return self._dump()
