"""Units of the shared input checks (`mcpfleet.jsonrpc`) and HTTP limit settings (`mcpfleet.httplimits`)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from mcpfleet import jsonrpc
from mcpfleet.cli.main import app as cli
from mcpfleet.httplimits import HttpLimits
from tests.hostile import nested


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": "ping"}, "request"),
        ({"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}}, "request"),
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, "notification"),
        (
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "x"}},
            "notification",
        ),
        ({"jsonrpc": "2.0", "id": 1, "result": {}}, "response"),
        ({"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "m"}}, "response"),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": None}, "request"),
    ],
)
def test_valid_messages(message: Any, kind: str) -> None:
    assert jsonrpc.check_message(message) == kind


@pytest.mark.parametrize(
    ("message", "code", "words", "echo"),
    [
        ({"jsonrpc": "2.0", "id": 5}, -32600, '"method"', 5),
        ({"jsonrpc": "2.0", "id": 5, "method": 123}, -32600, '"method"', 5),
        ({"jsonrpc": "2.0", "id": 5, "method": ""}, -32600, '"method"', 5),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, -32600, '"id"', None),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, -32600, '"id"', None),
        ({"jsonrpc": "2.0", "id": 2.5, "method": "ping"}, -32600, '"id"', None),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, -32600, '"id"', None),
        ({"id": 1, "method": "ping"}, -32600, '"jsonrpc"', 1),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}, -32602, '"params"', 1),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": 3}, -32600, '"params"', 1),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": 1}}, -32602, "_meta", 1),
        ({"jsonrpc": "2.0", "id": 1, "method": "ping", "result": {}}, -32600, '"result"', 1),
        ({"jsonrpc": "2.0", "id": 1, "result": 3}, -32600, '"result"', 1),
        ({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}, -32600, "not both", None),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": "x", "message": "m"}}, -32600, "error.code", 1),
        (
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": {}}},
            -32602,
            "requestId",
            None,
        ),
        ([], -32600, "batches", None),
        ("x", -32600, "object", None),
    ],
)
def test_invalid_messages(message: Any, code: int, words: str, echo: Any) -> None:
    with pytest.raises(jsonrpc.MessageError) as caught:
        jsonrpc.check_message(message)
    assert caught.value.code == code and words in caught.value.message
    assert caught.value.response()["id"] == echo


def test_depth_names_the_path_and_the_limit() -> None:
    msg = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": nested(10)}}
    jsonrpc.check_depth(msg, 12)
    with pytest.raises(jsonrpc.MessageError) as caught:
        jsonrpc.check_depth(msg, 11)
    assert "params.arguments.k" in caught.value.message and "11 levels" in caught.value.message
    # Wide but shallow: many containers, no walk beyond the limit.
    jsonrpc.check_depth({"a": [{"b": 1}] * 1000}, 3)
    with pytest.raises(jsonrpc.MessageError, match="Parse error"):
        jsonrpc.decode(b"[" * 2000 + b"]" * 2000)


def test_params_errors_name_the_field() -> None:
    with pytest.raises(jsonrpc.MessageError) as caught:
        jsonrpc.check_params(
            "request",
            "completion/complete",
            {"ref": "x", "argument": {"name": "a", "value": "b"}},
            "2025-11-25",
            7,
        )
    assert caught.value.code == -32602 and "params.ref" in caught.value.message
    assert caught.value.request_id == 7
    with pytest.raises(jsonrpc.MessageError, match=r"params\.clientInfo"):
        jsonrpc.check_params(
            "request", "initialize", {"protocolVersion": "x", "capabilities": {}}, "2025-11-25"
        )
    # Methods the SDK has no type for are left to whoever handles them.
    jsonrpc.check_params("request", "vendor/thing", {"x": 1}, "2025-11-25")
    jsonrpc.check_params("request", "initialize", {}, "2026-07-28")


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        ("application/json", True),
        ("Application/JSON; charset=utf-8", True),
        ("application/jsonx", False),
        ("", False),
        (None, False),
        ("text/json", False),
    ],
)
def test_media_type(value: str | None, ok: bool) -> None:
    assert jsonrpc.is_json_media_type(value) is ok


def test_limits_from_env_and_flags() -> None:
    assert HttpLimits.from_env({}) == HttpLimits()
    env = {"MCPFLEET_MAX_BODY_BYTES": "1000", "MCPFLEET_BODY_TIMEOUT": "2.5"}
    limits = HttpLimits.from_env(env, body_timeout=7.0, max_json_depth=None)
    assert (limits.max_body_bytes, limits.body_timeout, limits.max_json_depth) == (1000, 7.0, 64)
    with pytest.raises(ValueError, match="MCPFLEET_HEADER_TIMEOUT"):
        HttpLimits.from_env({"MCPFLEET_HEADER_TIMEOUT": "soon"})
    with pytest.raises(ValueError, match="--max-json-depth"):
        HttpLimits.from_env({}, max_json_depth=0)


def test_cli_refuses_a_bad_limit() -> None:
    result = CliRunner().invoke(cli, ["proxy", "--max-json-depth", "0", "--", "true"])
    assert result.exit_code == 2 and "--max-json-depth" in result.output
    result = CliRunner().invoke(
        cli, ["vmcp", "serve", "--config", "x.yaml"], env={"MCPFLEET_MAX_BODY_BYTES": "big"}
    )
    assert result.exit_code == 2 and "MCPFLEET_MAX_BODY_BYTES" in result.output


def test_integers_beyond_64_bits_are_refused_digits_in_strings_are_not() -> None:
    body = b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"arguments":{"n":[1,18446744073709551616]}}}'
    with pytest.raises(jsonrpc.MessageError) as caught:
        jsonrpc.decode(body)
    assert "params.arguments.n[1]" in caught.value.message and caught.value.request_id == 3
    assert (
        jsonrpc.decode(b'{"card":"12345678901234567890123","max":18446744073709551615}')["max"] == 2**64 - 1
    )
