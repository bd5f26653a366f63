"""Rendering is a pure function of the objects: the same bytes in every process, whatever the hash seed
and whatever order the platform read the objects in (issue 20).

An operator restart (an upgrade, a crash, a leader hand-over) re-renders every object in a new process:
anything that followed set or dict-of-set iteration order, or the order objects were listed in, would
re-apply children and roll pods for nothing. `render_everything.py` renders every example and every
manifest snippet of the test tree through the Kubernetes renderer and the local platform, in separate
processes with different `PYTHONHASHSEED`s (the last one with the world handed over in reverse).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("render_everything.py")
ROOT = Path(__file__).resolve().parents[2]


def run(seed: str, *args: str) -> bytes:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], env=env, cwd=ROOT, capture_output=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return done.stdout


def first_difference(a: bytes, b: bytes) -> str:
    left, right = json.loads(a), json.loads(b)
    for key in sorted(set(left) | set(right)):
        if json.dumps(left.get(key)) != json.dumps(right.get(key)):
            return f"{key}:\n{json.dumps(left.get(key))[:1500]}\n!=\n{json.dumps(right.get(key))[:1500]}"
    return "(same content, different key order)"


def test_rendering_is_identical_across_hash_seeds_and_listing_order() -> None:
    baseline = run("1")
    rendered = json.loads(baseline)
    kinds = {key.split()[1].split("/")[0] for key in rendered}
    # The corpus covers every workload kind on both platforms (the test is only as good as it).
    assert kinds == {"MCPServer", "MCPRemoteProxy", "VirtualMCPServer", "MCPRegistry", "EmbeddingServer"}, (
        kinds
    )
    assert len(rendered) >= 60, f"only {len(rendered)} rendered workloads"
    assert any(key.endswith(" local") for key in rendered) and any(
        key.endswith(" kubernetes") for key in rendered
    )
    for seed, args in (("2", ()), ("0", ("--reverse",))):
        other = run(seed, *args)
        assert other == baseline, f"PYTHONHASHSEED={seed} {args}: {first_difference(baseline, other)}"
