"""Formats: the ToolHive converter (every entry of the real file, both ways) and upstream parsing."""

from __future__ import annotations

import json

import orjson

from mcpfleet.registry.entry import PUBLISHER_META, TOOLHIVE_NAMESPACE
from mcpfleet.registry.formats import parse
from mcpfleet.registry.formats.toolhive import upstream_to_toolhive
from tests.reference import SERVER_EXAMPLES, TOOLHIVE_FILE, data_files
from tests.registry.conftest import server_doc
from tests.registry.schemas import server_schema


def test_every_toolhive_server_converts_validates_and_round_trips() -> None:
    raw = TOOLHIVE_FILE.read_bytes()
    original = json.loads(raw)
    assert len(original["servers"]) == 79 and len(original["remote_servers"]) == 23
    result = parse("toolhive", "th", raw)
    assert result.errors == []
    assert len(result.entries) == 102
    seen_remote = 0
    for entry in result.entries:
        assert not list(server_schema().iter_errors(entry.server)), entry.name
        assert entry.name.startswith("io.github.stacklok/")
        key, back, remote = upstream_to_toolhive(entry.server)
        table = original["remote_servers" if remote else "servers"]
        assert back == table[key], key
        seen_remote += remote
        if remote:
            assert entry.server["remotes"][0]["url"] == table[key]["url"]
        else:
            package = entry.server["packages"][0]
            assert package["registryType"] == "oci" and package["identifier"] == table[key]["image"]
        ext = entry.server["_meta"][PUBLISHER_META][TOOLHIVE_NAMESPACE]
        assert set(ext) == {table[key]["url"] if remote else table[key]["image"]}
        assert next(iter(ext.values()))["tools"] == table[key]["tools"]
    assert seen_remote == 23


def test_toolhive_deprecated_status_and_bad_entries_reported_per_entry() -> None:
    doc = {
        "servers": {
            "good": {
                "image": "ghcr.io/x/good:1.2.3",
                "description": "ok",
                "transport": "stdio",
                "status": "Deprecated",
            },
            "no-image": {"description": "missing image"},
            "bad name!": {"image": "ghcr.io/x/bad:1", "description": "bad name", "transport": "stdio"},
        },
        "remote_servers": {
            "good": {"url": "https://x.example.com/mcp", "description": "dup", "transport": "sse"},
            "r": {
                "url": "https://r.example.com/mcp",
                "description": "remote",
                "transport": "streamable-http",
            },
        },
    }
    result = parse("toolhive", "th", json.dumps(doc).encode())
    assert {e.name for e in result.entries} == {"io.github.stacklok/good", "io.github.stacklok/r"}
    good = next(e for e in result.entries if e.name.endswith("/good"))
    assert good.status == "deprecated" and good.version == "1.2.3"
    messages = {e.name: e.message for e in result.errors}
    assert "image: required" in messages["no-image"]
    assert "name" in messages["bad name!"]
    assert "duplicate" in messages["good"]


def test_toolhive_duplicate_keys_in_the_file_are_reported() -> None:
    raw = b'{"servers": {"a": {"image": "x/a:1", "description": "one"}, "a": {"image": "x/a:2", "description": "two"}}}'
    result = parse("toolhive", "th", raw)
    assert [e.version for e in result.entries] == ["2"]
    assert any("duplicate" in e.message for e in result.errors)


def test_upstream_examples_valid_and_invalid() -> None:
    for path in data_files(SERVER_EXAMPLES / "valid", "*.json"):
        result = parse("upstream", "u", path.read_bytes())
        assert result.errors == [] and len(result.entries) == 1, path.name
    for path in data_files(SERVER_EXAMPLES / "invalid", "*.json"):
        result = parse("upstream", "u", path.read_bytes())
        assert result.entries == [] and len(result.errors) == 1, path.name
        assert result.errors[0].message.startswith("schema violation"), path.name


def test_upstream_layouts_and_per_entry_errors() -> None:
    a, b = server_doc("com.example/a"), server_doc("com.example/b", "2.0.0")
    wrapper = {
        "$schema": "x",
        "version": "1.0.0",
        "meta": {"last_updated": "2025-01-01T00:00:00Z"},
        "data": {"servers": [a, b, {"name": "bad"}, a, "junk"]},
    }
    result = parse("upstream", "u", orjson.dumps(wrapper))
    assert [e.key for e in result.entries] == [("com.example/a", "1.0.0"), ("com.example/b", "2.0.0")]
    assert [e.index for e in result.errors] == [2, 3, 4]
    assert "duplicate" in result.errors[1].message
    assert len(parse("upstream", "u", orjson.dumps([a, b])).entries) == 2
    assert len(parse("upstream", "u", orjson.dumps(a)).entries) == 1
    api_page = {
        "servers": [
            {"server": a, "_meta": {"io.modelcontextprotocol.registry/official": {"status": "deprecated"}}}
        ]
    }
    assert parse("upstream", "u", orjson.dumps(api_page)).entries[0].status == "deprecated"


def test_invalid_json_is_one_document_error() -> None:
    for fmt in ("upstream", "toolhive"):
        result = parse(fmt, "s", b"{not json")
        assert result.entries == [] and len(result.errors) == 1
        assert result.errors[0].index is None and "invalid JSON" in result.errors[0].message
