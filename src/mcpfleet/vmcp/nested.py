"""Calls the gateway makes on a client's behalf: through `call_tool` and from code-mode scripts.

Each such call is a tools/call of the caller's own (`Dispatcher.call_tool`: routing, authorization,
tracing), and this module adds what a client's own request gets at the HTTP front:

- the rate limits: a backend call is charged to the buckets it would take if the client had made
  it directly. The tool's own buckets always; the server-level ones (`shared`, `perUser`) for each
  call a script makes, since the script request took them once for up to `maxToolCalls` calls. A
  `call_tool` request took them itself, for its one call. The meta tools are not charged (the
  calls they make are).
- the audit: one event per call, naming the real tool, its backend and outcome, with `parent`
  linking it to the client's request (its JSON-RPC id and the meta tool it went through).
- the recursion rule: `Via.in_script` marks every call made while a script runs, by any path, so
  `execute_tool_script` refuses to start another script (see `Dispatcher._script`).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcpfleet import ratelimit
from mcpfleet.policy.guard import FORBIDDEN
from mcpfleet.vmcp import auditing
from mcpfleet.vmcp.codemode import SCRIPT_TOOL
from mcpfleet.vmcp.optimizer import META_TOOLS
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    from mcpfleet.vmcp.context import CallContext
    from mcpfleet.vmcp.dispatch import Dispatcher

UNCHARGED = META_TOOLS | {SCRIPT_TOOL}


@dataclass(frozen=True)
class Via:
    """How a call was made for a client's request: through which meta tool, for which request."""

    tool: str
    """`call_tool` or `execute_tool_script`: what made the call."""
    request_id: Any
    """The JSON-RPC id of the client's request (the outermost one when calls nest)."""
    in_script: bool
    """Made while a script runs (directly, or through call_tool from the script)."""

    def wire(self) -> dict[str, Any]:
        """The audit event's `parent` field."""
        return {"requestId": self.request_id, "via": self.tool}


def inner_context(ctx: CallContext, tool: str, **changes: Any) -> CallContext:
    """The context of a call made through meta tool `tool` while serving `ctx`."""
    outer = ctx.via
    via = Via(
        tool=tool,
        request_id=outer.request_id if outer is not None else ctx.client_id,
        in_script=tool == SCRIPT_TOOL or (outer is not None and outer.in_script),
    )
    return dataclasses.replace(ctx, backend=None, via=via, **changes)


async def call(gw: Dispatcher, tool: str, arguments: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
    """`tool` called for the client of `ctx` (made by `inner_context`): charged, run, audited."""
    assert ctx.via is not None
    started = time.perf_counter()
    outcome, reason = "error", None
    params = {"name": tool, "arguments": arguments}
    audit = gw.policy.audit
    response: Any = None
    try:
        await _charge(gw, tool, ctx)
        result = await gw.call_tool(params, ctx)
        outcome = "tool_error" if result.get("isError") is True else "success"
        if audit is not None:
            outcome = audit.outcome(outcome, application=True)
        response = result
        return result
    except RPCError as exc:
        if exc.code == FORBIDDEN:
            outcome = "denied"
        elif exc.code == ratelimit.RATE_LIMITED:
            outcome = "rate_limited"
        elif audit is not None:
            outcome = audit.outcome("error", application=True)
        reason = exc.message
        response = {"code": exc.code, "message": exc.message}
        raise
    finally:
        if audit is not None and audit.wants("tools/call"):
            session_id = ctx.session.id if ctx.session is not None else None
            auditing.nested_call(audit, params, outcome, started, ctx, reason, session_id, response)


async def _charge(gw: Dispatcher, tool: str, ctx: CallContext) -> None:
    """Take the call's tokens (see the module docstring); RPCError RATE_LIMITED when one is empty."""
    limiter = gw.limiter
    if limiter is None or tool in UNCHARGED:
        return
    assert ctx.via is not None
    refused = await limiter.check(ctx.caller.subject, "tools/call", tool, server=ctx.via.in_script)
    if refused is not None:
        error = ratelimit.error(None, refused)["error"]
        raise RPCError(error["code"], error["message"], error["data"])
