"""The process one code-mode script runs in (started by `mcpfleet.vmcp.codemode`; not imported).

It reads one job from stdin, evaluates the Starlark script with `starlark` (starlark-pyo3, the Rust
implementation) and talks to the gateway over stdin / stdout in JSON lines: each tool call the
script makes is a `{"op": "call"}` line, answered by a `{"id"}` line. Starlark has no I/O of its
own and this process is given no other builtins, so tool calls are the script's only way out.

Limits: an address-space and CPU-time rlimit (the gateway also kills the process at its deadline),
a step budget and a deadline checked by the evaluator's cancellation hook (called about every
1,000 steps), a call-stack depth, a count of tool calls, and the size of the result.

`parallel(fns)` calls each function in turn with tool calls deferred: each call is sent at once
and gives a placeholder, and `parallel` returns the functions' values with every placeholder
replaced by its call's result, so the calls run concurrently in the gateway. A function should
therefore return its tool calls' results (alone, or in a list or dict) rather than compute on them.

Only the standard library and `starlark` are imported, so the process starts in tens of
milliseconds.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from typing import Any

PRELUDE_NAME = "codemode.star"
SCRIPT_NAME = "script.star"
PRELUDE = """
def parallel(fns):
    _parallel_begin()
    values = [f() for f in fns]
    return _parallel_end(values)
"""
_PENDING = "__mcpfleet_pending_call__"
_LOC = re.compile(re.escape(SCRIPT_NAME) + r":(\d+)")


class ScriptError(Exception):
    pass


class Runner:
    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.out = sys.stdout
        self.inp = sys.stdin
        self.next_id = 0
        self.calls = 0
        self.batch: list[int] | None = None
        self.results: dict[int, tuple[bool, Any]] = {}

    def send(self, msg: dict[str, Any]) -> None:
        self.out.write(encode(msg, f"{msg.get('name')}: arguments") + "\n")
        self.out.flush()

    def receive(self, want: int) -> tuple[bool, Any]:
        while want not in self.results:
            line = self.inp.readline()
            if not line:
                raise SystemExit(3)  # the gateway went away
            msg = json.loads(line)
            self.results[int(msg["id"])] = ("error" not in msg, msg.get("error", msg.get("result")))
        return self.results.pop(want)

    def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        if self.calls >= self.job["maxToolCalls"]:
            raise ScriptError(f"more than {self.job['maxToolCalls']} tool calls (codeMode.maxToolCalls)")
        self.calls += 1
        self.next_id += 1
        cid = self.next_id
        self.send({"op": "call", "id": cid, "name": tool, "arguments": arguments})
        if self.batch is not None:
            self.batch.append(cid)
            return {_PENDING: cid}
        return self.value(cid)

    def value(self, cid: int) -> Any:
        ok, value = self.receive(cid)
        if not ok:
            raise ScriptError(str(value))
        return value

    def begin(self) -> None:
        if self.batch is not None:
            raise ScriptError("parallel() cannot be nested")
        self.batch = []

    def end(self, values: Any) -> Any:
        # Only this parallel()'s own calls are waited for, each once: a placeholder the script made
        # up (or kept from another parallel()) would otherwise wait for an answer that never comes.
        batch, self.batch = set(self.batch or ()), None
        done: dict[int, Any] = {}

        def resolve(v: Any) -> Any:
            if isinstance(v, dict):
                if _PENDING in v:
                    cid = v[_PENDING]
                    if len(v) != 1 or type(cid) is not int or cid not in batch:
                        raise ScriptError(
                            f"parallel(): {_PENDING!r} marks this parallel()'s own pending calls; "
                            "a value may not use it"
                        )
                    if cid not in done:
                        done[cid] = self.value(cid)
                    return done[cid]
                return {k: resolve(x) for k, x in v.items()}
            if isinstance(v, list):
                return [resolve(x) for x in v]
            return v

        return resolve(values)


def encode(value: Any, what: str) -> str:
    """`value` as compact JSON; ScriptError naming `what` when JSON cannot carry it."""
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ScriptError(f"{what}: not JSON ({exc})") from None
    except RecursionError:
        raise ScriptError(f"{what}: nested too deep for JSON") from None


def _function(runner: Runner, tool: str) -> Any:
    def fn(*args: Any, **kwargs: Any) -> Any:
        if args:
            if len(args) == 1 and isinstance(args[0], dict) and not kwargs:
                kwargs = args[0]
            else:
                raise ScriptError(f"{tool}: pass arguments by name, e.g. {tool}(x=1), or one dict")
        return runner.call(tool, kwargs)

    return fn


def _error(text: str, offset: int) -> dict[str, Any]:
    """A script error as {message, line}: the innermost script location, in the user's numbering."""
    lines = [int(n) - offset for n in _LOC.findall(text)]
    line = lines[-1] if lines else None
    message = next((ln[len("error: ") :] for ln in text.splitlines() if ln.startswith("error: ")), "")
    message = message.removeprefix("ScriptError: ")
    return {"message": message or text.strip().splitlines()[-1][:500], "line": line}


def run(job: dict[str, Any]) -> dict[str, Any]:
    import starlark as sl

    runner = Runner(job)
    dialect = sl.Dialect.extended()
    dialect.enable_load = True
    dialect.enable_f_strings = True
    globals_ = sl.Globals.extended_by(
        [
            sl.LibraryExtension.Json,
            sl.LibraryExtension.StructType,
            sl.LibraryExtension.Map,
            sl.LibraryExtension.Filter,
            sl.LibraryExtension.Partial,
        ]
    )
    prelude = sl.Module()
    prelude.add_callable("_parallel_begin", runner.begin)
    prelude.add_callable("_parallel_end", runner.end)
    sl.eval(prelude, sl.parse(PRELUDE_NAME, PRELUDE, dialect), globals_)
    frozen = prelude.freeze()
    module = sl.Module()
    for fname, tool in job["functions"].items():
        module.add_callable(fname, _function(runner, tool))
    module.add_callable(
        "call_tool", lambda name, arguments=None: runner.call(str(name), dict(arguments or {}))
    )
    script: str = job["script"]
    header = f'load("{PRELUDE_NAME}", "parallel")\n'
    offset = 1
    if re.search(r"^return\b", script, re.MULTILINE):
        # A top-level `return` (as in ToolHive's examples): the script is the body of a function.
        body = "\n".join("    " + ln if ln.strip() else ln for ln in script.splitlines())
        script = header + "def __script__():\n" + body + "\n    return None\n__script__()\n"
        offset = 2
    else:
        script = header + script
    budget = max(1, job["stepLimit"] // 1000)
    deadline = time.monotonic() + job["timeout"]
    ticks = [0]
    stop: list[str] = []

    def check_cancelled() -> bool:
        ticks[0] += 1
        if ticks[0] > budget:
            stop.append(f"step limit exceeded ({job['stepLimit']} steps, codeMode.stepLimit)")
        elif time.monotonic() > deadline:
            stop.append(f"time limit exceeded ({job['timeout']}s)")
        return bool(stop)

    options = sl.EvalOptions(check_cancelled=check_cancelled, max_callstack_size=job["maxCallDepth"])
    try:
        ast = sl.parse(SCRIPT_NAME, script, dialect)
        result = sl.eval_with(options, module, ast, globals_, sl.FileLoader(lambda _name: frozen)).value
    except sl.StarlarkError as exc:
        err = _error(str(exc), offset)
        if stop:
            err["message"] = stop[0]
        return {"op": "error", **err}
    except ScriptError as exc:
        return {"op": "error", "message": str(exc), "line": None}
    try:
        encoded = encode(result, "result")
    except ScriptError as exc:
        return {"op": "error", "message": str(exc), "line": None}
    if len(encoded) > job["maxOutputBytes"]:
        return {
            "op": "error",
            "message": f"result is {len(encoded)} bytes, more than {job['maxOutputBytes']} (codeMode.maxOutputBytes)",
            "line": None,
        }
    return {"op": "done", "result": result, "calls": runner.calls}


def main() -> None:
    import starlark  # noqa: F401  (loaded before the job arrives: a spare worker waits warm)

    line = sys.stdin.readline()
    if not line:
        return
    job = json.loads(line)
    limit = int(job["memoryLimitMb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # RLIMIT_CPU counts the whole process (the imports of a warm spare included), and the gateway's own
    # wall-clock deadline is timeout + 2 s: the CPU limit sits past both, so a runaway script ends on
    # the deadline (answered "time limit exceeded") and the CPU limit only backs it up.
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(used.ru_utime + used.ru_stime) + int(job["timeout"]) + 4
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    try:
        answer = run(job)
    except MemoryError:
        answer = {
            "op": "error",
            "message": f"memory limit exceeded ({job['memoryLimitMb']} MB)",
            "line": None,
        }
    except RecursionError:
        answer = {"op": "error", "message": "a value is nested too deep", "line": None}
    sys.stdout.write(json.dumps(answer, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
