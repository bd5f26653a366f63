"""Code mode: `execute_tool_script` runs an agent's Starlark script that calls the gateway's tools.

Each script runs in its own short-lived process (`codemode_worker.py`) with an address-space limit,
so no script can take the gateway's memory or its event loop; a spare process is kept started so a
script does not wait for the interpreter to start. Every tool call the script makes comes back
here and goes through `call`, the gateway's normal tools/call path (routing, filters, overrides,
authorization and tracing apply to each call as to a client's own). Calls inside `parallel()` run
concurrently, at most `parallelMaxConcurrency` at once.

Tools are callable by their advertised names (characters not allowed in a Starlark identifier
become `_`), and by `call_tool("name", {...})` for any name.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from mcpfleet.api.duration import parse_duration
from mcpfleet.api.gatewayconfig import CodeMode
from mcpfleet.vmcp import wire
from mcpfleet.vmcp.wire import RPCError

log = logging.getLogger(__name__)

SCRIPT_TOOL = "execute_tool_script"
WORKER = Path(__file__).with_name("codemode_worker.py")
MAX_CALL_DEPTH = 100
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")
# Names a tool function may not take: Starlark keywords and the script's own builtins.
_RESERVED = frozenset(
    """and as assert async await break class continue def del elif else except finally for from
    global if import in is lambda load nonlocal not or pass raise return try while with yield
    parallel call_tool json struct print True False None""".split()
)

CallTool = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


def tool_definition(cfg: CodeMode) -> dict[str, Any]:
    """The execute_tool_script tool as advertised (and indexed by the optimizer)."""
    return {
        "name": SCRIPT_TOOL,
        "description": (
            "Run a Starlark script that calls several tools server-side in one request and returns "
            "one result. Every tool is a function of its name taking keyword arguments, e.g. "
            "`r = github_list_issues(repo='a/b')`; `call_tool('name', {...})` calls any tool by name. "
            "`parallel([lambda: a(x=1), lambda: b(y=2)])` runs calls concurrently and returns their "
            "results in order. A tool's result is its structured content, or its text (parsed as "
            "JSON when it is JSON); a failing tool stops the script with an error naming the line. "
            "The script's value is its last expression, or what a top-level `return` returns. "
            f"Limits: {cfg.step_limit} steps, {cfg.max_tool_calls} tool calls, "
            f"{cfg.script_timeout} in all, {cfg.max_output_bytes} bytes of result; no other I/O."
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "script": {
                    "type": "string",
                    "description": "Starlark source",
                    "maxLength": cfg.max_script_bytes,
                },
            },
            "required": ["script"],
            "additionalProperties": False,
        },
    }


def function_name(tool: str) -> str:
    """The Starlark function name of a tool."""
    name = _NOT_IDENT.sub("_", tool)
    if not name or name[0].isdigit() or name in _RESERVED:
        name = "tool_" + name
    return name


def tool_value(result: dict[str, Any]) -> Any:
    """What a script sees of a tools/call result (raises ToolFailed for an error result)."""
    texts = [
        c.get("text", "")
        for c in result.get("content") or []
        if isinstance(c, dict) and c.get("type") == "text"
    ]
    if result.get("isError") is True:
        raise ToolFailed(" ".join(texts)[:2000] or "tool returned an error")
    parsed: Any = None
    if len(texts) == 1:
        parsed = texts[0]
        with contextlib.suppress(ValueError):
            parsed = json.loads(texts[0])
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        # SDK servers wrap a plain return value as {"result": value} beside its text: the value itself.
        if set(structured) == {"result"} and structured["result"] == parsed:
            return parsed
        return structured
    if len(texts) == 1:
        return parsed
    if texts:
        return texts
    return result.get("content") or None


class ToolFailed(Exception):
    pass


class CodeRunner:
    """Runs scripts; one per gateway (its spare worker process is shared)."""

    def __init__(self, cfg: CodeMode) -> None:
        self.cfg = cfg
        self._spare: asyncio.subprocess.Process | None = None

    async def _spawn(self) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            str(WORKER),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=self.cfg.max_output_bytes + 65_536,
        )

    async def _worker(self) -> asyncio.subprocess.Process:
        proc, self._spare = self._spare, None
        if proc is None or proc.returncode is not None:
            proc = await self._spawn()
        with contextlib.suppress(OSError):
            self._spare = await self._spawn()
        return proc

    async def close(self) -> None:
        proc, self._spare = self._spare, None
        if proc is not None and proc.returncode is None:
            proc.kill()
            with contextlib.suppress(Exception):
                await proc.wait()

    def validate(self, arguments: Any) -> str:
        """The script of an execute_tool_script call; RPCError naming the field otherwise."""
        if not isinstance(arguments, dict):
            raise RPCError(wire.INVALID_PARAMS, f"{SCRIPT_TOOL}: arguments must be an object")
        extra = sorted(set(arguments) - {"script"})
        if extra:
            raise RPCError(wire.INVALID_PARAMS, f"{SCRIPT_TOOL}: arguments.{extra[0]}: unknown argument")
        script = arguments.get("script")
        if not isinstance(script, str) or not script.strip():
            raise RPCError(
                wire.INVALID_PARAMS, f"{SCRIPT_TOOL}: arguments.script: must be a non-empty string"
            )
        size = len(script.encode())
        if size > self.cfg.max_script_bytes:
            raise RPCError(
                wire.INVALID_PARAMS,
                f"{SCRIPT_TOOL}: arguments.script: {size} bytes, more than {self.cfg.max_script_bytes} "
                "(codeMode.maxScriptBytes)",
            )
        return script

    async def run(self, script: str, tools: Iterable[str], call: CallTool) -> dict[str, Any]:
        """Run `script` with `tools` callable through `call`; a tools/call result (isError on failure)."""
        used = set(_IDENT.findall(script))
        functions = {f: t for t in tools if (f := function_name(t)) in used}
        timeout = parse_duration(self.cfg.script_timeout)
        job = {
            "script": script,
            "functions": functions,
            "stepLimit": self.cfg.step_limit,
            "timeout": timeout,
            "maxCallDepth": MAX_CALL_DEPTH,
            "maxToolCalls": self.cfg.max_tool_calls,
            "maxOutputBytes": self.cfg.max_output_bytes,
            "memoryLimitMb": self.cfg.memory_limit_mb,
        }
        proc = await self._worker()
        try:
            async with asyncio.timeout(timeout + 2.0):
                answer = await self._converse(proc, job, call)
        except TimeoutError:
            answer = {
                "op": "error",
                "message": f"time limit exceeded ({self.cfg.script_timeout})",
                "line": None,
            }
        finally:
            if proc.returncode is None:
                proc.kill()
            with contextlib.suppress(Exception):
                await proc.wait()
        if answer.get("op") == "done":
            value = answer.get("result")
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
            res: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
            res["structuredContent"] = value if isinstance(value, dict) else {"result": value}
            return res
        line = answer.get("line")
        where = f"script line {line}: " if line else "script: "
        return {"content": [{"type": "text", "text": where + str(answer.get("message"))}], "isError": True}

    async def _converse(
        self, proc: asyncio.subprocess.Process, job: dict[str, Any], call: CallTool
    ) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout
        proc.stdin.write(json.dumps(job).encode() + b"\n")
        await stdin.drain()
        gate = asyncio.Semaphore(self.cfg.parallel_max_concurrency)
        per_call = parse_duration(self.cfg.tool_call_timeout)
        lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()

        async def one(cid: Any, name: str, arguments: Any) -> None:
            reply: dict[str, Any] = {"id": cid}
            try:
                if not isinstance(arguments, dict):
                    raise ToolFailed(f"{name}: arguments must be a dict")
                async with gate:
                    async with asyncio.timeout(per_call):
                        reply["result"] = tool_value(await call(name, arguments))
            except ToolFailed as exc:
                reply["error"] = f"tool {name} failed: {exc}"
            except TimeoutError:
                reply["error"] = (
                    f"tool {name}: no answer within {self.cfg.tool_call_timeout} (codeMode.toolCallTimeout)"
                )
            except RPCError as exc:
                reply["error"] = f"tool {name}: {exc.message}"
            except Exception as exc:  # the script must get an answer, or it would wait to its deadline
                log.exception("code mode: tool call %s failed", name)
                reply["error"] = f"tool {name}: internal error ({type(exc).__name__})"
            async with lock:
                with contextlib.suppress(OSError):
                    stdin.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
                    await stdin.drain()

        try:
            while True:
                try:
                    line = await stdout.readline()
                except ValueError:
                    return {"op": "error", "message": "script output too large", "line": None}
                if not line:
                    return {"op": "error", "message": await _end_cause(proc), "line": None}
                msg = json.loads(line)
                if msg.get("op") != "call":
                    return dict(msg)
                t = asyncio.create_task(one(msg.get("id"), str(msg.get("name")), msg.get("arguments")))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
        finally:
            for t in tasks:
                t.cancel()


async def _end_cause(proc: asyncio.subprocess.Process) -> str:
    """Why a script process ended without answering: its CPU limit (RLIMIT_CPU: soft SIGXCPU, hard
    SIGKILL) reads as the time limit it backs up; anything else, most likely the memory limit."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 1.0)
    if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "time limit exceeded (CPU)"
    return "script process ended unexpectedly (memory or CPU limit)"
