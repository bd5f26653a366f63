"""Run every benchmark under bench/ in turn (`make bench`); each writes its own section of results.

A benchmark is any `bench/<name>.py` other than this file; it is run as a script with the venv's
Python and must print its results table. Pass names to run a subset: `python bench/run_all.py vmcp`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(selected: list[str]) -> int:
    scripts = sorted(
        p for p in HERE.glob("*.py") if p.name != Path(__file__).name and not p.name.startswith("_")
    )
    if selected:
        scripts = [p for p in scripts if p.stem in selected]
    failures = 0
    for script in scripts:
        print(f"== bench/{script.name}", flush=True)
        started = time.perf_counter()
        # -P: keep bench/ off sys.path, or bench/operator.py would shadow the standard library.
        result = subprocess.run([sys.executable, "-P", str(script)], cwd=HERE.parent, check=False)
        print(
            f"== bench/{script.name}: exit {result.returncode} in {time.perf_counter() - started:.0f}s",
            flush=True,
        )
        failures += result.returncode != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
