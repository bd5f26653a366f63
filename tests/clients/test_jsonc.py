"""The JSONC editor: unit cases (layouts people write, comments that look like syntax) and property
tests (random documents with comments between tokens and trailing commas: after an edit the parsed
value is the expected one and every comment is still there)."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpfleet.clients import jsonc
from mcpfleet.clients.document import ShapeError

ENTRY = {"type": "http", "url": "http://127.0.0.1:23967/mcp"}

VSCODE = """// VS Code user MCP servers
{
\t"servers": {
\t\t/* the one I use */
\t\t"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}, // trailing comma next
\t},
\t"inputs": [],
}
"""


def test_insert_then_remove_gives_the_file_back_byte_for_byte() -> None:
    added = jsonc.set_member(VSCODE, ["servers"], "mcpfleet", ENTRY)
    assert jsonc.loads(added)["servers"] == {
        "mcpfleet": ENTRY,
        "github": jsonc.loads(VSCODE)["servers"]["github"],
    }
    assert '\n\t\t"mcpfleet": {\n\t\t\t"type"' in added  # indented like its neighbours (tabs)
    for line in VSCODE.splitlines():
        assert line in added.splitlines()
    assert jsonc.remove_member(added, ["servers"], "mcpfleet") == VSCODE


def test_replace_keeps_the_key_and_the_comments_around_it() -> None:
    text = '{\n  "mcpServers": {\n    "mcpfleet": {"url": "old"}, // ours\n    "x": 1\n  }\n}\n'
    out = jsonc.set_member(text, ["mcpServers"], "mcpfleet", {"url": "new"})
    assert jsonc.loads(out) == {"mcpServers": {"mcpfleet": {"url": "new"}, "x": 1}}
    assert "// ours" in out and out.endswith('\n    "x": 1\n  }\n}\n')


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {"mcpServers": {"mcpfleet": ENTRY}}),
        ("  \n", {"mcpServers": {"mcpfleet": ENTRY}}),
        ("{}", {"mcpServers": {"mcpfleet": ENTRY}}),
        ('{"a": 1}', {"a": 1, "mcpServers": {"mcpfleet": ENTRY}}),
        ('{"mcpServers": {}}', {"mcpServers": {"mcpfleet": ENTRY}}),
        ('{"mcpServers": { /* none yet */ }}', {"mcpServers": {"mcpfleet": ENTRY}}),
        ("// only a comment", {"mcpServers": {"mcpfleet": ENTRY}}),
    ],
)
def test_insert_into_every_starting_point(text: str, expected: dict[str, Any]) -> None:
    out = jsonc.set_member(text, ["mcpServers"], "mcpfleet", ENTRY)
    assert jsonc.loads(out) == expected
    for comment in re.findall(r"//[^\n]*|/\*.*?\*/", text):
        assert comment in out


def test_comment_markers_inside_strings_are_strings() -> None:
    text = '{"a": "// not a comment", "b": "/* nor this */", "c": "\\"}"}'
    assert jsonc.loads(text) == json.loads(text)
    out = jsonc.set_member(text, ["mcpServers"], "m", {"u": "v"})
    assert jsonc.loads(out)["a"] == "// not a comment"


def test_remove_collapses_an_emptied_object_and_keeps_neighbours() -> None:
    text = '{\n  "mcpServers": {\n    "mcpfleet": {"url": "u"}\n  },\n  "z": 2\n}\n'
    assert jsonc.remove_member(text, ["mcpServers"], "mcpfleet") == '{\n  "mcpServers": {},\n  "z": 2\n}\n'
    last = '{\n  "mcpServers": {\n    "a": 1, // keep me\n    "mcpfleet": {"url": "u"}\n  }\n}\n'
    out = jsonc.remove_member(last, ["mcpServers"], "mcpfleet")
    assert jsonc.loads(out, strict=False) == {"mcpServers": {"a": 1}} and "// keep me" in out
    assert jsonc.remove_member('{"x": 1}', ["mcpServers"], "mcpfleet") == '{"x": 1}'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"mcpServers": {', "ends where"),
        ('{"a": 1 "b": 2}', "expected ',' or '}'"),
        ("{'a': 1}", 'unexpected "\'"'),
        ('{"a": /* open', "unterminated /*"),
        ('{"a": "open', "unterminated string"),
        ('{"a": 1} {"b": 2}', "after the document"),
        ('{"a": 01}', "expected ',' or '}'"),
        ("[" * 200 + "]" * 200, "nesting deeper"),
    ],
)
def test_invalid_text_is_refused_with_where(text: str, problem: str) -> None:
    with pytest.raises(jsonc.JsoncError, match=re.escape(problem)):
        jsonc.set_member(text, ["mcpServers"], "mcpfleet", ENTRY)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"mcpServers": []}', "`mcpServers` is a list"),
        ('{"mcpServers": "x"}', "`mcpServers` is a string"),
        ("[]", "the document is a list"),
        ("null", "the document is true / false / null"),
    ],
)
def test_unexpected_shapes_are_refused(text: str, problem: str) -> None:
    with pytest.raises(ShapeError, match=re.escape(problem)):
        jsonc.set_member(text, ["mcpServers"], "mcpfleet", ENTRY)


def test_strict_refuses_comments_and_trailing_commas() -> None:
    with pytest.raises(jsonc.JsoncError, match="a comment at line 1"):
        jsonc.loads('{"a": 1 // c\n}', strict=True)
    with pytest.raises(jsonc.JsoncError, match="a trailing comma"):
        jsonc.loads('{"a": [1,],}', strict=True)
    assert jsonc.loads('{"a": [1,],}') == {"a": [1]}


# -- properties ---------------------------------------------------------------------------------

KEYS = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6).filter(
    lambda k: k != "mcpServers"
)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**9), 10**9)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=10,
)
GAPS = ["", " ", "\n", "\n    ", "\t", "line", "block"]


@st.composite
def documents(draw: st.DrawFn) -> tuple[str, dict[str, Any], list[str]]:
    """(JSONC text, its value, the comments in it) for a root object, maybe with mcpServers."""
    value: dict[str, Any] = draw(st.dictionaries(KEYS, VALUES, max_size=4))
    if draw(st.booleans()):
        others = draw(st.dictionaries(KEYS.filter(lambda k: k != "mcpfleet"), VALUES, max_size=3))
        value = {**value, "mcpServers": others}
    numbers = itertools.count()
    comments: list[str] = []

    def gap() -> str:
        kind = draw(st.sampled_from(GAPS))
        if kind == "line":
            comments.append(f'// note {next(numbers)} "quoted", {{ }}\n')
        elif kind == "block":
            comments.append(f"/* note {next(numbers)} // , ] */")
        else:
            return kind
        return comments[-1]

    def render(v: Any) -> str:
        if isinstance(v, dict):
            parts = [f"{gap()}{json.dumps(k)}{gap()}:{gap()}{render(x)}{gap()}" for k, x in v.items()]
            trailing = "," + gap() if parts and draw(st.booleans()) else ""
            return "{" + ",".join(parts) + trailing + gap() + "}"
        if isinstance(v, list):
            items = [f"{gap()}{render(x)}{gap()}" for x in v]
            trailing = "," + gap() if items and draw(st.booleans()) else ""
            return "[" + ",".join(items) + trailing + gap() + "]"
        return json.dumps(v)

    return gap() + render(value) + gap(), value, comments


@settings(max_examples=150, deadline=None)
@given(documents(), VALUES)
def test_set_member_gives_the_expected_value_and_keeps_every_comment(
    doc: tuple[str, dict[str, Any], list[str]], entry: Any
) -> None:
    text, value, comments = doc
    assert jsonc.loads(text) == value
    out = jsonc.set_member(text, ["mcpServers"], "mcpfleet", entry)
    expected = {**value, "mcpServers": {**value.get("mcpServers", {}), "mcpfleet": entry}}
    assert jsonc.loads(out) == expected
    for comment in comments:
        assert comment in out
    again = jsonc.set_member(out, ["mcpServers"], "mcpfleet", {"url": "other"})
    assert jsonc.loads(again)["mcpServers"]["mcpfleet"] == {"url": "other"}
    removed = jsonc.remove_member(again, ["mcpServers"], "mcpfleet")
    assert jsonc.loads(removed) == {**value, "mcpServers": value.get("mcpServers", {})}
    for comment in comments:
        assert comment in removed
    if "mcpServers" in value:  # only our member went: the rest is the original, up to whitespace
        assert re.sub(r"\s", "", removed) == re.sub(r"\s", "", text)


@settings(max_examples=100, deadline=None)
@given(VALUES)
def test_strict_parse_agrees_with_json(value: Any) -> None:
    for text in (json.dumps(value), json.dumps(value, indent=2)):
        assert jsonc.loads(text, strict=True) == json.loads(text)


def test_a_comment_after_the_opening_brace_stays_on_its_line() -> None:
    text = '{ // my servers\n    "a": 1\n}\n'
    out = jsonc.set_member(text, [], "mcpfleet", {"url": "u"})
    assert out.startswith('{ // my servers\n    "mcpfleet": {\n        "url": "u"\n    },\n    "a": 1')
    assert jsonc.remove_member(out, [], "mcpfleet") == text


def test_crlf_files_get_crlf_lines() -> None:
    text = '{\r\n  "mcpServers": {\r\n    "a": 1\r\n  }\r\n}\r\n'
    out = jsonc.set_member(text, ["mcpServers"], "mcpfleet", {"url": "u"})
    assert "\n" not in out.replace("\r\n", "") and jsonc.loads(out)["mcpServers"]["mcpfleet"] == {"url": "u"}
    assert jsonc.remove_member(out, ["mcpServers"], "mcpfleet") == text
