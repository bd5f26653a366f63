"""A small JSON-with-comments editor: parse, then replace / insert / remove one object member,
keeping every other byte of the file as it was.

VS Code's and Zed's settings files are JSONC: `//` and `/* */` comments and trailing commas are
allowed, and people keep notes in them. No well-kept Python library edits such a file without
dropping the comments, so this module does exactly what `mcpfleet client setup` needs and no more:

- `tokenize` splits the text into tokens with their byte spans, skipping whitespace and comments
  (a `//` inside a string is part of the string, not a comment);
- `parse` builds a tree of nodes (each with its span) and the plain Python value, bounded in depth;
- `set_member` / `remove_member` edit the text at the span of one member of the object found under
  a path of keys. Nothing outside the edited member changes: a new member is inserted first in its
  object (so the comma goes after it and no existing line is touched), a replaced member keeps its
  key and surrounding comments, a removed member takes its own line and comma with it.

Strict JSON (Claude Desktop, Cursor, ... read their files with a plain JSON parser) is the same
grammar without comments or trailing commas: `parse(text, strict=True)` refuses those.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcpfleet.clients.document import FormatError, ShapeError

MAX_DEPTH = 128
"""Nesting deeper than this is refused (a settings file is a few levels deep; recursion is bounded)."""

_TOKEN = re.compile(
    r"""
    (?P<ws>[ \t\r\n\ufeff]+)
  | (?P<line>//[^\n]*)
  | (?P<block>/\*.*?\*/)
  | (?P<string>"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*")
  | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<literal>true|false|null)
  | (?P<punct>[{}\[\]:,])
    """,
    re.VERBOSE | re.DOTALL,
)


class JsoncError(FormatError):
    """The text is not valid JSON / JSONC; the message names the line and column."""


@dataclass(frozen=True)
class Token:
    kind: str  # string, number, literal, or the punctuation character itself
    start: int
    end: int


@dataclass
class Node:
    """A value of the document and its span; objects keep their members in order."""

    kind: str  # object, array, string, number, literal
    start: int
    end: int
    members: list[Member] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)
    value: Any = None


@dataclass
class Member:
    key: str
    key_start: int
    value: Node
    comma: int | None = None  # position of the comma after the value, if any


def _where(text: str, pos: int) -> str:
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"line {line}, column {column}"


def tokenize(text: str, strict: bool = False) -> list[Token]:
    """The tokens of `text`; comments and whitespace are skipped (refused when `strict`)."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            what = "an unterminated string" if text[pos] == '"' else f"unexpected {text[pos]!r}"
            if text.startswith("/*", pos):
                what = "an unterminated /* comment"
            raise JsoncError(f"{what} at {_where(text, pos)}")
        kind = match.lastgroup or ""
        if kind in ("line", "block") and strict:
            raise JsoncError(f"a comment at {_where(text, pos)} (this client reads plain JSON)")
        if kind in ("string", "number", "literal"):
            tokens.append(Token(kind, pos, match.end()))
        elif kind == "punct":
            tokens.append(Token(match.group(), pos, match.end()))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, text: str, tokens: list[Token], strict: bool) -> None:
        self.text, self.tokens, self.strict, self.i = text, tokens, strict, 0

    def peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _expect(self, kinds: str, what: str) -> Token:
        token = self.peek()
        if token is None:
            raise JsoncError(f"the text ends where {what} was expected")
        if token.kind not in kinds.split():
            found = self.text[token.start : token.end][:20]
            raise JsoncError(f"expected {what} at {_where(self.text, token.start)}, found {found!r}")
        self.i += 1
        return token

    def value(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            token = self.peek()
            raise JsoncError(
                f"nesting deeper than {MAX_DEPTH} at {_where(self.text, token.start if token else 0)}"
            )
        token = self._expect("{ [ string number literal", "a value")
        if token.kind == "{":
            return self._object(token, depth)
        if token.kind == "[":
            return self._array(token, depth)
        return Node(token.kind, token.start, token.end, value=json.loads(self.text[token.start : token.end]))

    def _trailing(self, closer: str, comma: Token) -> bool:
        """A `,` directly before the closer: allowed in JSONC, refused in strict JSON."""
        token = self.peek()
        if token is None or token.kind != closer:
            return False
        if self.strict:
            raise JsoncError(
                f"a trailing comma at {_where(self.text, comma.start)} (this client reads plain JSON)"
            )
        return True

    def _object(self, opening: Token, depth: int) -> Node:
        node = Node("object", opening.start, opening.end, value={})
        while (token := self.peek()) is not None and token.kind != "}":
            key = self._expect("string", "a member name in double quotes")
            self._expect(":", "':'")
            member = Member(json.loads(self.text[key.start : key.end]), key.start, self.value(depth + 1))
            node.members.append(member)
            node.value[member.key] = member.value.value  # the last of duplicate keys wins, as in JSON.parse
            after = self._expect(", }", "',' or '}'")
            if after.kind == "}":
                self.i -= 1
                break
            member.comma = after.start
            if self._trailing("}", after):
                break
        node.end = self._expect("}", "'}'").end
        return node

    def _array(self, opening: Token, depth: int) -> Node:
        node = Node("array", opening.start, opening.end, value=[])
        while (token := self.peek()) is not None and token.kind != "]":
            item = self.value(depth + 1)
            node.items.append(item)
            node.value.append(item.value)
            after = self._expect(", ]", "',' or ']'")
            if after.kind == "]":
                self.i -= 1
                break
            if self._trailing("]", after):
                break
        node.end = self._expect("]", "']'").end
        return node


def parse(text: str, strict: bool = False) -> Node | None:
    """The document's root node; None when the text holds no value (empty, or comments only)."""
    tokens = tokenize(text, strict)
    if not tokens:
        return None
    parser = _Parser(text, tokens, strict)
    root = parser.value(0)
    extra = parser.peek()
    if extra is not None:
        raise JsoncError(f"unexpected text after the document at {_where(text, extra.start)}")
    return root


def loads(text: str, strict: bool = False) -> Any:
    """The plain Python value of `text` (None when it holds none)."""
    root = parse(text, strict)
    return None if root is None else root.value


# -- editing ------------------------------------------------------------------------------------


def _indent_unit(text: str) -> str:
    """Tabs if the file indents with tabs, else the smallest indentation seen (2 by default)."""
    widths = [len(m.group(1)) for m in re.finditer(r"\n( +)[\"}\]]", text)]
    if re.search(r"\n\t+[\"}\]]", text) and not widths:
        return "\t"
    return " " * min(min(widths, default=2), 8)


def _line_indent(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    return re.match(r"[ \t]*", text[start:pos]).group()  # type: ignore[union-attr]


def _alone_on_line(text: str, pos: int) -> bool:
    start = text.rfind("\n", 0, pos) + 1
    return text[start:pos].strip() == ""


def _member_indent(text: str, node: Node, unit: str) -> str:
    if node.members and _alone_on_line(text, node.members[0].key_start):
        return _line_indent(text, node.members[0].key_start)
    return _line_indent(text, node.start) + unit


def _dump(value: Any, indent: str, unit: str) -> str:
    """`value` as JSON laid out like the file: nested lines start with `indent`."""
    dumped = json.dumps(value, indent=unit, ensure_ascii=False)
    return dumped.replace("\n", "\n" + indent)


def _find(root: Node | None, path: Sequence[str]) -> tuple[Node | None, list[str]]:
    """The deepest object on `path` that exists and the keys still missing below it."""
    if root is None:
        return None, list(path)
    if root.kind != "object":
        raise ShapeError(f"the document is {_a(root.kind)}, expected an object")
    node = root
    for depth, key in enumerate(path):
        member = _last(node, key)
        if member is None:
            return node, list(path[depth:])
        if member.value.kind != "object":
            where = ".".join(path[: depth + 1])
            raise ShapeError(f"`{where}` is {_a(member.value.kind)}, expected an object")
        node = member.value
    return node, []


def _a(kind: str) -> str:
    return {"array": "a list", "object": "an object", "literal": "true / false / null"}.get(kind, f"a {kind}")


def _last(node: Node, key: str) -> Member | None:
    found = [m for m in node.members if m.key == key]
    return found[-1] if found else None


def set_member(text: str, path: Sequence[str], key: str, value: Any, strict: bool = False) -> str:
    """`text` with `path…[key]` set to `value`; objects missing on the path are created. New lines
    end like the file's (CRLF when it uses CRLF)."""
    root = parse(text, strict)
    node, missing = _find(root, path)
    nested: Any = value
    for name in reversed([*missing, key]):
        nested = {name: nested}
    newline = "\r\n" if "\r\n" in text else "\n"
    start, end, piece = _insertion(text, node, missing, nested, _indent_unit(text))
    return text[:start] + piece.replace("\n", newline) + text[end:]


def _insertion(
    text: str, node: Node | None, missing: list[str], nested: Any, unit: str
) -> tuple[int, int, str]:
    """Where and what to splice into `text`: (start, end, new text with `\\n` line ends)."""
    if node is None:  # no document yet (or comments only): append one
        body = _dump(nested, "", unit) + "\n"
        if not text.strip():
            return 0, len(text), body
        return len(text), len(text), ("" if text.endswith("\n") else "\n") + body
    ((name, inner),) = nested.items()
    existing = None if missing else _last(node, name)
    if existing is not None:
        indent = _line_indent(text, existing.key_start)
        return existing.value.start, existing.value.end, _dump(inner, indent, unit)
    indent = _member_indent(text, node, unit)
    member = f"\n{indent}{json.dumps(name, ensure_ascii=False)}: {_dump(inner, indent, unit)}"
    after_brace = node.start + 1
    if node.members:  # first in the object: the comma goes after it, no existing line changes
        alone = _alone_on_line(text, node.members[0].key_start)
        rest_of_line = re.match(r"[ \t]*(?://[^\n]*)?\r?\n", text[after_brace:])
        if rest_of_line and alone:  # on its own line, below `{` and its comment
            at = after_brace + rest_of_line.end()
            return at, at, member[1:] + ",\n"
        return after_brace, after_brace, member + ("," if alone else ", ")
    if text[after_brace : node.end - 1].strip() == "":  # `{}` or `{ }`: lay the object out on lines
        return after_brace, node.end - 1, member + "\n" + _line_indent(text, node.start)
    return after_brace, after_brace, member  # comments only inside: kept after it


def _line_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Widen [start, end) to whole lines when nothing but whitespace shares them."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if text[line_start:start].strip() == "" and text[end:line_end].strip() == "":
        return line_start, min(line_end + 1, len(text))
    return start, end


def remove_member(text: str, path: Sequence[str], key: str, strict: bool = False) -> str:
    """`text` without `path…[key]` (every member of that name); unchanged when absent. An object
    left with nothing but whitespace inside becomes `{}`."""
    removed = False
    while True:
        root = parse(text, strict)
        node, missing = _find(root, path)
        if node is None or missing:
            return text
        index = next((i for i in range(len(node.members) - 1, -1, -1) if node.members[i].key == key), None)
        if index is None:
            inside = text[node.start + 1 : node.end - 1]
            if removed and not node.members and inside and not inside.strip():
                text = text[: node.start + 1] + text[node.end - 1 :]
            return text
        removed = True
        member = node.members[index]
        if member.comma is not None:
            start, end = _line_span(text, member.key_start, member.comma + 1)
            text = text[:start] + text[end:]
            continue
        start, end = _line_span(text, member.key_start, member.value.end)
        text = text[:start] + text[end:]
        if index > 0 and (comma := node.members[index - 1].comma) is not None:
            text = text[:comma] + text[comma + 1 :]
