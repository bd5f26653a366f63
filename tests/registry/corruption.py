"""The source-corruption corpus of the registry: broken documents in both formats, each with the text
the failed sync's `lastError` must contain (the field it names, or the kind of breakage).

Every case is a document that must FAIL the sync (last good data kept); `EMPTY` lists the documents
that are legitimately empty registries (a good sync that empties the source).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.registry.conftest import server_doc

GOOD_UPSTREAM = "com.example/good"
GOOD_TOOLHIVE = "io.github.stacklok/good"


@dataclass(frozen=True)
class Case:
    fmt: str
    label: str
    content: bytes
    expect: str
    """A substring of lastError: the field named, or the kind of breakage."""

    @property
    def id(self) -> str:
        return f"{self.fmt}:{self.label}"


def good(fmt: str) -> bytes:
    if fmt == "upstream":
        return json.dumps(
            [server_doc(GOOD_UPSTREAM, description="still here é")], ensure_ascii=False
        ).encode()
    return json.dumps(
        {"servers": {"good": {"image": "ghcr.io/acme/good:1.0", "description": "still here é"}}},
        ensure_ascii=False,
    ).encode()


def _j(value: Any) -> bytes:
    return json.dumps(value).encode()


def _nested(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"n": value}
    return value


def _bytes_cases(fmt: str) -> list[Case]:
    """Breakage below the JSON level: the same for both formats."""
    doc = good(fmt)
    text = doc.decode()
    cases = [
        Case(fmt, "empty file", b"", "invalid JSON"),
        Case(fmt, "whitespace only", b"  \n\t ", "invalid JSON"),
        Case(fmt, "binary: all byte values", bytes(range(256)), "invalid JSON"),
        Case(fmt, "binary: NUL bytes", b"\x00" * 64, "invalid JSON"),
        Case(fmt, "binary: gzip magic", b"\x1f\x8b\x08\x00" + doc[:40], "invalid JSON"),
        Case(fmt, "binary: PNG header", b"\x89PNG\r\n\x1a\n" + b"\x00" * 32, "invalid JSON"),
        Case(fmt, "encoding: UTF-16 with BOM", text.encode("utf-16"), "invalid JSON"),
        Case(fmt, "encoding: UTF-16-LE", text.encode("utf-16-le"), "invalid JSON"),
        Case(fmt, "encoding: UTF-32", text.encode("utf-32"), "invalid JSON"),
        Case(fmt, "encoding: Latin-1", text.encode("latin-1"), "invalid JSON"),
        Case(fmt, "encoding: UTF-8 BOM", b"\xef\xbb\xbf" + doc, "invalid JSON"),
        Case(fmt, "encoding: lone surrogate escape", doc.replace(b"still", b"\xed\xa0\x80"), "invalid JSON"),
        Case(fmt, "deep nesting: 100,000 arrays", b"[" * 100_000 + b"]" * 100_000, "invalid JSON"),
        Case(fmt, "deep nesting: unclosed", b'{"a":' * 50_000, "invalid JSON"),
        Case(fmt, "trailing garbage", doc + b"}}", "invalid JSON"),
        Case(fmt, "two documents", doc + b"\n" + doc, "invalid JSON"),
        Case(fmt, "NaN literal", b"NaN", "document: expected" if fmt == "toolhive" else "invalid JSON"),
    ]
    for cut in (1, len(doc) // 4, len(doc) // 2, 3 * len(doc) // 4, len(doc) - 1):
        cases.append(Case(fmt, f"truncated at byte {cut}", doc[:cut], "invalid JSON"))
    for scalar in ("42", "null", "true", '"a string"', "-1.5e300"):
        where = "document: expected a JSON object" if fmt == "toolhive" else "expected a JSON object or array"
        cases.append(Case(fmt, f"top level {scalar}", scalar.encode(), where))
    return cases


def _toolhive_cases() -> list[Case]:
    t = "toolhive"
    ok = {"image": "ghcr.io/acme/a:1.0", "description": "a"}
    cases = [
        Case(t, "no servers: {}", b"{}", "servers: required"),
        Case(t, "only remote_servers", _j({"remote_servers": {}}), "servers: required"),
    ]
    for bad in ("x", 5, None, True, [1], [ok], 1.5):
        cases.append(
            Case(t, f"servers is {json.dumps(bad)}", _j({"servers": bad}), "servers: expected an object")
        )
    for bad in ("x", 5, [1]):
        cases.append(
            Case(
                t,
                f"remote_servers is {json.dumps(bad)}",
                _j({"servers": {"a": ok}, "remote_servers": bad}),
                "remote_servers: expected an object",
            )
        )
    entry_cases: list[tuple[str, Any, str]] = [
        ("entry is a number", 5, "servers.a: expected an object"),
        ("entry is an array", [ok], "servers.a: expected an object"),
        ("entry is null", None, "servers.a: expected an object"),
        ("no image", {"description": "a"}, "servers.a.image: required"),
        ("image empty", {**ok, "image": ""}, "servers.a.image: required"),
        ("image a number", {**ok, "image": 5}, "servers.a.image: expected a string"),
        ("image null", {**ok, "image": None}, "servers.a.image: expected a string"),
        ("image an object", {**ok, "image": {"x": 1}}, "servers.a.image: expected a string"),
        ("args a number", {**ok, "args": 5}, "servers.a.args: expected an array"),
        ("args a string", {**ok, "args": "--flag"}, "servers.a.args: expected an array"),
        ("args holds a number", {**ok, "args": ["--ok", 1]}, "servers.a.args[1]: expected a string"),
        ("args holds null", {**ok, "args": [None]}, "servers.a.args[0]: expected a string"),
        ("env_vars a string", {**ok, "env_vars": "X=1"}, "servers.a.env_vars: expected an array"),
        ("env_vars an object", {**ok, "env_vars": {"X": 1}}, "servers.a.env_vars: expected an array"),
        ("env_vars holds a number", {**ok, "env_vars": [5]}, "servers.a.env_vars[0]: expected an object"),
        ("env_vars name a number", {**ok, "env_vars": [{"name": 5}]}, "environmentVariables"),
        ("transport a number", {**ok, "transport": 5}, "servers.a.transport: expected a string"),
        ("transport unknown", {**ok, "transport": "carrier-pigeon"}, "transport"),
        ("description a number", {**ok, "description": 5}, "servers.a.description: expected a string"),
        ("description a list", {**ok, "description": ["a"]}, "servers.a.description: expected a string"),
        (
            "repository_url a number",
            {**ok, "repository_url": 5},
            "servers.a.repository_url: expected a string",
        ),
        ("target_port a string", {**ok, "transport": "sse", "target_port": "80"}, "servers.a.target_port"),
        ("target_port negative", {**ok, "transport": "sse", "target_port": -1}, "servers.a.target_port"),
        ("target_port too big", {**ok, "transport": "sse", "target_port": 70000}, "servers.a.target_port"),
        ("target_port a boolean", {**ok, "transport": "sse", "target_port": True}, "servers.a.target_port"),
        ("version range from tag 1.x", {**ok, "image": "ghcr.io/acme/a:1.x"}, "version"),
        ("version range from tag ^1", {**ok, "image": "ghcr.io/acme/a:^1"}, "version"),
        ("deeply nested metadata", {**ok, "metadata": _nested(200)}, "nested deeper than 64"),
    ]
    for label, entry, expect in entry_cases:
        cases.append(Case(t, label, _j({"servers": {"a": entry}}), expect))
    remote_cases: list[tuple[str, Any, str]] = [
        ("remote without url", {"description": "r"}, "remote_servers.r.url: required"),
        ("remote url a number", {"url": 5}, "remote_servers.r.url: expected a string"),
        ("remote url not a URL", {"url": "not a url"}, "remote_servers.r: not convertible (remotes[0]"),
        ("remote headers a string", {"url": "https://r.example.com/mcp", "headers": "x"}, "headers"),
        ("remote headers hold a number", {"url": "https://r.example.com/mcp", "headers": [5]}, "headers[0]"),
    ]
    for label, entry, expect in remote_cases:
        cases.append(Case(t, label, _j({"servers": {}, "remote_servers": {"r": entry}}), expect))
    cases.append(
        Case(
            t,
            "duplicate names, every one bad",
            b'{"servers": {"a": {"image": 5}, "a": {"image": 6}}}',
            "servers.a.image: expected a string",
        )
    )
    cases.append(
        Case(
            t,
            "same name in servers and remote_servers, both bad",
            _j({"servers": {"a": {"image": ""}}, "remote_servers": {"a": {"url": 5}}}),
            "every entry was rejected",
        )
    )
    return cases


def _upstream_cases() -> list[Case]:
    u = "upstream"
    ok = server_doc("com.example/a")
    cases = [
        Case(u, "servers is a number", _j({"servers": 5}), "servers: expected an array"),
        Case(u, "servers is a string", _j({"servers": "x"}), "servers: expected an array"),
        Case(u, "servers is null", _j({"servers": None}), "servers: expected an array"),
        Case(u, "servers is a non-empty object", _j({"servers": {"a": ok}}), "servers: expected an array"),
        Case(u, "data is a number", _j({"data": 5}), "data: expected an object"),
        Case(u, "data without servers", _j({"data": {}}), "data.servers: required"),
        Case(u, "data.servers a string", _j({"data": {"servers": "x"}}), "data.servers: expected an array"),
        Case(u, "empty object: no name", b"{}", "every entry was rejected"),
    ]
    entry_cases: list[tuple[str, Any, str]] = [
        ("entry a number", 5, "entry is not a JSON object"),
        ("entry null", None, "entry is not a JSON object"),
        ("entry a string", "com.example/a", "entry is not a JSON object"),
        ("entry an array", [ok], "entry is not a JSON object"),
        ("no name", {k: v for k, v in ok.items() if k != "name"}, "name"),
        ("name a number", {**ok, "name": 5}, "name"),
        ("name without namespace", {**ok, "name": "no-slash"}, "name"),
        ("name empty", {**ok, "name": ""}, "name"),
        ("no version", {k: v for k, v in ok.items() if k != "version"}, "version"),
        ("version a number", {**ok, "version": 1}, "version"),
        ("version empty", {**ok, "version": ""}, "version: must not be empty"),
        ("version latest", {**ok, "version": "latest"}, "version: 'latest'"),
        ("version range ^", {**ok, "version": "^1.2.3"}, "version range"),
        ("version range ~", {**ok, "version": "~1.2"}, "version range"),
        ("version range >=", {**ok, "version": ">=1.0.0"}, "version range"),
        ("version range 1.x", {**ok, "version": "1.x"}, "version range"),
        ("version range 1.*", {**ok, "version": "1.*"}, "version range"),
        ("version range hyphen", {**ok, "version": "1.0 - 2.0"}, "version range"),
        ("version range or", {**ok, "version": "1.0 || 2.0"}, "version range"),
        ("version with spaces", {**ok, "version": " 1.0 "}, "version: must not hold spaces"),
        ("version control char", {**ok, "version": "1.0\n"}, "version"),
        ("version too long", {**ok, "version": "1." * 200}, "version"),
        ("description a number", {**ok, "description": 5}, "description"),
        ("description too long", {**ok, "description": "x" * 1000}, "description"),
        ("remotes a string", {**ok, "remotes": "https://x"}, "remotes"),
        ("remotes hold a number", {**ok, "remotes": [5]}, "remotes"),
        ("remote type a number", {**ok, "remotes": [{"type": 5, "url": "https://x.example.com"}]}, "remotes"),
        ("remote without url", {**ok, "remotes": [{"type": "streamable-http"}]}, "remotes"),
        ("packages a string", {**ok, "packages": "npm"}, "packages"),
        ("package registryType a number", {**ok, "packages": [{"registryType": 5}]}, "packages"),
        ("repository a string", {**ok, "repository": "https://x"}, "repository"),
        ("$schema a number", {**ok, "$schema": 5}, "$schema"),
        ("deeply nested _meta", {**ok, "_meta": _nested(300)}, "nested deeper than 64"),
        ("wrapped server a number", {"server": 5, "_meta": {}}, "schema violation"),
    ]
    for label, entry, expect in entry_cases:
        cases.append(Case(u, label, _j([entry]), expect))
        if label.startswith("version"):
            # The same entry in the API-page layout.
            cases.append(Case(u, f"{label} (servers page)", _j({"servers": [{"server": entry}]}), expect))
    cases.append(
        Case(
            u,
            "duplicates, every one bad",
            _j([{**ok, "version": "^1"}, {**ok, "version": "^1"}]),
            "version range",
        )
    )
    return cases


def corpus() -> list[Case]:
    """Every failing case, both formats."""
    return [*_bytes_cases("upstream"), *_bytes_cases("toolhive"), *_upstream_cases(), *_toolhive_cases()]


EMPTY: list[tuple[str, bytes]] = [
    ("upstream", b"[]"),
    ("upstream", b'{"servers": []}'),
    ("upstream", b'{"servers": {}}'),
    ("upstream", b'{"data": {"servers": []}}'),
    ("toolhive", b'{"servers": {}}'),
    ("toolhive", b'{"servers": []}'),
    ("toolhive", b'{"servers": {}, "remote_servers": {}}'),
]
"""Legitimately empty registries: a good sync that leaves the source with no entries."""
