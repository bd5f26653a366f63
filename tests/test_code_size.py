"""Size limits of the source tree (issue 28): no function over 80 lines, no file over 800 lines in src/.

A long function or file is where a change has to be made in several places at once; the limits keep the
code in pieces one can read whole. Measured with an ast walk, as `end_lineno - lineno + 1` of every
(async) function definition (nested ones included) and the line count of every module.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "mcpfleet"
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 800

# Files other helpers of issue 28 are still splitting in this session: their long functions and their
# size are allowed here until those splits are merged. The integrator empties this set.
ALLOWED = {
    "cli/proxy.py",  # typed ProxyConfig (helper proxycfg): `proxy`, `build`
    "reconcile/mcpserver.py",  # ProxyConfig rendering (helper proxycfg): `plan`, `_unconfined_containers`
    "reconcile/mcpremoteproxy.py",  # ProxyConfig rendering (helper proxycfg): `plan`
    "cli/vmcp.py",  # the gateway split (helper vmcpsplit): `serve`
    "vmcp/app.py",  # split by protocol era (helper vmcpsplit)
    "vmcp/gateway.py",  # split by responsibility (helper vmcpsplit)
    "vmcp/upstream.py",  # split by protocol era (helper vmcpsplit)
    "platform/local/runner.py",  # one descriptor per kind (helper kinds): `_apply`, the file's size
    "registry/store.py",  # publish / memory work (helper regperf): `_merge`
}


def _modules() -> list[tuple[str, str]]:
    return [(p.relative_to(SRC).as_posix(), p.read_text()) for p in sorted(SRC.rglob("*.py"))]


def test_the_allow_list_names_files_that_exist() -> None:
    names = {name for name, _ in _modules()}
    assert ALLOWED <= names, f"allow-listed files that do not exist: {sorted(ALLOWED - names)}"


def test_no_function_over_80_lines() -> None:
    long = []
    for name, text in _modules():
        if name in ALLOWED:
            continue
        for node in ast.walk(ast.parse(text, name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: " + ", ".join(long)


def test_no_file_over_800_lines() -> None:
    big = [
        f"{name} ({text.count(chr(10))} lines)"
        for name, text in _modules()
        if name not in ALLOWED and text.count("\n") > MAX_FILE_LINES
    ]
    assert not big, f"files over {MAX_FILE_LINES} lines: " + ", ".join(big)
