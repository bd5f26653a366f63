"""Audit events: one JSON line per MCP request, to stdout or a file (`audit.enabled`, as ToolHive).

An event says when, who (`subject`: the token's `sub` / `iss`, never the token), from where
(`client`: address, user agent, the client's declared name), what (`method`, `target`), where it went
(`backend`), how it ended (`outcome`: success, denied, rate_limited, error, tool_error) and how long it took, with
the JSON-RPC request id and the W3C trace id. A call the gateway makes for a client (through `call_tool`,
or from a code-mode script) has its own event with `parent`: the client's request id and the meta tool. Argument *names* are logged; their values are
`[redacted]` unless `includeRequestData` is set (then cut at `maxDataSize` characters); the answer is
logged only with `includeResponseData`. A delegated token's RFC 8693 `act` chain is recorded as
`delegationChain` (outermost actor first, at most `maxDelegationDepth` entries).
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

import orjson

from mcpfleet.api.policy import AuditConfig
from mcpfleet.policy.guard import target_of

REDACTED = "[redacted]"

EVENT_TYPES: dict[str, str] = {
    "initialize": "mcp_initialize",
    "tools/call": "mcp_tool_call",
    "tools/list": "mcp_tools_list",
    "prompts/get": "mcp_prompt_get",
    "prompts/list": "mcp_prompts_list",
    "resources/read": "mcp_resource_read",
    "resources/list": "mcp_resources_list",
    "ping": "mcp_ping",
}


def event_type(method: str) -> str:
    return EVENT_TYPES.get(method, "mcp_request")


def trace_id_of(traceparent: str | None) -> str | None:
    """The trace id of a W3C `traceparent` (`00-<32 hex>-<16 hex>-<flags>`)."""
    if not traceparent:
        return None
    parts = traceparent.strip().split("-")
    if len(parts) >= 3 and len(parts[1]) == 32 and all(c in "0123456789abcdef" for c in parts[1]):
        return parts[1]
    return None


def subject_of(claims: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Who, from the claims: `sub` and `iss` (and `name` / `email` when present). Never the token."""
    if not claims:
        return None
    out = {k: v for k in ("sub", "iss", "name", "email") if isinstance(v := claims.get(k), str)}
    return out or None


def delegation_chain(claims: Mapping[str, Any] | None, max_depth: int) -> tuple[list[dict[str, str]], bool]:
    """The actors of a delegated token (RFC 8693 `act`, nested: the current actor first, then the
    one that delegated to it, ...) as `{sub, iss}` entries, at most `max_depth` of them, and whether
    the chain went deeper. Reads at most `max_depth + 1` levels whatever the token holds."""
    chain: list[dict[str, str]] = []
    act = claims.get("act") if claims else None
    while isinstance(act, Mapping):
        if len(chain) == max_depth:
            return chain, True
        chain.append({k: v for k in ("sub", "iss", "client_id") if isinstance(v := act.get(k), str)})
        act = act.get("act")
    return chain, False


@dataclass
class Client:
    """Where a request came from."""

    address: str | None = None
    user_agent: str | None = None
    name: str | None = None

    def wire(self) -> dict[str, str]:
        out = {"address": self.address, "userAgent": self.user_agent, "name": self.name}
        return {k: v for k, v in out.items() if v}


def open_private(path: str) -> IO[str]:
    """`path` for line-buffered appending, readable by its owner only: created 0600, and an
    existing file of ours with wider permissions narrowed to 0600. Audit lines carry who called,
    from where and the `sessionId` (the only key of a caller on an anonymous gateway). The folder
    is not created here: it must exist (a missing one is an error naming the file)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", buffering=1, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


class AuditLog:
    """Writes audit events for one component (a proxy, a gateway)."""

    def __init__(self, config: AuditConfig, component: str, stream: IO[str] | None = None) -> None:
        self.config = config
        self.component = config.component or component
        self._only = frozenset(config.event_types) if config.event_types else None
        self._never = frozenset(config.exclude_event_types or ())
        self._lock = threading.Lock()
        self._own = False
        if stream is not None:
            self._out: IO[str] = stream
        elif config.log_file:
            # Line-buffered append: each event reaches the file whole, in order.
            self._out = open_private(config.log_file)
            self._own = True
        else:
            self._out = sys.stdout

    def close(self) -> None:
        if self._own:
            self._out.close()

    def wants(self, method: str) -> bool:
        kind = event_type(method)
        return kind not in self._never and (self._only is None or kind in self._only)

    def outcome(self, outcome: str, *, application: bool) -> str:
        """The outcome to log: an error read from inside a delivered answer (`application`) counts
        only with detectApplicationErrors; else the transport delivered it, a success."""
        if application and not self.config.detect_application_errors:
            return "success"
        return outcome

    def _cut(self, value: Any) -> str:
        if isinstance(value, bytes | bytearray):
            value = bytes(value).decode("utf-8", "replace")  # an answer already serialized
        text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
        limit = self.config.max_data_size
        return text if len(text) <= limit else text[:limit] + "…"

    def arguments(self, params: Any) -> dict[str, Any] | None:
        """Tool / prompt arguments as logged: names always, values only with includeRequestData."""
        args = params.get("arguments") if isinstance(params, dict) else None
        if not isinstance(args, dict) or not args:
            return None
        if not self.config.include_request_data:
            return dict.fromkeys(args, REDACTED)
        return {key: self._cut(value) for key, value in args.items()}

    def record(
        self,
        *,
        method: str,
        params: Any = None,
        outcome: str,
        duration: float,
        claims: Mapping[str, Any] | None = None,
        client: Client | None = None,
        backend: str | None = None,
        request_id: Any = None,
        trace_id: str | None = None,
        reason: str | None = None,
        session_id: str | None = None,
        parent: Mapping[str, Any] | None = None,
        response: Any = None,
    ) -> None:
        """Write one event (nothing when the event type is filtered out). `response`: the answer's
        JSON-RPC `result` or `error` (logged with includeResponseData only)."""
        if not self.wants(method):
            return
        event: dict[str, Any] = {
            "time": datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z"),
            "type": "mcp_audit",
            "eventType": event_type(method),
            "component": self.component,
            "method": method,
            "outcome": outcome,
            "durationMs": round(duration * 1000, 3),
        }
        optional: dict[str, Any] = {
            "subject": subject_of(claims),
            "client": client.wire() if client is not None else None,
            "target": _target(method, params),
            "backend": backend,
            "requestId": request_id,
            "traceId": trace_id,
            "sessionId": session_id,
            "parent": dict(parent) if parent is not None else None,
            "arguments": self.arguments(params),
            "reason": reason,
            "response": self._cut(response)
            if response is not None and self.config.include_response_data
            else None,
        }
        chain, truncated = delegation_chain(claims, self.config.max_delegation_depth)
        if chain:
            optional["delegationChain"] = chain
            optional["delegationTruncated"] = truncated or None
        event.update({k: v for k, v in optional.items() if v is not None})
        line = orjson.dumps(event, default=str).decode() + "\n"
        with self._lock:
            self._out.write(line)
            if not self._own:
                self._out.flush()


def _target(method: str, params: Any) -> dict[str, str] | None:
    target = target_of(method, params)
    return {"type": target.feature, "name": target.name} if target is not None else None
