"""ToolHive's webhook wire protocol (API version v0.1.0): the request payload, and the parser of the
answers, which treats every response as hostile input.

Request (POSTed as JSON, both kinds)::

    {"version": "v0.1.0", "uid": "<uuid>", "timestamp": "<RFC 3339>",
     "principal": {"sub", "name", "email", "claims"} | null,   # never the token
     "mcp_request": <the JSON-RPC request>,
     "context": {"server_name", "namespace", "source_ip", "transport"}}

Validating answer: `{"version", "uid", "allowed": bool, "code"?, "message"?, "reason"?, "details"?}`.
Mutating answer: the same plus `"patch_type": "json_patch"` and `"patch"`: RFC 6902 operations on
the envelope `{"mcp_request": ...}`, each path (and `from`) under `/mcp_request/` (the principal and
context cannot be touched, and the request not replaced whole). The patched request must still be
one JSON-RPC request with the same `id` and within the size and nesting limits, and pass the
checks a client's request gets (`jsonrpc.decode` / `check_message`): an integer beyond 64 bits in
a patch (which would reach the server as a float) makes the answer invalid.

`parse_validating` / `parse_mutating` / `apply_patch` raise `InvalidResponse` (a reason safe to
show: never the response's bytes, nor the request as patched so far - a failing operation is named
by its index, op and path) for anything else; nothing else escapes them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jsonpatch
import jsonpointer
import orjson

from mcpfleet import jsonrpc

API_VERSION = "v0.1.0"
MAX_RESPONSE_BYTES = 1 << 20
"""A webhook's answer is read up to this size (ToolHive's MaxResponseSize); more is an invalid response."""
MAX_REQUEST_BYTES = 1 << 20
"""A request (as received, and as rewritten) is at most this large (ToolHive's MaxRequestSize)."""
MAX_PATCH_OPS = 256
MAX_TEXT = 512
"""Denial `message` / `reason` longer than this are cut (they reach the client and the log)."""
PATCH_TYPE = "json_patch"
SCOPE = "/mcp_request/"
_OPS = frozenset({"add", "remove", "replace", "copy", "move", "test"})


class InvalidResponse(Exception):
    """A webhook answer that cannot be used; the message says why without quoting it."""


@dataclass(frozen=True)
class Verdict:
    """What a webhook decided: allowed, and (for a denial) its code, message, reason and details."""

    allowed: bool
    code: int | None = None
    message: str | None = None
    reason: str | None = None
    details: dict[str, str] | None = None


@dataclass(frozen=True)
class Mutation:
    """A mutating webhook's answer: its verdict and the validated patch (empty: nothing to change)."""

    verdict: Verdict
    patch: tuple[dict[str, Any], ...] = ()


def principal_of(subject: str | None, claims: dict[str, Any] | None) -> dict[str, Any] | None:
    """ToolHive's PrincipalInfo from validated claims (None for anonymous callers); never a credential."""
    if claims is None:
        return None
    principal: dict[str, Any] = {"sub": claims.get("sub") if isinstance(claims.get("sub"), str) else subject}
    for key in ("name", "email"):
        if isinstance(claims.get(key), str):
            principal[key] = claims[key]
    principal["claims"] = claims
    return {k: v for k, v in principal.items() if v is not None}


def request_payload(
    mcp_request: bytes,
    *,
    principal: dict[str, Any] | None,
    server_name: str,
    namespace: str | None,
    source_ip: str,
    transport: str,
) -> bytes:
    """The JSON body POSTed to a webhook (a fresh uid per call); `mcp_request` is embedded verbatim."""
    context: dict[str, Any] = {"server_name": server_name, "source_ip": source_ip, "transport": transport}
    if namespace:
        context["namespace"] = namespace
    head = orjson.dumps(
        {
            "version": API_VERSION,
            "uid": str(uuid.uuid4()),
            "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
            "principal": principal,
            "context": context,
        }
    )
    # The request as received, byte for byte (already checked to be one JSON object).
    return head[:-1] + b',"mcp_request":' + mcp_request + b"}"


def _object(body: bytes) -> dict[str, Any]:
    if len(body) > MAX_RESPONSE_BYTES:
        raise InvalidResponse(f"response larger than {MAX_RESPONSE_BYTES} bytes")
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidResponse("response is not JSON") from None
    if not isinstance(value, dict):
        raise InvalidResponse(f"response is a JSON {_kind(value)}, expected an object")
    return value


def _kind(value: object) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")


def _text(value: object, field: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidResponse(f"`{field}` must be a string")
    cleaned = "".join(ch if ch.isprintable() else " " for ch in value[:MAX_TEXT]).strip()
    return cleaned or None


def _verdict(data: dict[str, Any]) -> Verdict:
    allowed = data.get("allowed")
    if not isinstance(allowed, bool):
        raise InvalidResponse("`allowed` must be true or false")
    code = data.get("code")
    if code is not None and (isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 999):
        raise InvalidResponse("`code` must be an HTTP status code")
    details = data.get("details")
    if details is not None:
        if (
            not isinstance(details, dict)
            or len(details) > 64
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in details.items())
        ):
            raise InvalidResponse("`details` must be an object of at most 64 strings")
        details = {k[:MAX_TEXT]: v[:MAX_TEXT] for k, v in details.items()}
    return Verdict(
        allowed=allowed,
        code=code or None,
        message=_text(data.get("message"), "message"),
        reason=_text(data.get("reason"), "reason"),
        details=details or None,
    )


def parse_validating(body: bytes) -> Verdict:
    """A validating webhook's answer (raises InvalidResponse)."""
    return _verdict(_object(body))


def _pointer(value: object, field: str, index: int) -> str:
    if not isinstance(value, str) or not value.startswith(SCOPE):
        raise InvalidResponse(f"patch[{index}].{field} must be a JSON pointer under {SCOPE}")
    try:
        jsonpointer.JsonPointer(value)
    except jsonpointer.JsonPointerException:
        raise InvalidResponse(f"patch[{index}].{field} is not a JSON pointer") from None
    return value


def _operations(patch: object) -> tuple[dict[str, Any], ...]:
    if not isinstance(patch, list):
        raise InvalidResponse("`patch` must be an array of JSON Patch operations")
    if len(patch) > MAX_PATCH_OPS:
        raise InvalidResponse(f"`patch` has more than {MAX_PATCH_OPS} operations")
    ops: list[dict[str, Any]] = []
    for i, op in enumerate(patch):
        if not isinstance(op, dict) or op.get("op") not in _OPS:
            raise InvalidResponse(f"patch[{i}].op must be one of {', '.join(sorted(_OPS))}")
        clean: dict[str, Any] = {"op": op["op"], "path": _pointer(op.get("path"), "path", i)}
        if op["op"] in ("copy", "move"):
            clean["from"] = _pointer(op.get("from"), "from", i)
        if op["op"] in ("add", "replace", "test"):
            if "value" not in op:
                raise InvalidResponse(f"patch[{i}]: {op['op']} needs a value")
            clean["value"] = op["value"]
        ops.append(clean)
    return tuple(ops)


def parse_mutating(body: bytes) -> Mutation:
    """A mutating webhook's answer with its patch checked for shape and scope (raises InvalidResponse)."""
    data = _object(body)
    verdict = _verdict(data)
    patch_type, patch = data.get("patch_type"), data.get("patch")
    if not verdict.allowed or patch_type in (None, "") or patch is None or patch == []:
        return Mutation(verdict)
    if patch_type != PATCH_TYPE:
        raise InvalidResponse(f"`patch_type` must be {PATCH_TYPE!r}")
    ops = _operations(patch)
    # orjson read any integer beyond 64 bits as a float: a client sending one gets -32600, and a
    # patch must not put one in on its behalf (the server would see a float in its place).
    if jsonrpc.has_wide_integer(body):
        raise InvalidResponse(
            "`patch` holds an integer outside the 64-bit range (refused in a client's request)"
        )
    return Mutation(verdict, ops)


def apply_patch(mcp_request: bytes, patch: tuple[dict[str, Any], ...], max_depth: int) -> bytes:
    """`mcp_request` rewritten by `patch`, checked to be one JSON-RPC request with the same `id`
    within `MAX_REQUEST_BYTES` and `max_depth` (raises InvalidResponse)."""
    original = orjson.loads(mcp_request)
    patched: Any = {"mcp_request": orjson.loads(mcp_request)}  # a copy of its own: patched in place
    for i, op in enumerate(patch):
        try:
            patched = jsonpatch.JsonPatch([op]).apply(patched, in_place=True)
        except (
            jsonpatch.JsonPatchException,
            jsonpointer.JsonPointerException,
            TypeError,
            ValueError,
            KeyError,
            IndexError,
            RecursionError,
        ):
            # One operation at a time, so the failing one is named. The library's message quotes
            # the document (values a webhook put in included): never shown.
            raise InvalidResponse(f"patch cannot be applied: {_describe_op(i, op)} failed") from None
    result = patched.get("mcp_request") if isinstance(patched, dict) else None
    try:
        body = orjson.dumps(result)
    except (TypeError, orjson.JSONEncodeError):
        raise InvalidResponse("patched request cannot be encoded as JSON") from None
    if len(body) > MAX_REQUEST_BYTES:
        raise InvalidResponse(f"patched request larger than {MAX_REQUEST_BYTES} bytes")
    try:
        kind = jsonrpc.check_message(jsonrpc.decode(body, max_depth))
    except jsonrpc.MessageError as exc:
        raise InvalidResponse(f"patched request is not a valid JSON-RPC request: {_short(exc)}") from None
    if kind != "request" or not isinstance(result, dict):
        raise InvalidResponse("patched request is not a JSON-RPC request")
    if result.get("id") != original.get("id") or type(result.get("id")) is not type(original.get("id")):
        raise InvalidResponse("patch must not change the request id")
    return body


def _describe_op(index: int, op: dict[str, Any]) -> str:
    """`patch[2] (move from /mcp_request/a to /mcp_request/b)`: the operation, never its value."""
    where = (
        f"from {_shown(op['from'])} to {_shown(op['path'])}" if "from" in op else f"at {_shown(op['path'])}"
    )
    return f"patch[{index}] ({op['op']} {where})"


def _shown(pointer: str) -> str:
    """A pointer as a message may show it: printable (it reaches the log too), at most 120 characters."""
    text = pointer if pointer.isprintable() else pointer.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 120 else text[:119] + "…"


def _short(exc: Exception) -> str:
    return str(exc)[:200]
