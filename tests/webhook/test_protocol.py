"""The webhook answer parser and patch application on hostile input: a corpus of known-bad answers,
and hypothesis over arbitrary JSON / bytes — nothing but `InvalidResponse` ever escapes, a parsed
answer is typed, and an applied patch always yields one JSON-RPC request with the same id."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.webhook.protocol import (
    MAX_RESPONSE_BYTES,
    InvalidResponse,
    Mutation,
    Verdict,
    apply_patch,
    parse_mutating,
    parse_validating,
    request_payload,
)

REQUEST = orjson.dumps(
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t", "arguments": {"a": 1}}}
)

CORPUS: list[tuple[bytes, str]] = [
    (b"", "not JSON"),
    (b"<html>", "not JSON"),
    (b"[]", "array"),
    (b'"allowed"', "string"),
    (b"null", "null"),
    (b"1e999", "not JSON"),
    (b"{}", "`allowed`"),
    (b'{"allowed": "true"}', "`allowed`"),
    (b'{"allowed": 1}', "`allowed`"),
    (b'{"allowed": false, "message": 5}', "`message`"),
    (b'{"allowed": false, "code": "403"}', "`code`"),
    (b'{"allowed": false, "code": true}', "`code`"),
    (b'{"allowed": false, "details": {"a": 1}}', "`details`"),
    (b'{"allowed": false, "details": []}', "`details`"),
    (b'{"allowed": true, "pad": "' + b"x" * MAX_RESPONSE_BYTES + b'"}', "larger than"),
    (b'{"allowed": true, "patch_type": "merge", "patch": [{"op": "add"}]}', "`patch_type`"),
    (b'{"allowed": true, "patch_type": "json_patch", "patch": {"op": "add"}}', "`patch`"),
    (b'{"allowed": true, "patch_type": "json_patch", "patch": [1]}', "patch[0].op"),
    (
        b'{"allowed": true, "patch_type": "json_patch", "patch": [{"op": "eval", "path": "/mcp_request/x"}]}',
        "op",
    ),
    (
        b'{"allowed": true, "patch_type": "json_patch", "patch": [{"op": "add", "path": "/principal", "value": 1}]}',
        "under /mcp_request/",
    ),
    (
        b'{"allowed": true, "patch_type": "json_patch", "patch": [{"op": "add", "path": "/mcp_request", "value": 1}]}',
        "under /mcp_request/",
    ),
    (
        b'{"allowed": true, "patch_type": "json_patch", "patch": [{"op": "move", "from": "/context", "path": "/mcp_request/x"}]}',
        "from",
    ),
    (
        b'{"allowed": true, "patch_type": "json_patch", "patch": [{"op": "add", "path": "/mcp_request/x"}]}',
        "needs a value",
    ),
    (
        b'{"allowed": true, "patch_type": "json_patch", "patch": [{"op": "add", "path": "/mcp_request/~2", "value": 1}]}',
        "JSON pointer",
    ),
]


@pytest.mark.parametrize(("body", "why"), CORPUS)
def test_corpus_of_bad_answers(body: bytes, why: str) -> None:
    for parse in (parse_validating, parse_mutating):
        if parse is parse_validating and b"patch" in body and b'allowed": true' in body:
            continue  # patches are not a validating webhook's business: ignored there
        with pytest.raises(InvalidResponse) as refused:
            parse(body)
        assert why in str(refused.value)
        assert b"<html>" not in str(refused.value).encode()


def test_good_answers() -> None:
    denied = parse_validating(
        b'{"allowed": false, "code": 403, "reason": "R", "message": "no\\u0000", "details": {"k": "v"}}'
    )
    assert denied == Verdict(False, 403, "no", "R", {"k": "v"})
    assert parse_mutating(b'{"allowed": true}') == Mutation(Verdict(True))
    patch = b'{"allowed": true, "patch_type": "json_patch", "patch": [{"op": "replace", "path": "/mcp_request/params/arguments/a", "value": 2}]}'
    mutation = parse_mutating(patch)
    rewritten = orjson.loads(apply_patch(REQUEST, mutation.patch, 64))
    assert rewritten["params"]["arguments"] == {"a": 2} and rewritten["id"] == 3


@pytest.mark.parametrize(
    ("ops", "why"),
    [
        ([{"op": "replace", "path": "/mcp_request/id", "value": "3"}], "request id"),
        ([{"op": "remove", "path": "/mcp_request/id"}], "request"),
        ([{"op": "remove", "path": "/mcp_request/method"}], "JSON-RPC"),
        ([{"op": "replace", "path": "/mcp_request/params", "value": [1]}], "JSON-RPC"),
        ([{"op": "remove", "path": "/mcp_request/nope"}], "cannot be applied"),
        ([{"op": "test", "path": "/mcp_request/id", "value": 4}], "cannot be applied"),
        (
            [{"op": "move", "from": "/mcp_request/params", "path": "/mcp_request/params/x"}],
            "cannot be applied",
        ),
        ([{"op": "add", "path": "/mcp_request/params/arguments/x", "value": "y" * (1 << 20)}], "larger than"),
        ([{"op": "add", "path": "/mcp_request/params/arguments/x", "value": [[[[[[[[1]]]]]]]]}], "JSON-RPC"),
    ],
)
def test_patches_that_break_the_request(ops: list[dict[str, Any]], why: str) -> None:
    with pytest.raises(InvalidResponse, match=why):
        apply_patch(REQUEST, tuple(ops), 8)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
pointers = st.lists(
    st.sampled_from(["mcp_request", "params", "arguments", "id", "a", "0", "-", "~1", "x"]), max_size=4
).map(lambda parts: "/" + "/".join(parts))
operations = st.fixed_dictionaries(
    {"op": st.sampled_from(["add", "remove", "replace", "copy", "move", "test", "bad"]), "path": pointers},
    optional={"value": json_values, "from": pointers},
)
answers = st.fixed_dictionaries(
    {},
    optional={
        "allowed": st.booleans() | json_values,
        "code": st.integers(-5, 2000) | json_values,
        "message": st.text(max_size=40) | json_values,
        "reason": st.text(max_size=40) | json_values,
        "details": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3) | json_values,
        "patch_type": st.sampled_from(["json_patch", "", "merge"]) | json_values,
        "patch": st.lists(operations, max_size=5) | json_values,
    },
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers)
def test_any_answer_parses_or_is_refused_cleanly(answer: dict[str, Any]) -> None:
    body = json.dumps(answer).encode()
    for parse in (parse_validating, parse_mutating):
        try:
            result = parse(body)
        except InvalidResponse:
            continue
        verdict = result.verdict if isinstance(result, Mutation) else result
        assert isinstance(verdict.allowed, bool)
        assert verdict.message is None or (isinstance(verdict.message, str) and verdict.message.isprintable())
        if isinstance(result, Mutation) and result.patch:
            try:
                patched = orjson.loads(apply_patch(REQUEST, result.patch, 64))
            except InvalidResponse:
                continue
            assert patched["id"] == 3 and patched["jsonrpc"] == "2.0" and isinstance(patched["method"], str)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_parse_or_are_refused_cleanly(body: bytes) -> None:
    for parse in (parse_validating, parse_mutating):
        try:
            parse(body)
        except InvalidResponse:
            pass


def test_payload_embeds_the_request_verbatim() -> None:
    payload = orjson.loads(
        request_payload(
            REQUEST,
            principal={"sub": "u"},
            server_name="s",
            namespace="ns",
            source_ip="1.2.3.4:5",
            transport="stdio",
        )
    )
    assert payload["mcp_request"] == orjson.loads(REQUEST)
    assert payload["principal"] == {"sub": "u"}
    assert payload["context"] == {
        "server_name": "s",
        "namespace": "ns",
        "source_ip": "1.2.3.4:5",
        "transport": "stdio",
    }
    assert payload["version"] == "v0.1.0"
