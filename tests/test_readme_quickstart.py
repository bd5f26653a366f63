"""The README's local quickstart, run as written in a fresh login shell with a clean environment.

Every ```sh block of "Quickstart: one machine" is extracted: the one with `make run` runs in the
background (it stays up, as for a user), the others run once it printed its URLs, each in its own
`bash -lc` with only HOME and a basic PATH (so `mcpfleet` must come from what the README says:
`. .venv/bin/activate`). The python block runs too. Bounded in time; `mcpfleet down` and the
process group kill tear down what it started.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NETWORK = re.compile(r"(?i)proxy|cert|ssl|cainfo|^pip_|^uv_|^npm_config_")
"""The machine's network settings (proxies, CA bundles, package indexes) are kept: a user's fresh
shell has them too. Everything else (VIRTUAL_ENV, a PATH with the venv) is dropped."""
CLEAN_ENV = {
    "HOME": os.environ.get("HOME", "/root"),
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    **{k: v for k, v in os.environ.items() if NETWORK.search(k)},
}


def _section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("## Quickstart: one machine", 1)[1].split("\n## ", 1)[0]


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _section(), re.S)


def _shell(script: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-lc", f"set -e\ncd {ROOT}\n{script}"],
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.timeout(420)
def test_local_quickstart_runs_as_written(tmp_path: Path) -> None:
    shell_blocks = _blocks("sh")
    (run_block,) = [b for b in shell_blocks if "make run" in b]
    others = [b for b in shell_blocks if b is not run_block]
    assert others, "the quickstart shows how to use the gateway"
    # What the README says to do in another shell, prepended to each of its blocks.
    assert ". .venv/bin/activate" in (ROOT / "README.md").read_text()
    log = tmp_path / "make-run.log"
    with log.open("w") as out:
        up = subprocess.Popen(
            ["bash", "-lc", f"cd {ROOT}\n{run_block}"],
            env=CLEAN_ENV,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 300
        while "watching" not in log.read_text():
            assert up.poll() is None, f"make run exited ({up.returncode}):\n{log.read_text()}"
            assert time.monotonic() < deadline, f"make run did not come up:\n{log.read_text()}"
            time.sleep(0.5)
        output = log.read_text()
        assert "vMCP gateway: http://127.0.0.1:23967/mcp" in output, output
        assert "console: http://127.0.0.1:24416/" in output, output  # the README's text block
        assert "in another shell, from this folder: . .venv/bin/activate" in output
        for block in others:
            result = _shell(". .venv/bin/activate\n" + block, timeout=180)
            assert result.returncode == 0, f"{block}\n{result.stdout}\n{result.stderr}"
            assert "time_get_current_time" in result.stdout, (
                f"{result.stdout[-2000:]}\n--- make run:\n{log.read_text()}"
            )
        (python_block,) = _blocks("python")
        script = tmp_path / "client.py"
        script.write_text(python_block)
        result = _shell(f". .venv/bin/activate\npython {script}", timeout=120)
        assert result.returncode == 0 and '"timezone": "UTC"' in result.stdout, result.stdout + result.stderr
        listing = _shell(". .venv/bin/activate\nmcpfleet get all", timeout=60)
        assert "virtualmcpserver/gateway" in listing.stdout, listing.stdout + listing.stderr
    finally:
        _shell(". .venv/bin/activate\nmcpfleet down", timeout=60)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)
            up.wait(10)
