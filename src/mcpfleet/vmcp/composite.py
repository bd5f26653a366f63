"""Composite tools: a tool whose steps call backend tools, run as a DAG.

Steps start as soon as everything in their `dependsOn` has finished, so independent steps run in
parallel. String arguments may hold templates in ToolHive's Go-template style:
`{{.params.city}}`, `{{.steps.fetch.output.text}}`, `{{.steps.fetch.output}}`; a string that is
exactly one template keeps the value's type. A step's `output` is the backend result's
`structuredContent` when present, else `{"text": <joined text content>}`; `content` and `isError`
are there too. `condition` is a template that must render truthy (`eq`, `ne`, `not`, `and`, `or`
are understood). `onError`: `abort` (default) fails the tool, `continue` records the error and
uses `defaultResults` as the output, `retry` retries `retryCount` (or `maxRetries`) times after
`retryDelay`.

A `forEach` step renders `collection` to a list and runs its inner tool `step` once per item (at
most `maxParallel` at once, at most `maxIterations` items), the item as `{{.forEach.item}}` (or the
`itemVar` name) and its position as `{{.forEach.index}}`; its output is `{iterations, count,
completed, failed}`, and a failed item fails the step (under the step's `onError`).

An `elicitation` step asks the calling client's user (`elicitation/create` with the step's rendered
`message` and its `schema` as `requestedSchema`) and waits up to the step's timeout. Accepted, its
output is the answer's fields plus `action` and `content` (`{{.steps.confirm.output.proceed}}`).
Declined or cancelled, `onDecline` / `onCancel` decide: `abort` (default) fails the tool,
`continue` goes on with `defaultResults` (else `{"action": ...}`) as the output, `skip_remaining`
ends the tool successfully without running the steps not yet started. A client that cannot answer
(no elicitation capability, no back channel) counts as a cancel.

With a tracer, a run is an INTERNAL span `composite <tool>` and each step a child span
`composite.step <id>` (outcome ok / skipped / continued / failed, attempts); the backend calls a
step makes are CLIENT spans under it (the context travels into the step tasks with contextvars).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import shlex
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import SpanKind

from mcpfleet import telemetry
from mcpfleet.api.duration import parse_duration
from mcpfleet.api.gatewayconfig import (
    DEFAULT_FOREACH_ITERATIONS,
    DEFAULT_FOREACH_PARALLEL,
    MAX_OUTPUT_DEPTH,
    CompositeTool,
    StepOnError,
    WorkflowStep,
)
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

StepCall = Callable[[str, dict[str, Any], Any, "float | None"], Awaitable[dict[str, Any]]]
Elicit = Callable[[str, dict[str, Any], Any, "float | None"], Awaitable[dict[str, Any]]]
"""(message, requestedSchema, call context, time limit) -> the client's `ElicitResult` (`action`,
`content`); raises RPCError / TimeoutError when the client cannot answer."""
DEFAULT_ELICIT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

# No `}}` inside one template: "{{.a}}-{{.b}}" is two templates, not one spanning both.
_TEMPLATE = re.compile(r"\{\{\s*((?:(?!\}\}).)*?)\s*\}\}")
_MISSING = object()


class StepFailed(Exception):
    pass


class SkipRemaining(Exception):
    """An elicitation answered decline / cancel under `skip_remaining`: the tool ends successfully."""

    def __init__(self, step: str, action: str) -> None:
        super().__init__(f"step {step!r}: the user chose {action}; the remaining steps were skipped")
        self.step = step
        self.action = action


async def _no_client(message: str, schema: dict[str, Any], ctx: Any, limit: float | None) -> dict[str, Any]:
    raise RPCError(-32601, "no client to ask")


def _lookup(path: str, scope: dict[str, Any]) -> Any:
    cur: Any = scope
    for part in path.lstrip(".").split("."):
        if not part:
            continue
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def _atom(tok: str, scope: dict[str, Any]) -> Any:
    if tok.startswith("."):
        return _lookup(tok, scope)
    if tok in ("true", "false"):
        return tok == "true"
    try:
        return json.loads(tok)
    except ValueError:
        return tok


def _truthy(v: Any) -> bool:
    if v is _MISSING or v is None:
        return False
    if isinstance(v, str):
        return v.strip().lower() not in ("", "false", "0", "<no value>")
    return bool(v)


def _eval(expr: str, scope: dict[str, Any]) -> Any:
    try:
        toks = shlex.split(expr, posix=True)
    except ValueError:
        toks = expr.split()
    # shlex drops the quotes: re-quote literals that came quoted so _atom keeps them strings.
    raw = expr.split()
    if not toks:
        return ""
    fn, args = toks[0], toks[1:]
    if fn in ("eq", "ne", "and", "or", "not", "gt", "lt"):
        quoted = [r.startswith(('"', "'")) for r in raw[1:]] + [False] * len(args)
        vals = [a if q else _atom(a, scope) for a, q in zip(args, quoted, strict=False)]
        if fn == "eq":
            return len(vals) >= 2 and all(_norm(v) == _norm(vals[0]) for v in vals[1:])
        if fn == "ne":
            return len(vals) == 2 and _norm(vals[0]) != _norm(vals[1])
        if fn == "not":
            return not _truthy(vals[0]) if vals else True
        if fn == "and":
            return all(_truthy(v) for v in vals)
        if fn == "or":
            return any(_truthy(v) for v in vals)
        try:
            a, b = float(vals[0]), float(vals[1])
        except (TypeError, ValueError, IndexError):
            return False
        return a > b if fn == "gt" else a < b
    if len(toks) == 1:
        return _atom(toks[0], scope)
    raise RPCError(-32602, f"unsupported template expression {{{{{expr}}}}}")


def _norm(v: Any) -> Any:
    return v if not isinstance(v, (int, float)) or isinstance(v, bool) else float(v)


def _to_text(v: Any) -> str:
    if v is _MISSING:
        return "<no value>"
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def render(value: Any, scope: dict[str, Any]) -> Any:
    """Expand templates in one argument value (first level strings only, like ToolHive)."""
    if not isinstance(value, str):
        return value
    m = _TEMPLATE.fullmatch(value.strip())
    if m is not None:
        v = _eval(m.group(1), scope)
        return None if v is _MISSING else v
    return _TEMPLATE.sub(lambda mm: _to_text(_eval(mm.group(1), scope)), value)


def step_output(result: dict[str, Any]) -> dict[str, Any]:
    content = result.get("content") or []
    text = "\n".join(c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text")
    sc = result.get("structuredContent")
    output: Any = sc if isinstance(sc, dict) else {"text": text}
    if isinstance(output, dict) and "text" not in output:
        output = {**output, "text": text}
    return {"output": output, "content": content, "isError": bool(result.get("isError"))}


class CompositeRunner:
    def __init__(self, call: StepCall, *, tracer: Tracer | None = None, elicit: Elicit | None = None) -> None:
        self._call = call
        self._tracer = tracer
        self._elicit = elicit or _no_client

    async def run(self, tool: CompositeTool, params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        if self._tracer is None:
            return await self._run(tool, params, ctx)
        attrs: dict[str, Any] = {
            telemetry.VMCP_COMPOSITE: tool.name,
            "mcpfleet.vmcp.composite.steps": len(tool.steps),
        }
        with telemetry.current_span(self._tracer, f"composite {tool.name}", SpanKind.INTERNAL, attrs) as span:
            result = await self._run(tool, params, ctx)
            if result.get("isError"):
                texts = [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict)]
                telemetry.record_error(span, "tool_error", "\n".join(texts) or None)
            return result

    async def _run(self, tool: CompositeTool, params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        total = parse_duration(tool.timeout) if tool.timeout else None
        try:
            async with asyncio.timeout(total):
                scope = await self._run_dag(tool, params, ctx)
        except TimeoutError:
            return _error_result(f"composite tool {tool.name!r} timed out after {tool.timeout}")
        except ExceptionGroup as group:
            # An aborting step cancels the steps still running (TaskGroup semantics).
            first = group.exceptions[0]
            if isinstance(first, SkipRemaining):
                return {"content": [{"type": "text", "text": str(first)}], "isError": False}
            if isinstance(first, (StepFailed, RPCError)):
                return _error_result(str(first))
            raise
        return self._result(tool, scope)

    async def _run_dag(self, tool: CompositeTool, params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        defaults = {
            k: v.get("default")
            for k, v in (tool.parameters.get("properties") or {}).items()
            if "default" in v
        }
        scope: dict[str, Any] = {"params": {**defaults, **params}, "steps": {}}
        steps = {s.id: s for s in tool.steps}
        done: dict[str, asyncio.Event] = {s.id: asyncio.Event() for s in tool.steps}

        async def run_step(s: WorkflowStep) -> None:
            for dep in s.depends_on:
                await done[dep].wait()
            try:
                scope["steps"][s.id] = await self._step(s, scope, ctx)
            finally:
                done[s.id].set()

        async with asyncio.TaskGroup() as tg:
            for s in steps.values():
                tg.create_task(run_step(s))
        return scope

    async def _step(self, s: WorkflowStep, scope: dict[str, Any], ctx: Any) -> dict[str, Any]:
        if self._tracer is None:
            return await self._run_step(s, scope, ctx, None)
        attrs = {telemetry.VMCP_STEP_ID: s.id, telemetry.VMCP_STEP_TOOL: s.tool}
        with telemetry.current_span(self._tracer, f"composite.step {s.id}", SpanKind.INTERNAL, attrs) as span:
            try:
                out = await self._run_step(s, scope, ctx, span)
            except StepFailed as exc:
                span.set_attribute(telemetry.VMCP_OUTCOME, "failed")
                telemetry.record_error(span, "step_failed", str(exc))
                raise
            except BaseException as exc:
                cancelled = isinstance(exc, asyncio.CancelledError)
                span.set_attribute(telemetry.VMCP_OUTCOME, "cancelled" if cancelled else "failed")
                telemetry.record_error(span, type(exc).__qualname__, None if cancelled else str(exc))
                raise
            if out.get("skipped"):
                outcome = "skipped"
            elif out.get("isError"):
                outcome = "continued"
                telemetry.record_error(span, "step_failed", out.get("error"))
            else:
                outcome = "ok"
            span.set_attribute(telemetry.VMCP_OUTCOME, outcome)
            return out

    async def _run_step(
        self, s: WorkflowStep, scope: dict[str, Any], ctx: Any, span: Span | None
    ) -> dict[str, Any]:
        if s.condition is not None and not _truthy(render(s.condition, scope)):
            return {"output": dict(s.default_results or {}), "content": [], "isError": False, "skipped": True}
        timeout = parse_duration(s.timeout) if s.timeout else None
        if s.type == "elicitation":
            return await self._ask(s, scope, ctx, timeout)
        if s.type == "forEach":
            out = await self._for_each(s, scope, ctx, timeout)
        else:
            assert s.tool is not None  # the model requires it for tool steps
            args = {k: render(v, scope) for k, v in s.arguments.items()}
            out = await self._call_with_retries(s.tool, args, s.on_error, s.timeout, ctx, span)
        if not out["isError"]:
            return out
        if s.on_error.action == "continue":
            return {
                "output": dict(s.default_results or out.get("partial") or {}),
                "content": [],
                "isError": True,
                "error": out["error"],
            }
        raise StepFailed(f"step {s.id!r} ({s.tool or 'forEach'}) failed: {out['error']}")

    async def _call_with_retries(
        self,
        tool: str,
        args: dict[str, Any],
        on_error: StepOnError,
        time_limit: str | None,
        ctx: Any,
        span: Span | None,
    ) -> dict[str, Any]:
        """One tool call, retried as `on_error` says: its step output, or `{isError, error}`."""
        limit = parse_duration(time_limit) if time_limit else None
        attempts = 1 + (on_error.retries if on_error.action == "retry" else 0)
        delay = parse_duration(on_error.retry_delay) if on_error.retry_delay else 0.0
        error = ""
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(delay)
            if span is not None:
                span.set_attribute(telemetry.VMCP_STEP_ATTEMPTS, attempt + 1)
            try:
                res = await self._call(tool, args, ctx, limit)
            except RPCError as exc:
                error = exc.message
                continue
            except TimeoutError:
                error = f"timed out after {time_limit}"
                continue
            out = step_output(res)
            if not out["isError"]:
                return out
            error = out["output"].get("text") or "tool returned an error"
        return {"isError": True, "error": error}

    async def _for_each(
        self, s: WorkflowStep, scope: dict[str, Any], ctx: Any, time_limit: float | None
    ) -> dict[str, Any]:
        """Run the inner tool step once per item of the rendered collection, at most `maxParallel`
        at once. Output: `{iterations: [{index, item, output, isError, error?}], count, completed,
        failed}`; the step fails (subject to its own onError) when an item failed."""
        items = render(s.collection or "", scope)
        if isinstance(items, str):
            try:
                items = json.loads(items)
            except ValueError:
                pass
        if not isinstance(items, list):
            return {"isError": True, "error": f"collection rendered to {type(items).__name__}, not a list"}
        limit = s.max_iterations or DEFAULT_FOREACH_ITERATIONS
        if len(items) > limit:
            return {
                "isError": True,
                "error": f"collection has {len(items)} items, more than maxIterations {limit}",
            }
        inner = s.inner
        var = s.item_var or "item"
        gate = asyncio.Semaphore(s.max_parallel or DEFAULT_FOREACH_PARALLEL)

        async def one(index: int, item: Any) -> dict[str, Any]:
            async with gate:
                local = {**scope, "forEach": {var: item, "index": index}}
                args = {k: render(v, local) for k, v in inner.arguments.items()}
                out = await self._call_with_retries(
                    inner.tool, args, inner.on_error, inner.timeout, ctx, None
                )
            entry: dict[str, Any] = {"index": index, "item": item, "isError": out["isError"]}
            entry["output"] = out.get("output", {})
            if out["isError"]:
                entry["error"] = out["error"]
            return entry

        try:
            async with asyncio.timeout(time_limit):
                iterations = await asyncio.gather(*(one(i, item) for i, item in enumerate(items)))
        except TimeoutError:
            return {"isError": True, "error": f"timed out after {s.timeout}"}
        failed = sum(1 for it in iterations if it["isError"])
        output = {
            "iterations": list(iterations),
            "count": len(iterations),
            "completed": len(iterations) - failed,
            "failed": failed,
        }
        if failed:
            first = next(it for it in iterations if it["isError"])
            error = f"{failed} of {len(iterations)} items failed (item {first['index']}: {first['error']})"
            return {"isError": True, "error": error, "partial": output}
        return {"output": output, "content": [{"type": "text", "text": json.dumps(output)}], "isError": False}

    async def _ask(
        self, s: WorkflowStep, scope: dict[str, Any], ctx: Any, time_limit: float | None
    ) -> dict[str, Any]:
        message = _to_text(render(s.message or "", scope))
        try:
            answer = await self._elicit(message, s.schema_ or DEFAULT_ELICIT_SCHEMA, ctx, time_limit)
        except (RPCError, TimeoutError):
            answer = {"action": "cancel"}
        action = answer.get("action") if isinstance(answer, dict) else None
        if action == "accept":
            raw = answer.get("content")
            content: dict[str, Any] = raw if isinstance(raw, dict) else {}
            output = {**content, "action": "accept", "content": content}
            return {
                "output": output,
                "content": [{"type": "text", "text": json.dumps(content)}],
                "isError": False,
            }
        action = "decline" if action == "decline" else "cancel"
        response = s.on_decline if action == "decline" else s.on_cancel
        what = response.action if response is not None else "abort"
        if what == "skip_remaining":
            raise SkipRemaining(s.id, action)
        if what == "continue":
            output = dict(s.default_results or {"action": action})
            return {"output": output, "content": [], "isError": False}
        raise StepFailed(f"step {s.id!r}: the user chose {action}")

    def _result(self, tool: CompositeTool, scope: dict[str, Any]) -> dict[str, Any]:
        if tool.output is not None:
            props = {
                n: p.model_dump(by_alias=True, exclude_none=True) for n, p in tool.output.properties.items()
            }
            out = _render_properties(props, scope)
            missing = [name for name in tool.output.required or () if name not in out]
            if missing:
                return _error_result(
                    f"composite tool {tool.name!r}: required output {', '.join(map(repr, missing))} rendered no value"
                )
            return {
                "content": [{"type": "text", "text": json.dumps(out)}],
                "structuredContent": out,
                "isError": False,
            }
        last = scope["steps"].get(tool.steps[-1].id) or {}
        content = last.get("content") or [{"type": "text", "text": json.dumps(last.get("output"))}]
        result: dict[str, Any] = {"content": content, "isError": bool(last.get("isError"))}
        return result


def _render_properties(props: dict[str, Any], scope: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """The structured output of `output.properties` (dicts, nested for object properties): each value
    rendered, defaulted and coerced to its type; a property with no value is left out."""
    out: dict[str, Any] = {}
    for name, prop in props.items():
        if not isinstance(prop, dict):
            continue
        typ = prop.get("type")
        nested = prop.get("properties")
        if typ == "object" and isinstance(nested, dict) and depth < MAX_OUTPUT_DEPTH:
            out[name] = _render_properties(nested, scope, depth + 1)
            continue
        v = render(prop["value"], scope) if isinstance(prop.get("value"), str) else None
        if v is None or v is _MISSING or v == "<no value>":
            v = prop.get("default")
        if v is None:
            continue
        v = _coerce(v, typ)
        if _is_type(v, typ):  # else no value: the answer must match the advertised outputSchema
            out[name] = v
    return out


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def _is_type(v: Any, typ: Any) -> bool:
    """`v` is a JSON value of type `typ` (a bool is no integer or number)."""
    kinds = _JSON_TYPES.get(typ) if isinstance(typ, str) else None
    if kinds is None:
        return False
    if isinstance(v, float) and not math.isfinite(v):
        return False  # "nan" / "inf" parse as floats but have no JSON form
    return isinstance(v, kinds) and (typ == "boolean" or not isinstance(v, bool))


def output_schema(tool: CompositeTool) -> dict[str, Any] | None:
    """The MCP `outputSchema` a composite tool with `output` advertises (None without one)."""
    if tool.output is None:
        return None
    props = {n: p.model_dump(by_alias=True, exclude_none=True) for n, p in tool.output.properties.items()}
    schema: dict[str, Any] = {"type": "object", "properties": _schema_properties(props, 0)}
    if tool.output.required:
        schema["required"] = list(tool.output.required)
    return schema


def _schema_properties(props: dict[str, Any], depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, prop in props.items():
        if not isinstance(prop, dict):
            continue
        entry: dict[str, Any] = {"type": prop.get("type")}
        if isinstance(prop.get("description"), str):
            entry["description"] = prop["description"]
        nested = prop.get("properties")
        if prop.get("type") == "object" and isinstance(nested, dict) and depth < MAX_OUTPUT_DEPTH:
            entry["properties"] = _schema_properties(nested, depth + 1)
        out[name] = entry
    return out


def _coerce(v: Any, typ: Any) -> Any:
    """`v` as the declared JSON type where it converts; else as it is."""
    if typ == "string":
        return v if isinstance(v, str) else _to_text(v)
    if not isinstance(v, str):
        if typ == "number" and isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        return v
    try:
        if typ == "integer":
            return int(v)
        if typ == "number":
            return float(v)
        if typ == "boolean":
            return v.strip().lower() == "true"
        if typ in ("object", "array"):
            return json.loads(v)
    except ValueError:
        return v
    return v


def _error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}
