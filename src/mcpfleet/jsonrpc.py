"""Strict checks of incoming JSON-RPC 2.0 / MCP messages, shared by the proxy and the vMCP gateway.

Owns: decoding a request body with a nesting-depth bound, the JSON-RPC envelope rules (what a
request, notification or response must look like), per-method params validation against the
`mcp` SDK's own wire types, and the Content-Type rule for POST bodies. Every failure is a
`MessageError` carrying the JSON-RPC error code and a message that names the offending field, so
the services answer a clear error instead of tripping over a wrongly typed value later (a 500).

Why a depth bound: orjson decodes up to 1,024 levels but encodes only 254, so a message nested
deeper than that decodes fine and then fails when it is relayed (to a backend, to the child).
The bound is applied right after decoding, before anything else looks at the message.
"""

from __future__ import annotations

import importlib
import re
import sys
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal

import orjson
import pydantic
import pydantic_core

from mcpfleet.httpsettings import DEFAULT_MAX_DEPTH as DEFAULT_MAX_DEPTH  # re-exported

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
INVALID_PARAMS: Final = -32602


Kind = Literal["request", "notification", "response"]


class MessageError(Exception):
    """An incoming message is unusable: answer `code` / `message` to the request `request_id`."""

    def __init__(self, code: int, message: str, request_id: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id

    def response(self) -> dict[str, Any]:
        """The JSON-RPC error response for it."""
        return {
            "jsonrpc": "2.0",
            "id": self.request_id,
            "error": {"code": self.code, "message": self.message},
        }

    def body(self) -> bytes:
        return orjson.dumps(self.response())


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a Content-Type header names application/json (parameters such as charset allowed)."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def decode(body: bytes, max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """The JSON value of a request body; raises MessageError for bad JSON or too deep nesting."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MessageError(PARSE_ERROR, f"Parse error: {exc}") from None
    # Nesting needs one opening bracket per level: a body with no more brackets than the limit
    # (counted in C, strings included) cannot exceed it, which skips the walk for most requests.
    if body.count(b"{") + body.count(b"[") > max_depth:
        check_depth(value, max_depth)
    if _LONG_NUMBER.search(body) is not None:
        _check_integers(body, value)
    return value


# 20 digits in a row: the shortest integer literal that may not fit in 64 bits.
_LONG_NUMBER = re.compile(rb"\d{20}")
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


def _check_integers(body: bytes, value: Any) -> None:
    """Refuse integer literals outside the 64-bit range orjson writes. orjson reads them as
    floats, but the SDK transports parse the same body with pydantic-core, which keeps them as
    integers that then cannot be relayed. Only runs for bodies holding 20 digits in a row."""
    exact = pydantic_core.from_json(body)
    for node, _depth, path in _walk(exact):
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(child, int) and not isinstance(child, bool) and not _INT_MIN <= child <= _INT_MAX:
                where = _dotted((*path, _segment(key)))
                raise MessageError(
                    INVALID_REQUEST,
                    f"Invalid Request: {where} is an integer outside the 64-bit range",
                    _request_id_of(value),
                )


def has_wide_integer(body: bytes) -> bool:
    """Whether a JSON text holds an integer literal outside the 64-bit range (which orjson would
    read as a float, silently changing it): the check `decode` makes, for texts that are not
    client messages (a webhook's patch, whose values go into a client's request)."""
    if _LONG_NUMBER.search(body) is None:
        return False
    for node, _depth, _path in _walk(pydantic_core.from_json(body)):
        for child in node.values() if isinstance(node, dict) else node:
            if isinstance(child, int) and not isinstance(child, bool) and not _INT_MIN <= child <= _INT_MAX:
                return True
    return False


def check_depth(value: Any, max_depth: int) -> None:
    """Raise MessageError (-32600) naming the first path nested deeper than `max_depth` levels."""
    where = too_deep(value, max_depth)
    if where is not None:
        raise MessageError(
            INVALID_REQUEST,
            f"Invalid Request: {where} is nested deeper than {max_depth} levels (limit: --max-json-depth)",
            _request_id_of(value),
        )


def too_deep(value: Any, max_depth: int) -> str | None:
    """The first path of `value` nested deeper than `max_depth` levels ('the message' for the root),
    or None when it is within the bound."""
    for _node, depth, path in _walk(value):
        if depth > max_depth:
            return _dotted(path) or "the message"
    return None


MAX_ANSWER_DEPTH: Final = 128
"""Nesting levels accepted in a server's (backend's, stdio child's) answer before it is relayed.
orjson encodes at most 255 levels: an answer nested deeper cannot be relayed at all, and one
close to that bound cannot be wrapped in anything. Far above what real results use."""


def answer_problem(value: Any, raw: bytes | str) -> str | None:
    """Why a server's decoded message `value` (read from `raw`) cannot be relayed, or None.

    Only nesting is checked here: the brackets are counted first (in C), so the walk runs only
    for answers that could be too deep."""
    brackets = (
        raw.count(b"{") + raw.count(b"[") if isinstance(raw, bytes) else raw.count("{") + raw.count("[")
    )
    if brackets <= MAX_ANSWER_DEPTH:
        return None
    where = too_deep(value, MAX_ANSWER_DEPTH)
    return None if where is None else f"{where} is nested deeper than {MAX_ANSWER_DEPTH} levels"


def _response_problem(message: Mapping[str, Any]) -> str | None:
    """Why a response is no JSON-RPC response a client's SDK can read (one it cannot read is never
    answered: the client waits until it gives up), or None."""
    if "error" not in message:
        return None if isinstance(message.get("result"), dict) else "its result is not an object"
    err = message["error"]
    code = err.get("code") if isinstance(err, dict) else None
    if "result" in message:
        return "it holds both a result and an error"
    if (
        not isinstance(code, int)
        or isinstance(code, bool)
        or not _INT_MIN <= code < 2**63
        or not isinstance(err.get("message"), str)
    ):
        return "its error is not an object with an integer code and a message"
    return None


UNRELAYABLE: Final = object()
"""What `relayable` answers for a message to drop."""


def relayable(message: Any, raw: bytes | str, server: str) -> Any:
    """`message` (decoded from `raw`) when it can be relayed; otherwise, for a response, a JSON-RPC
    error (-32603) in its place saying that `server` (e.g. "server 'x'") sent an invalid answer, and
    `UNRELAYABLE` for anything else (a request or notification nobody waits for: dropped)."""
    problem = answer_problem(message, raw)
    is_response = isinstance(message, dict) and "method" not in message and valid_id(message.get("id"))
    if problem is None and is_response:
        problem = _response_problem(message)
    if problem is None:
        return message
    if not is_response:
        return UNRELAYABLE
    text = f"{server} sent an invalid answer: {problem}"
    return {"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32603, "message": text}}


def _walk(value: Any) -> Iterator[tuple[Any, int, tuple[str, ...]]]:
    """Every array / object in `value` with its depth (the root is 1) and path, without recursion."""
    if not isinstance(value, dict | list):
        return
    stack: list[tuple[Any, int, tuple[str, ...]]] = [(value, 1, ())]
    while stack:
        node, depth, path = stack.pop()
        yield node, depth, path
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:
            if isinstance(child, dict | list):
                stack.append((child, depth + 1, (*path, _segment(key))))


def _segment(key: Any) -> str:
    return f"[{key}]" if isinstance(key, int) else str(key)


def _dotted(path: tuple[str, ...]) -> str:
    """`params.arguments.k[0]`, cut after 4 steps (a path 1,000 levels deep is no help)."""
    text = ".".join(path[:4]).replace(".[", "[")
    return text + ("…" if len(path) > 4 else "")


def valid_id(value: Any) -> bool:
    """A request id MCP accepts: a string or an integer (never null, a float, a bool or a container)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _request_id_of(message: Any) -> Any:
    """The id to echo in an error about `message`: its own when well formed, null otherwise."""
    if isinstance(message, dict):
        rid = message.get("id")
        if valid_id(rid):
            return rid
    return None


def check_message(message: Any) -> Kind:
    """Check the JSON-RPC 2.0 envelope of one client message (MCP rules); return what it is.

    Requests: `jsonrpc` "2.0", `id` a string or integer, `method` a non-empty string, `params` an
    object when present (JSON-RPC also allows an array; MCP uses named parameters only: -32602).
    Notifications: the same without `id`. Responses (to server-to-client requests): an `id` and
    either a `result` object or an `error` object with an integer `code` and a string `message`.
    Batches are not part of MCP since 2025-06-18 and are refused.
    """
    if isinstance(message, list):
        raise MessageError(
            INVALID_REQUEST, "Invalid Request: JSON-RPC batches are not supported; send one message per POST"
        )
    if not isinstance(message, dict):
        raise MessageError(INVALID_REQUEST, "Invalid Request: the body must be a JSON-RPC message object")
    rid = _request_id_of(message)
    if message.get("jsonrpc") != "2.0":
        raise MessageError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', rid)
    has_id = "id" in message
    if "method" in message:
        return _check_call(message, rid, has_id)
    return _check_response(message, rid, has_id)


def _check_call(message: dict[str, Any], rid: Any, has_id: bool) -> Kind:
    """A message with `method`: a request (with `id`) or a notification."""
    if "result" in message or "error" in message:
        raise MessageError(
            INVALID_REQUEST,
            'Invalid Request: a message with "method" cannot carry "result" or "error"',
            rid,
        )
    if has_id and not valid_id(message["id"]):
        raise MessageError(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
    method = message["method"]
    if not isinstance(method, str) or not method:
        raise MessageError(INVALID_REQUEST, 'Invalid Request: "method" must be a non-empty string', rid)
    params = message.get("params")
    if isinstance(params, list):
        raise MessageError(
            INVALID_PARAMS, 'Invalid params: "params" must be an object (MCP uses named parameters)', rid
        )
    if params is not None and not isinstance(params, dict):
        raise MessageError(INVALID_REQUEST, 'Invalid Request: "params" must be an object', rid)
    if isinstance(params, dict):
        _check_meta(params, rid)
        if (
            method == "notifications/cancelled"
            and "requestId" in params
            and not valid_id(params["requestId"])
        ):
            raise MessageError(
                INVALID_PARAMS, 'Invalid params: "params.requestId" must be a string or an integer'
            )
    return "request" if has_id else "notification"


def _check_response(message: dict[str, Any], rid: Any, has_id: bool) -> Kind:
    """A message without `method`: a response to a server-to-client request."""
    if "result" in message and "error" in message:
        raise MessageError(
            INVALID_REQUEST, 'Invalid Request: a response carries "result" or "error", not both'
        )
    if "result" in message:
        if not valid_id(message.get("id")):
            raise MessageError(
                INVALID_REQUEST, 'Invalid Request: a response "id" must be a string or an integer'
            )
        if not isinstance(message["result"], dict):
            raise MessageError(INVALID_REQUEST, 'Invalid Request: "result" must be an object', rid)
        return "response"
    if "error" in message:
        if not has_id or not (message["id"] is None or valid_id(message["id"])):
            raise MessageError(
                INVALID_REQUEST,
                'Invalid Request: an error response "id" must be a string, an integer or null',
            )
        error = message["error"]
        code = error.get("code") if isinstance(error, dict) else None
        if not isinstance(error, dict) or not isinstance(code, int) or isinstance(code, bool):
            raise MessageError(INVALID_REQUEST, 'Invalid Request: "error.code" must be an integer', rid)
        if not isinstance(error.get("message"), str):
            raise MessageError(INVALID_REQUEST, 'Invalid Request: "error.message" must be a string', rid)
        return "response"
    raise MessageError(
        INVALID_REQUEST,
        'Invalid Request: a message needs "method" (request, notification) or "result" / "error" (response)',
        rid,
    )


def _check_meta(params: Mapping[str, Any], rid: Any) -> None:
    """`params._meta` (every MCP request and notification may carry it): an object whose
    `progressToken`, when present, is a string or an integer. Checked for every method because
    relays key their bookkeeping on the token."""
    if "_meta" not in params:
        return
    meta = params["_meta"]
    if meta is not None and not isinstance(meta, dict):
        raise MessageError(INVALID_PARAMS, 'Invalid params: "params._meta" must be an object', rid)
    if isinstance(meta, dict) and "progressToken" in meta and not valid_id(meta["progressToken"]):
        raise MessageError(
            INVALID_PARAMS, 'Invalid params: "params._meta.progressToken" must be a string or an integer', rid
        )


# `check_params` validates as the SDK's `mcp_types.methods` does, against the wire types of the
# schema a protocol version belongs to (2025-11-25 for every 2025-era version, the same methods in
# each; 2026-07-28), but imports only that schema's models: not `mcp_types.methods` itself, which
# loads every schema and the version-free models too, three times the pydantic model building of
# the one a client speaks (issue 19: a gateway's first MCP answer).
# tests/cli/test_lazy_imports.py checks these tables against the SDK's own maps.
LEGACY_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS: Final = ("2026-07-28",)
_SCHEMAS: Final = {"legacy": "mcp_types._v2025_11_25", "modern": "mcp_types._v2026_07_28"}
LEGACY_REQUESTS: Final[Mapping[str, str]] = {
    "completion/complete": "CompleteRequest",
    "initialize": "InitializeRequest",
    "logging/setLevel": "SetLevelRequest",
    "ping": "PingRequest",
    "prompts/get": "GetPromptRequest",
    "prompts/list": "ListPromptsRequest",
    "resources/list": "ListResourcesRequest",
    "resources/read": "ReadResourceRequest",
    "resources/subscribe": "SubscribeRequest",
    "resources/templates/list": "ListResourceTemplatesRequest",
    "resources/unsubscribe": "UnsubscribeRequest",
    "tools/call": "CallToolRequest",
    "tools/list": "ListToolsRequest",
}
LEGACY_NOTIFICATIONS: Final[Mapping[str, str]] = {
    "notifications/cancelled": "CancelledNotification",
    "notifications/initialized": "InitializedNotification",
    "notifications/progress": "ProgressNotification",
    "notifications/roots/list_changed": "RootsListChangedNotification",
}
MODERN_REQUESTS: Final[Mapping[str, str]] = {
    "completion/complete": "CompleteRequest",
    "prompts/get": "GetPromptRequest",
    "prompts/list": "ListPromptsRequest",
    "resources/list": "ListResourcesRequest",
    "resources/read": "ReadResourceRequest",
    "resources/templates/list": "ListResourceTemplatesRequest",
    "server/discover": "DiscoverRequest",
    "subscriptions/listen": "SubscriptionsListenRequest",
    "tools/call": "CallToolRequest",
    "tools/list": "ListToolsRequest",
}
MODERN_NOTIFICATIONS: Final[Mapping[str, str]] = {"notifications/cancelled": "CancelledNotification"}


def _preload() -> None:
    for module in _SCHEMAS.values():  # the 2025 era's first: most clients speak it
        importlib.import_module(module)


def preload_validators() -> None:
    """Import the SDK's per-method wire types of both protocol eras (`check_params`' validators,
    pydantic model building) in a background thread, the 2025 era's first. The proxy and the
    gateway start without them and call this after their first answer (a probe, usually), so their
    first MCP request need not wait for them. A request that needs them before the thread is done
    waits for the same import (the import lock), never sees half of it."""
    if _SCHEMAS["modern"] in sys.modules:
        return
    threading.Thread(target=_preload, name="preload-validators", daemon=True).start()


def check_params(
    kind: Kind, method: str, params: Mapping[str, Any] | None, version: str, request_id: Any = None
) -> None:
    """Validate `params` of a request / notification against the SDK's wire type for `method` at
    protocol `version`; raises MessageError (-32602) naming the field. Methods (or versions) the
    SDK has no type for pass: whoever handles them decides (usually: method not found)."""
    if version in LEGACY_VERSIONS:
        era = "legacy"
        table = LEGACY_REQUESTS if kind == "request" else LEGACY_NOTIFICATIONS
    elif version in MODERN_VERSIONS:
        era = "modern"
        table = MODERN_REQUESTS if kind == "request" else MODERN_NOTIFICATIONS
    else:
        return
    name = table.get(method) if kind != "response" else None
    if name is None:
        return
    model = _MODELS.get((era, name)) or _model(era, name)
    # The body as `mcp_types.methods` builds it: a stub envelope, the method, the params if given.
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 0} if kind == "request" else {"jsonrpc": "2.0"}
    body["method"] = method
    if params is not None:
        body["params"] = params
    try:
        model.model_validate(body, by_name=False)
    except pydantic.ValidationError as exc:
        raise MessageError(INVALID_PARAMS, _describe(exc, method, params), request_id) from None


_MODELS: dict[tuple[str, str], type[pydantic.BaseModel]] = {}


def _model(era: str, name: str) -> type[pydantic.BaseModel]:
    # Imported here, not at module level: the MCP SDK is ~40 MB and a second of start-up, and every
    # `mcpfleet` command imports this module through the HTTP limit flags.
    model: type[pydantic.BaseModel] = getattr(importlib.import_module(_SCHEMAS[era]), name)
    _MODELS[(era, name)] = model
    return model


def _describe(exc: pydantic.ValidationError, method: str, params: Any) -> str:
    """One line naming the first wrong field, e.g. `completion/complete: params.ref: Input should
    be a valid dictionary`. Union alternatives in pydantic's locations are not fields: the path
    stops where the actual message stops."""
    errors = exc.errors(include_url=False, include_context=False, include_input=False)
    first = errors[0]
    path = _field_path(first["loc"], {"params": params})
    same = [e["msg"] for e in errors if _field_path(e["loc"], {"params": params}) == path]
    detail = same[0] if len(same) == 1 else "; or ".join(dict.fromkeys(same))
    return f"Invalid params: {method}: {path}: {detail}"[:500]


def _field_path(loc: tuple[int | str, ...], root: Any) -> str:
    parts: list[str] = []
    node = root
    for step in loc:
        if isinstance(node, dict) and isinstance(step, str):
            parts.append(step)
            node = node.get(step)
            if node is None:
                break
        elif isinstance(node, list) and isinstance(step, int):
            parts.append(f"[{step}]")
            node = node[step] if step < len(node) else None
        else:
            break
    return ".".join(parts).replace(".[", "[") or "params"
