"""The gateway's audit events: one per client request, one per call made for a client.

`record` writes one event to the audit log (the caller's claims, client and trace id, the
backend, the outcome); `refusal` is the event of a request answered before dispatch (over the rate
limits); `nested_call` that of a tools/call made through call_tool or by a script, linked to the
client's request (`vmcp/nested.py`). Which methods are audited is the log's (`AuditLog.wants`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from mcpfleet.policy.audit import AuditLog, trace_id_of
from mcpfleet.vmcp.context import CALLER, NOBODY, Caller

if TYPE_CHECKING:
    from mcpfleet.vmcp.context import CallContext


def record(
    audit: AuditLog,
    method: str,
    params: Any,
    outcome: str,
    started: float,
    caller: Caller,
    backend: str | None,
    request_id: Any,
    reason: str | None,
    session_id: str | None,
    parent: dict[str, Any] | None = None,
    response: Any = None,
) -> None:
    """One audit event (`started`: the request's `time.perf_counter()`)."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    traceparent = caller.traceparent or (meta.get("traceparent") if isinstance(meta, dict) else None)
    audit.record(
        method=method,
        params=params,
        outcome=outcome,
        duration=time.perf_counter() - started,
        claims=caller.claims,
        client=caller.client,
        backend=backend,
        request_id=request_id,
        trace_id=trace_id_of(traceparent if isinstance(traceparent, str) else None),
        reason=reason,
        session_id=session_id,
        parent=parent,
        response=response,
    )


def refusal(
    audit: AuditLog | None,
    msg: dict[str, Any],
    outcome: str,
    reason: str,
    started: float,
    session_id: str | None,
) -> None:
    """The audit event of a request answered before dispatch (over the rate limits)."""
    method = msg.get("method")
    if audit is None or not isinstance(method, str) or not audit.wants(method):
        return
    caller = CALLER.get() or NOBODY
    record(
        audit, method, msg.get("params"), outcome, started, caller, None, msg.get("id"), reason, session_id
    )


def nested_call(
    audit: AuditLog,
    params: dict[str, Any],
    outcome: str,
    started: float,
    ctx: CallContext,
    reason: str | None,
    session_id: str | None,
    response: Any = None,
) -> None:
    """The audit event of a tools/call made for a client (`nested.call`), linked to its request."""
    parent = ctx.via.wire() if ctx.via is not None else None
    record(
        audit,
        "tools/call",
        params,
        outcome,
        started,
        ctx.caller,
        ctx.backend,
        None,
        reason,
        session_id,
        parent,
        response,
    )
