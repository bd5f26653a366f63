"""Reading one manifest file within limits: size, nesting depth and alias expansion.

Manifests are hostile input like any other: a folder can hold a 2 GB file, a binary, a YAML
"billion laughs" (nine anchors of nine aliases each expand to 10^9 nodes) or 100,000 nested
brackets (PyYAML's composer recurses per level). Each limit below turns one of them into a clear
per-file error instead of a hang, a memory blow-up or a crash of the reconcile pass. Aliases are
kept (Kubernetes accepts them too), but the size of a document *after* expansion is bounded.

Defaults are generous for real manifests (the largest examples are a few KiB, 10 levels deep) and
can be changed with environment variables of `mcpfleet up` (docs/security.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

MAX_FILE_BYTES_ENV = "MCPFLEET_MANIFEST_MAX_BYTES"
MAX_FILES_ENV = "MCPFLEET_MANIFEST_MAX_FILES"
MAX_DEPTH_ENV = "MCPFLEET_MANIFEST_MAX_DEPTH"
MAX_NODES_ENV = "MCPFLEET_MANIFEST_MAX_NODES"
DEPTH_CEILING = 200


@dataclass(frozen=True)
class ManifestLimits:
    """Bounds on what `mcpfleet up` reads from the manifests folder."""

    max_file_bytes: int = 1024 * 1024
    """One manifest file; Kubernetes stores at most ~1.5 MiB per object, a manifest file is rarely 100 KiB."""
    max_files: int = 1000
    """YAML files under DIR; files past the limit (in sort order) are reported, not read."""
    max_depth: int = 100
    """Nesting of mappings and sequences in one document."""
    max_nodes: int = 20_000
    """Nodes of one file, counted while parsing and again after alias expansion (what the models and
    the state would hold). PyYAML parses about 10,000 nodes a second on a busy core, so this also
    bounds the time one file can take. The text of the scalars after expansion is bounded by
    `max_file_bytes`."""

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ManifestLimits:
        """The defaults, each overridden by its environment variable when set to a positive integer."""
        env = dict(os.environ) if environ is None else environ
        default = cls()

        def pick(name: str, value: int) -> int:
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                return value
            try:
                parsed = int(raw)
            except ValueError:
                raise ValueError(f"${name} must be a positive integer, got {raw!r}") from None
            if parsed <= 0:
                raise ValueError(f"${name} must be a positive integer, got {raw!r}")
            if name == MAX_DEPTH_ENV and parsed > DEPTH_CEILING:
                # The YAML composer and the models recurse per level: beyond this Python's stack ends.
                raise ValueError(f"${name} must be at most {DEPTH_CEILING}, got {raw!r}")
            return parsed

        return cls(
            max_file_bytes=pick(MAX_FILE_BYTES_ENV, default.max_file_bytes),
            max_files=pick(MAX_FILES_ENV, default.max_files),
            max_depth=pick(MAX_DEPTH_ENV, default.max_depth),
            max_nodes=pick(MAX_NODES_ENV, default.max_nodes),
        )


class ManifestTooLarge(ValueError):
    """A file beyond one of the limits; the message names the limit and how to raise it."""


def read_text(path: Path, limits: ManifestLimits) -> str:
    """The file as UTF-8 text, reading at most `max_file_bytes + 1` bytes (a huge file is never slurped).

    Raises OSError (unreadable), UnicodeDecodeError (binary) or ManifestTooLarge.
    """
    # O_NONBLOCK: a FIFO swapped in after the listing must not block the loader forever.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limits.max_file_bytes + 1)
    if len(data) > limits.max_file_bytes:
        raise ManifestTooLarge(
            f"larger than {limits.max_file_bytes} bytes (set ${MAX_FILE_BYTES_ENV} to raise the limit)"
        )
    return data.decode("utf-8")


def _too_many_nodes(limit: int, when: str = "") -> str:
    return f"more than {limit} YAML nodes{when} (set ${MAX_NODES_ENV} to raise the limit)"


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that stops composing past `max_depth` levels or `max_nodes` nodes (before the
    recursion goes deeper or the parse runs longer)."""

    max_depth = 100
    max_nodes = 20_000

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._nodes = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        self._nodes += 1
        try:
            if self._nodes > self.max_nodes:
                raise ManifestTooLarge(_too_many_nodes(self.max_nodes))
            if self._depth > self.max_depth:
                raise ManifestTooLarge(
                    f"nested deeper than {self.max_depth} levels (set ${MAX_DEPTH_ENV} to raise the limit)"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


@dataclass
class _Size:
    """A subtree once aliases are expanded: nodes, depth, and characters of its scalars."""

    nodes: int = 0
    depth: int = 0
    chars: int = 0


def _expanded(node: Node, memo: dict[int, _Size], open_nodes: set[int], budget: _Size) -> _Size:
    """The size of `node` with every alias expanded, memoised per node (linear in the composed graph).

    Nodes: "billion laughs". Characters: one long string aliased 10,000 times is only 10,000 nodes
    but gigabytes once stored as JSON. Depth: an alias can put a deep subtree under another deep one.
    Anchors come before their aliases, so the walk meets each node first where it is defined: the
    recursion is bounded by the depth limit already enforced while composing.
    """
    known = memo.get(id(node))
    if known is not None:
        return known
    if id(node) in open_nodes:
        raise ManifestTooLarge("a recursive alias (a node that contains itself) cannot be expanded")
    open_nodes.add(id(node))
    size = _Size(nodes=1, depth=0, chars=len(node.value) if isinstance(node, ScalarNode) else 0)
    children: list[Node] = []
    if isinstance(node, SequenceNode):
        children = list(node.value)
    elif isinstance(node, MappingNode):
        children = [part for pair in node.value for part in pair]
    for child in children:
        sub = _expanded(child, memo, open_nodes, budget)
        size.nodes += sub.nodes
        size.chars += sub.chars
        size.depth = max(size.depth, sub.depth)
        if size.nodes > budget.nodes or size.chars > budget.chars:
            break  # already over: the caller refuses the document
    size.depth += 1
    open_nodes.discard(id(node))
    memo[id(node)] = size
    return size


def load_documents(text: str, limits: ManifestLimits) -> list[Any]:
    """Every YAML document of `text` as plain Python data, within the depth and node limits.

    Raises yaml.YAMLError (syntax) or ManifestTooLarge.
    """
    bounds = {"max_depth": limits.max_depth, "max_nodes": limits.max_nodes}
    loader_class = type("BoundedLoader", (_BoundedLoader,), bounds)
    loader = loader_class(text)
    documents: list[Any] = []
    used = _Size()
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            budget = _Size(limits.max_nodes - used.nodes + 1, 0, limits.max_file_bytes - used.chars + 1)
            size = _expanded(node, {}, set(), budget)
            used.nodes += size.nodes
            used.chars += size.chars
            if size.depth > limits.max_depth:
                raise ManifestTooLarge(
                    f"nested deeper than {limits.max_depth} levels once aliases are expanded "
                    f"(set ${MAX_DEPTH_ENV} to raise the limit)"
                )
            if used.nodes > limits.max_nodes:
                raise ManifestTooLarge(_too_many_nodes(limits.max_nodes, " once aliases are expanded"))
            if used.chars > limits.max_file_bytes:
                raise ManifestTooLarge(
                    f"larger than {limits.max_file_bytes} characters once aliases are expanded "
                    f"(set ${MAX_FILE_BYTES_ENV} to raise the limit)"
                )
            documents.append(loader.construct_document(node))
    finally:
        loader.dispose()
    return documents
