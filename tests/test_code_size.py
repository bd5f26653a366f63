"""Size limits of the source tree (issue 28): no function over 80 lines, no file over 800 lines in src/.

A long function or file is where a change has to be made in several places at once; the limits keep the
code in pieces one can read whole. Measured with an ast walk, as `end_lineno - lineno + 1` of every
(async) function definition (nested ones included) and the line count of every module.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "mcpfleet"
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 800

# Files other helpers of issue 28 are still splitting in this session: their long functions and their
# size are allowed here until those splits are merged. The integrator empties this set.
ALLOWED: set[str] = set()


def _modules() -> list[tuple[str, str]]:
    return [(p.relative_to(SRC).as_posix(), p.read_text()) for p in sorted(SRC.rglob("*.py"))]


def test_the_allow_list_names_files_that_exist() -> None:
    names = {name for name, _ in _modules()}
    assert ALLOWED <= names, f"allow-listed files that do not exist: {sorted(ALLOWED - names)}"


# Run in a fresh interpreter: CPython 3.11's ast.parse can raise "AST constructor recursion depth
# mismatch" (a SystemError) when called in a process whose recursion tracking earlier tests disturbed.
_MEASURE = """
import ast, json, sys
from pathlib import Path
out = []
for path in sorted(Path(sys.argv[1]).rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append([path.relative_to(sys.argv[1]).as_posix(), node.lineno, node.name,
                        node.end_lineno - node.lineno + 1])
print(json.dumps(out))
"""


def _functions() -> list[tuple[str, int, str, int]]:
    """(file, line, name, length in lines) of every function and method under src/mcpfleet."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(SRC)], capture_output=True, text=True, timeout=120, check=True
    )
    return [tuple(row) for row in json.loads(done.stdout)]  # type: ignore[misc]


def test_no_function_over_80_lines() -> None:
    long = [
        f"{name}:{line} {function} ({lines} lines)"
        for name, line, function, lines in _functions()
        if name not in ALLOWED and lines > MAX_FUNCTION_LINES
    ]
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: " + ", ".join(long)


def test_no_file_over_800_lines() -> None:
    big = [
        f"{name} ({text.count(chr(10))} lines)"
        for name, text in _modules()
        if name not in ALLOWED and text.count("\n") > MAX_FILE_LINES
    ]
    assert not big, f"files over {MAX_FILE_LINES} lines: " + ", ".join(big)
