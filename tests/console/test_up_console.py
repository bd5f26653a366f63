"""`mcpfleet up` serves the console (URL printed with the others) unless `--no-console`; `mcpfleet
console serve` serves it alone. On an empty manifest folder, so `up` settles at once."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.local.conftest import MCPFLEET, TEST_PORT_RANGE, stop_process

WAIT_SECONDS = 60.0


def _run(args: list[str], log: Path, cwd: Path) -> subprocess.Popen[str]:
    with log.open("w") as out:
        return subprocess.Popen([MCPFLEET, *args], stdout=out, stderr=subprocess.STDOUT, text=True, cwd=cwd)


def _wait_for(log: Path, process: subprocess.Popen[str], marker: str) -> str:
    deadline = time.monotonic() + WAIT_SECONDS
    while marker not in log.read_text():
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    return log.read_text()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("with_console", [True, False])
def test_up_serves_the_console_unless_told_not_to(tmp_path: Path, with_console: bool) -> None:
    (tmp_path / "fleet").mkdir()
    args = [
        "up",
        "fleet",
        "--state-dir",
        str(tmp_path / "state"),
        "--port-range",
        TEST_PORT_RANGE,
        "--no-progress",
    ]
    log = tmp_path / "up.log"
    process = _run(args if with_console else [*args, "--no-console"], log, tmp_path)
    try:
        output = _wait_for(log, process, "watching")
        found = re.search(r"console: (http://127\.0\.0\.1:(\d+)/)", output)
        if not with_console:
            assert found is None, output
            return
        assert found is not None, output
        low, high = map(int, TEST_PORT_RANGE.split("-"))
        assert low <= int(found.group(2)) <= high  # from `up`'s range, kept in its state
        page = httpx.get(found.group(1), trust_env=False, timeout=10)
        assert page.status_code == 200 and "No fleet state here yet" not in page.text
        assert "content-security-policy" in page.headers
    finally:
        stop_process(process)


@pytest.mark.timeout(120)
def test_console_serve_alone(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    log = tmp_path / "serve.log"
    process = _run(["console", "serve", "--state-dir", str(tmp_path / "state"), "--port", "0"], log, tmp_path)
    try:
        output = _wait_for(log, process, "Ctrl-C stops it")
        found = re.search(r"console: (http://127\.0\.0\.1:\d+/)", output)
        assert found is not None, output
        page = httpx.get(found.group(1), trust_env=False, timeout=10)
        assert page.status_code == 200 and "No fleet state here yet" in page.text
        refused = httpx.get(found.group(1), headers={"Host": "evil.example"}, trust_env=False, timeout=10)
        assert refused.status_code == 421
    finally:
        stop_process(process)
    missing = subprocess.run(
        [MCPFLEET, "console", "serve", "--state-dir", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2 and "is not a folder" in missing.stderr
