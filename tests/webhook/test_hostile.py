"""Hostile suite of the proxy's webhook middleware (`webhook.asgi`): what a hostile (or broken)
webhook answer can make of a client's request.

The middleware runs in process in front of a recording app; its webhook clients are replaced by
canned answers (the HTTP side, compressed answers included, is `tests/test_decompression_bomb.py`
and `test_proxy_webhooks.py`). Corpus: known-bad mutating answers, each with the JSON-RPC error the
client gets, what the error must name and what it must never quote (values the webhook injected,
the request as patched so far). Properties: whatever a patch does, the client gets either its
request (as patched) at the app, re-checked as a client's request is (`jsonrpc.decode` /
`check_message`: no integer beyond 64 bits, same id), or one clear error quoting nothing injected.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet import jsonrpc
from mcpfleet.webhook.asgi import WEBHOOK_FAILED, WebhookMiddleware
from mcpfleet.webhook.client import Answer
from mcpfleet.webhook.config import WebhookDocument
from mcpfleet.webhook.protocol import InvalidResponse, apply_patch, parse_mutating

SECRET = "INJECTED-by-the-webhook-7f3a"
REQUEST = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "t", "arguments": {"a": 1}}}
ARGS = "/mcp_request/params/arguments"


class Canned:
    """A webhook client answering a fixed body (the middleware's only use of it is `call`)."""

    def __init__(self, body: bytes, status: int = 200) -> None:
        self.answer = Answer(status, body)
        self.endpoint: Any = None

    async def call(self, payload: bytes) -> Answer:
        return self.answer

    async def aclose(self) -> None:
        return None


def middleware(answer: bytes, policy: str = "fail") -> tuple[WebhookMiddleware, list[bytes]]:
    """The middleware with one mutating webhook `m` answering `answer`; the bodies the app got."""
    reached: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        reached.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    hook = {
        "name": "m",
        "url": "http://127.0.0.1:9/m",
        "failurePolicy": policy,
        "tlsConfig": {"insecureSkipVerify": True},
    }
    document = WebhookDocument.model_validate({"serverName": "s", "mutating": [hook]})
    mw = WebhookMiddleware(app, document, max_json_depth=64)
    canned = Canned(answer)
    canned.endpoint = mw.mutating[0].endpoint
    mw.mutating = [canned]  # type: ignore[list-item]
    return mw, reached


async def post(mw: WebhookMiddleware, request: Any = None) -> tuple[int, dict[str, Any]]:
    body = orjson.dumps(REQUEST if request is None else request)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": [], "query_string": b""}
    await mw(scope, receive, send)
    return int(sent[0]["status"]), orjson.loads(b"".join(m.get("body", b"") for m in sent[1:]))


def patch_answer(*ops: Any) -> bytes:
    return orjson.dumps({"allowed": True, "patch_type": "json_patch", "patch": list(ops)})


def raw_patch(ops_json: str) -> bytes:
    """A patch answer written by hand (integers orjson cannot write)."""
    return b'{"allowed": true, "patch_type": "json_patch", "patch": [' + ops_json.encode() + b"]}"


# (answer, what the error message must contain)
CORPUS: list[tuple[str, bytes, str]] = [
    (
        "test fails after an injected value",
        patch_answer(
            {"op": "add", "path": f"{ARGS}/s", "value": SECRET},
            {"op": "test", "path": f"{ARGS}/s", "value": "other"},
        ),
        f"patch[1] (test at {ARGS}/s) failed",
    ),
    (
        "remove of a missing member after an injected object",
        patch_answer(
            {"op": "add", "path": f"{ARGS}/o", "value": {"k": SECRET}},
            {"op": "remove", "path": f"{ARGS}/o/nope"},
        ),
        f"patch[1] (remove at {ARGS}/o/nope) failed",
    ),
    (
        "move into its own child",
        patch_answer(
            {"op": "add", "path": f"{ARGS}/o", "value": {"k": SECRET}},
            {"op": "move", "from": f"{ARGS}/o", "path": f"{ARGS}/o/k/x"},
        ),
        f"patch[1] (move from {ARGS}/o to {ARGS}/o/k/x) failed",
    ),
    (
        "replace under a string",
        patch_answer(
            {"op": "add", "path": f"{ARGS}/s", "value": SECRET},
            {"op": "replace", "path": f"{ARGS}/s/0", "value": 1},
        ),
        f"patch[1] (replace at {ARGS}/s/0) failed",
    ),
    (
        "copy from a missing member",
        patch_answer({"op": "copy", "from": f"{ARGS}/nope", "path": f"{ARGS}/x"}),
        "patch[0] (copy from",
    ),
    ("integer beyond 64 bits", raw_patch(f'{{"op": "add", "path": "{ARGS}/n", "value": {2**70}}}'), "64-bit"),
    (
        "negative beyond 64 bits",
        raw_patch(f'{{"op": "add", "path": "{ARGS}/n", "value": {-(2**64)}}}'),
        "64-bit",
    ),
    (
        "wide integer nested in the value",
        raw_patch(f'{{"op": "add", "path": "{ARGS}/o", "value": {{"k": [1, {10**25}]}}}}'),
        "64-bit",
    ),
    (
        "wide integer replacing the id",
        raw_patch(f'{{"op": "replace", "path": "/mcp_request/id", "value": {2**64}}}'),
        "64-bit",
    ),
    ("id changed", patch_answer({"op": "replace", "path": "/mcp_request/id", "value": 8}), "request id"),
    ("id retyped", patch_answer({"op": "replace", "path": "/mcp_request/id", "value": "7"}), "request id"),
    ("method removed", patch_answer({"op": "remove", "path": "/mcp_request/method"}), "JSON-RPC"),
    (
        "jsonrpc changed",
        patch_answer({"op": "replace", "path": "/mcp_request/jsonrpc", "value": "1.0"}),
        "JSON-RPC",
    ),
    (
        "params made an array",
        patch_answer({"op": "replace", "path": "/mcp_request/params", "value": [SECRET]}),
        "JSON-RPC",
    ),
    ("result added", patch_answer({"op": "add", "path": "/mcp_request/result", "value": {}}), "JSON-RPC"),
    (
        "nested past the depth limit",
        patch_answer({"op": "add", "path": f"{ARGS}/deep", "value": orjson.loads(b"[" * 80 + b"]" * 80)}),
        "JSON-RPC",
    ),
    (
        "outside the request",
        patch_answer({"op": "add", "path": "/principal/sub", "value": SECRET}),
        "under /mcp_request/",
    ),
]


@pytest.mark.parametrize(("why", "answer", "named"), CORPUS, ids=[c[0] for c in CORPUS])
async def test_hostile_patches_are_refused_clearly_and_quote_nothing(
    why: str, answer: bytes, named: str
) -> None:
    """Regression (issue 27 items 12 and 16): a failing operation's message quoted the request as
    patched so far (the injected value included); an integer beyond 64 bits went through as a float."""
    mw, reached = middleware(answer)
    status, body = await post(mw)
    assert status == 200 and "error" in body, (why, body)
    error = body["error"]
    assert error["code"] == WEBHOOK_FAILED and body["id"] == 7, (why, error)
    assert named in error["message"], (why, error["message"])
    assert SECRET not in orjson.dumps(body).decode(), (why, error["message"])
    assert reached == [], why
    # With failurePolicy ignore, the client's own request goes on untouched.
    mw, reached = middleware(answer, "ignore")
    status, body = await post(mw)
    assert status == 200 and reached == [orjson.dumps(REQUEST)], why


async def test_a_valid_patch_reaches_the_app_re_encoded() -> None:
    mw, reached = middleware(patch_answer({"op": "replace", "path": f"{ARGS}/a", "value": 2**63}))
    assert (await post(mw))[0] == 200
    assert orjson.loads(reached[0])["params"]["arguments"]["a"] == 2**63  # in range: kept an integer


# --- Properties ----------------------------------------------------------------------------------

leaves = st.one_of(
    st.just(SECRET),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.text(max_size=8),
)
values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
pointers = st.lists(
    st.sampled_from(["params", "arguments", "a", "s", "0", "-", "id", "method", "x", SECRET]), max_size=4
).map(lambda parts: "/mcp_request/" + "/".join(parts))
operations = st.one_of(
    st.builds(
        lambda op, path, value: {"op": op, "path": path, "value": value},
        st.sampled_from(["add", "replace", "test"]),
        pointers,
        values,
    ),
    st.builds(lambda path: {"op": "remove", "path": path}, pointers),
    st.builds(
        lambda op, src, path: {"op": op, "from": src, "path": path},
        st.sampled_from(["move", "copy"]),
        pointers,
        pointers,
    ),
)


def _answer(ops: list[dict[str, Any]]) -> bytes:
    """The answer as a webhook would write it: Python's JSON (any integer size), not orjson."""
    import json

    return json.dumps({"allowed": True, "patch_type": "json_patch", "patch": ops}).encode()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(operations, min_size=1, max_size=5))
def test_any_patch_gives_a_checked_request_or_a_clear_refusal(ops: list[dict[str, Any]]) -> None:
    async def run() -> None:
        mw, reached = middleware(_answer(ops))
        status, body = await post(mw)
        assert status == 200
        if reached:
            # What the app got passes a client's checks and keeps the client's id.
            assert body == {}
            message = jsonrpc.decode(reached[0], 64)
            assert jsonrpc.check_message(message) == "request" and message["id"] == 7
        else:
            error = body["error"]
            assert error["code"] == WEBHOOK_FAILED and body["id"] == 7
            # The message names the webhook and an operation (index, op, pointer): it quotes no value.
            assert error["message"].startswith("Mutating webhook m failed: ")
            if not any(SECRET in op["path"] or SECRET in op.get("from", "") for op in ops):
                assert SECRET not in orjson.dumps(body).decode(), error["message"]

    asyncio.run(run())


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(operations, min_size=1, max_size=5))
def test_refusals_name_the_operation_never_the_document(ops: list[dict[str, Any]]) -> None:
    """At the protocol level: a patch applies, or the reason names at most an operation's pointer
    (never a value, so the secret shows only when a pointer itself spells it)."""
    try:
        body = apply_patch(orjson.dumps(REQUEST), parse_mutating(_answer(ops)).patch, 64)
    except InvalidResponse as exc:
        pointers_spell_it = any(SECRET in op["path"] or SECRET in op.get("from", "") for op in ops)
        assert pointers_spell_it or SECRET not in str(exc), str(exc)
        return
    assert not jsonrpc.has_wide_integer(body)
