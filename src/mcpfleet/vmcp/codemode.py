"""Code mode: `execute_tool_script` runs an agent's Starlark script that calls the gateway's tools.

Each script runs in its own short-lived process (`codemode_worker.py`) with an address-space limit,
so no script can take the gateway's memory or its event loop; one spare process is kept started so
a script does not wait for the interpreter to start, and `maxConcurrentScripts` bounds the processes
(`CodeRunner`). Values the wire cannot carry (`unsendable`) are tool errors, never an HTTP 500. Every tool call the script makes comes back
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
import os
import re
import signal
import sys
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from mcpfleet.api.duration import parse_duration
from mcpfleet.api.gatewayconfig import CodeMode
from mcpfleet.deathsig import die_with_parent
from mcpfleet.vmcp import wire
from mcpfleet.vmcp.wire import RPCError

log = logging.getLogger(__name__)

SCRIPT_TOOL = "execute_tool_script"
WORKER = Path(__file__).with_name("codemode_worker.py")
MAX_CALL_DEPTH = 100
# Deepest list / dict nesting of a value a script passes to a tool or returns: well inside what the
# wire encoder takes (255 levels, the envelope included), and more than any tool's schema needs.
MAX_VALUE_DEPTH = 128
# Integers the wire carries exactly (orjson: signed and unsigned 64 bits); beyond, JSON clients differ.
_INT_RANGE = (-(1 << 63), (1 << 64) - 1)
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


WORKER_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
"""The only variables a script worker gets from the gateway (a Starlark interpreter needs none)."""


def worker_environment() -> dict[str, str]:
    return {name: os.environ[name] for name in WORKER_ENV if name in os.environ}


class CodeRunner:
    """Runs scripts; one per gateway (its spare worker process is shared).

    At most `maxConcurrentScripts` scripts run at once (one process each) and at most one spare
    process waits warm; as many scripts again wait for a slot (up to `scriptTimeout`), and a script
    beyond those is refused at once, so no burst of requests can start processes without bound.
    """

    def __init__(self, cfg: CodeMode) -> None:
        self.cfg = cfg
        self._spare: asyncio.subprocess.Process | None = None
        self._refilling = False
        self._closed = False
        self._slots = asyncio.Semaphore(cfg.max_concurrent_scripts)
        self._waiting = 0

    async def _spawn(self) -> asyncio.subprocess.Process:
        # A script worker needs no environment of the gateway's (which, hosted in `mcpfleet up`, is
        # the user's shell: tokens and all) and must not outlive it (the parent-death signal).
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            str(WORKER),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=self.cfg.max_output_bytes + 65_536,
            env=worker_environment(),
            preexec_fn=die_with_parent(),
        )

    async def _worker(self) -> asyncio.subprocess.Process:
        proc, self._spare = self._spare, None
        if proc is None or proc.returncode is not None:
            proc = await self._spawn()
        await self._refill()
        return proc

    async def _refill(self) -> None:
        """Start the one spare, unless there is one, one is being started, or the runner is closed
        (concurrent scripts used to each start one and overwrite the last: leaked processes)."""
        if self._spare is not None or self._refilling or self._closed:
            return
        self._refilling = True
        try:
            spare = await self._spawn()
        except OSError:
            return
        finally:
            self._refilling = False
        if self._spare is None and not self._closed:
            self._spare = spare
        else:
            await _discard(spare)

    async def drop_spare(self) -> None:
        """Stop the spare process (the next script starts a new one)."""
        proc, self._spare = self._spare, None
        if proc is not None:
            await _discard(proc)

    async def close(self) -> None:
        """Stop the spare; scripts still running finish, and start no new spare."""
        self._closed = True
        await self.drop_spare()

    async def _slot(self) -> str | None:
        """Take a script slot, waiting in a bounded queue: None when taken, else why not."""
        limit = self.cfg.max_concurrent_scripts
        if self._slots.locked() and self._waiting >= limit:
            return f"busy: {limit} scripts running and {limit} waiting (codeMode.maxConcurrentScripts); retry later"
        self._waiting += 1
        try:
            async with asyncio.timeout(parse_duration(self.cfg.script_timeout)):
                await self._slots.acquire()
        except TimeoutError:
            return (
                f"busy: no free script slot within {self.cfg.script_timeout} ({limit} scripts running, "
                "codeMode.maxConcurrentScripts); retry later"
            )
        finally:
            self._waiting -= 1
        return None

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
        busy = await self._slot()
        if busy is not None:
            return _failed("script: " + busy)
        try:
            answer = await self._run(script, tools, call)
        finally:
            self._slots.release()
        if answer.get("op") == "done":
            value = answer.get("result")
            problem = unsendable(value)
            if problem is not None:
                # Checked here, before anything encodes it: the wire's encoder would fail (an HTTP 500).
                return _failed(f"script: result {problem}")
            text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
            res: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
            res["structuredContent"] = value if isinstance(value, dict) else {"result": value}
            return res
        line = answer.get("line")
        where = f"script line {line}: " if line else "script: "
        return _failed(where + str(answer.get("message")))

    async def _run(self, script: str, tools: Iterable[str], call: CallTool) -> dict[str, Any]:
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
                return await self._converse(proc, job, call)
        except TimeoutError:
            return {
                "op": "error",
                "message": f"time limit exceeded ({self.cfg.script_timeout})",
                "line": None,
            }
        finally:
            if proc.returncode is None:
                proc.kill()
            with contextlib.suppress(Exception):
                await proc.wait()

    async def _converse(
        self, proc: asyncio.subprocess.Process, job: dict[str, Any], call: CallTool
    ) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        stdin, stdout = proc.stdin, proc.stdout
        proc.stdin.write(json.dumps(job).encode() + b"\n")
        await stdin.drain()
        gate = asyncio.Semaphore(self.cfg.parallel_max_concurrency)
        lock = asyncio.Lock()
        tasks: set[asyncio.Task[None]] = set()

        async def one(cid: Any, name: str, arguments: Any) -> None:
            async with gate:
                reply = await self._answer(cid, name, arguments, call)
            async with lock:
                with contextlib.suppress(OSError):
                    stdin.write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")
                    await stdin.drain()

        try:
            while True:
                msg = await _read(proc, stdout)
                if msg.get("op") != "call":
                    return msg
                t = asyncio.create_task(one(msg.get("id"), str(msg.get("name")), msg.get("arguments")))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
        finally:
            for t in tasks:
                t.cancel()

    async def _answer(self, cid: Any, name: str, arguments: Any, call: CallTool) -> dict[str, Any]:
        """The reply to one tool call of a script: its value, or an error the script raises."""
        reply: dict[str, Any] = {"id": cid}
        try:
            if not isinstance(arguments, dict):
                raise ToolFailed(f"{name}: arguments must be a dict")
            problem = unsendable(arguments)
            if problem is not None:
                raise ToolFailed(f"arguments {problem}")
            async with asyncio.timeout(parse_duration(self.cfg.tool_call_timeout)):
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
            # One line, no traceback: what a script sends is hostile input, not a gateway fault.
            log.warning("code mode: tool call %.200s failed: %s: %.300s", name, type(exc).__name__, exc)
            reply["error"] = f"tool {name}: internal error ({type(exc).__name__})"
        return reply


async def _read(proc: asyncio.subprocess.Process, stdout: asyncio.StreamReader) -> dict[str, Any]:
    """The worker's next message; an `error` op when it ended, or sent too much or garbage."""
    try:
        line = await stdout.readline()
    except ValueError:
        return {"op": "error", "message": "script output too large", "line": None}
    if not line:
        return {"op": "error", "message": await _end_cause(proc), "line": None}
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        msg = None
    if not isinstance(msg, dict):
        return {"op": "error", "message": "script sent a message the gateway cannot read", "line": None}
    return msg


def unsendable(value: Any) -> str | None:
    """Why `value` cannot go on the wire as JSON (None when it can): an integer beyond 64 bits, a
    float that is not finite, or nesting deeper than MAX_VALUE_DEPTH. Walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, int):
            if not _INT_RANGE[0] <= v <= _INT_RANGE[1]:
                return "has an integer beyond 64 bits (JSON numbers the gateway sends are 64-bit)"
        elif isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                return "has a number that is not finite (NaN or infinity)"
        elif isinstance(v, (list, dict)):
            if depth >= MAX_VALUE_DEPTH:
                return f"is nested more than {MAX_VALUE_DEPTH} levels deep"
            items = v.values() if isinstance(v, dict) else v
            stack.extend((x, depth + 1) for x in items)
        else:
            return f"has a value JSON cannot carry ({type(v).__name__})"
    return None


def _failed(message: str) -> dict[str, Any]:
    """A tool error result (isError) saying `message`."""
    return {"content": [{"type": "text", "text": message}], "isError": True}


async def _discard(proc: asyncio.subprocess.Process) -> None:
    """Kill and reap a worker process."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    with contextlib.suppress(Exception):
        await proc.wait()


async def _end_cause(proc: asyncio.subprocess.Process) -> str:
    """Why a script process ended without answering: its CPU limit (RLIMIT_CPU: soft SIGXCPU, hard
    SIGKILL) reads as the time limit it backs up; anything else, most likely the memory limit."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 1.0)
    if proc.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return "time limit exceeded (CPU)"
    return "script process ended unexpectedly (memory or CPU limit)"
