"""The service commands' fast start path (`cli/main.py`, `cli/options.py`) against the full typer CLI.

The fast parser and typer read the same one declaration of each command's options; wherever the
fast parser answers it must give the command exactly the arguments typer gives it, and where it
does not answer (help, errors, rare forms) the full CLI runs. Errors a command raises on the fast
path read exactly as the full CLI prints them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpfleet.cli.main import FAST, command
from mcpfleet.cli.options import parse

ARGVS: dict[tuple[str, ...], list[list[str]]] = {
    ("proxy",): [
        ["--port", "8080", "--", "uvx", "mcp-server-time", "--local-timezone", "UTC"],
        ["--port=0", "--host", "0.0.0.0", "--", "python", "-m", "server"],
        ["--remote", "https://example.com/mcp", "--header-from-env", "X-A=A", "--header-from-env=X-B=B"],
        ["--remote", "https://e.com/mcp", "--forward-all-paths", "--bearer-token-from-env", "TOKEN"],
        ["--remote-from-env", "REMOTE_URL", "--header-from-env", "X-A=A", "--port", "0"],
        ["--allowed-host", "a:1", "--allowed-host", "b:2", "--isolation", "session", "--", "srv"],
        ["--max-body-bytes", "1024", "--body-timeout", "2.5", "--keep-alive-timeout", "7", "--", "x"],
        ["--port", "1", "--port", "2", "--", "last", "one", "wins"],
        ["--transport", "sse", "--log-level", "debug", "--run-config", "rc.json", "--", "s"],
        ["--auth-config", "a.json", "--authz-config", "z.json", "--audit-config", "u.json", "--", "s"],
        ["--webhook-config", "w.json", "--public-url", "https://p", "--max-json-depth", "9", "--", "s"],
        ["--remote", "https://e.com/mcp", "--authserver-config", "as.json", "--public-url", "https://p"],
        ["--attach", "ns/pod", "--kubeconfig", "k", "--context", "c", "--header-timeout", "3"],
        ["--", "--port", "9", "--help"],  # all of it the server's command line
        [],
        # Left to typer (None from the fast parser):
        ["--help"],
        ["--port", "x", "--", "s"],
        ["--port", "-1", "--", "s"],
        ["--port", "0x10", "--", "s"],
        ["--port", " 8", "--", "s"],
        ["--prot", "8", "--", "s"],
        ["uvx", "server"],
        ["--port", "8", "uvx", "server"],
        ["--forward-all-paths=true"],
        ["--host"],
        ["--host", "--port", "8"],
        ["--host="],
        ["--body-timeout", "1e3"],
    ],
    ("vmcp", "serve"): [
        ["--config", "v.yaml"],
        ["-c", "v.yaml", "--port", "4483", "--log-level", "warning", "--status-file", "s.json"],
        ["--config=v.yaml", "--allowed-host", "a:*", "--allowed-host", "b", "--max-sessions", "5"],
        ["-c", "v.yaml", "--session-idle-timeout", "30m", "--trace-exporter", "otlp", "--otlp-endpoint", "h"],
        [
            "-c",
            "v.yaml",
            "--status-resource",
            "ns/name",
            "--public-url",
            "https://x",
            "--max-header-bytes",
            "99",
        ],
        # Left to typer:
        [],
        ["--port", "1"],
        ["-cv.yaml"],
        ["-c", "v.yaml", "--", "x"],
        ["-c", "v.yaml", "extra"],
        ["-c", "v.yaml", "--help"],
    ],
    ("registry", "serve"): [
        ["--config", "r.yaml"],
        ["-c", "r.yaml", "--host", "::", "--port", "8080", "--log-level", "warning"],
        ["-c", "r.yaml", "--trace-exporter", "console", "--otlp-endpoint", "http://c:4318"],
        # Left to typer:
        ["--host", "h"],
        ["-c", "r.yaml", "--max-body-bytes", "1"],
    ],
}


def _typer_args(path: tuple[str, ...], argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    cmd = command()
    for name in path:
        cmd = cmd.commands[name]
    ctx = cmd.make_context(path[-1], list(argv))
    return list(ctx.args), dict(ctx.params)


@pytest.mark.parametrize(
    ("path", "argv"),
    [(path, argv) for path, argvs in ARGVS.items() for argv in argvs],
    ids=[f"{' '.join(path)}: {' '.join(argv)}" for path, argvs in ARGVS.items() for argv in argvs],
)
def test_fast_parser_agrees_with_typer(path: tuple[str, ...], argv: list[str]) -> None:
    module, name, command_line = FAST[path]
    func = getattr(__import__(module, fromlist=[name]), name)
    fast = parse(func, argv, command_line=command_line)
    if fast is None:
        return  # the full CLI reads it (see test_left_to_typer_cases_are_left)
    assert fast == _typer_args(path, argv)


def test_left_to_typer_cases_are_left() -> None:
    """The fast parser answers the common forms and leaves the others (so each test above checks
    what it says it checks)."""
    answered = {
        (path, tuple(argv))
        for path, argvs in ARGVS.items()
        for argv in argvs
        if parse(
            getattr(__import__(FAST[path][0], fromlist=[FAST[path][1]]), FAST[path][1]),
            argv,
            command_line=FAST[path][2],
        )
        is not None
    }
    assert len(answered) == 14 + 1 + 5 + 3, sorted(answered)


@pytest.mark.parametrize(
    "argv",
    [
        ["proxy", "--port", "0", "--remote", "http://127.0.0.1:9/mcp", "--", "true"],
        ["proxy", "--port", "0", "--max-body-bytes", "0", "--", "true"],
        ["proxy", "--port", "0", "--header-from-env", "novalue", "--remote", "http://127.0.0.1:9/mcp"],
        ["proxy", "--port", "0"],
        ["vmcp", "serve", "--config", "/nonexistent/vmcp.yaml", "--port", "0"],
        ["vmcp", "serve", "--config", "/dev/null", "--max-json-depth", "0"],
        ["registry", "serve", "--config", "/nonexistent/registry.yaml"],
    ],
    ids=lambda argv: " ".join(argv),
)
def test_errors_read_as_the_full_cli_prints_them(argv: list[str]) -> None:
    fast = subprocess.run(
        [sys.executable, "-m", "mcpfleet.cli.main", *argv], capture_output=True, text=True, timeout=60
    )
    full = subprocess.run(
        [
            sys.executable,
            "-c",
            f"from mcpfleet.cli.app import command; command()({argv!r}, prog_name='mcpfleet')",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert fast.returncode == full.returncode != 0, (fast, full)
    assert fast.stderr == full.stderr and fast.stdout == full.stdout


def test_fast_path_serves_without_typer() -> None:
    """The fast path's parse of each service command loads neither typer, click nor rich."""
    code = """
import sys
from mcpfleet.cli.main import FAST
from mcpfleet.cli.options import parse
for module, name, command_line in FAST.values():
    func = getattr(__import__(module, fromlist=[name]), name)
    args = ["--port", "1"] if module == "mcpfleet.cli.embeddings" else ["--config", "x", "--port", "1"]
    assert parse(func, args if not command_line else ["--", "x"], command_line=command_line)
loaded = {m.split(".")[0] for m in sys.modules}
assert not loaded & {"typer", "click", "rich"}, sorted(loaded & {"typer", "click", "rich"})
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("service", ["proxy", "vmcp", "registry", "embeddings"])
def test_services_start_without_the_command_line_libraries(service: str, tmp_path: Path) -> None:
    """The real commands, started as a user starts them, until /health answers: neither typer nor
    rich is ever imported (`-X importtime` lists every import), nor click by vMCP or the registry
    (the proxy's MCP SDK transport imports uvicorn's command line itself, through sse_starlette)."""
    import time
    import urllib.error
    import urllib.request

    port = _free_port()
    if service == "proxy":
        args = ["proxy", "--port", str(port), "--", sys.executable, "-c", "import time; time.sleep(60)"]
        unwanted = {"typer", "rich"}
    elif service == "vmcp":
        (tmp_path / "v.yaml").write_text(
            f"name: t\nbackends:\n  - {{name: b, url: 'http://127.0.0.1:{_free_port()}/mcp'}}\n"
        )
        args = ["vmcp", "serve", "--config", str(tmp_path / "v.yaml"), "--port", str(port)]
        unwanted = {"typer", "rich", "click"}
    elif service == "embeddings":
        args = ["embeddings", "serve", "--port", str(port)]
        unwanted = {"typer", "rich", "click"}
    else:
        (tmp_path / "s.json").write_text('{"servers": []}')
        (tmp_path / "r.yaml").write_text(
            f"registryName: r\nsources:\n  - name: f\n    file: {{path: {tmp_path / 's.json'}}}\n"
        )
        args = ["registry", "serve", "--config", str(tmp_path / "r.yaml"), "--port", str(port)]
        unwanted = {"typer", "rich", "click"}
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "mcpfleet.cli.main", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            assert time.monotonic() < deadline, f"{service}: no /health answer"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break
            except urllib.error.HTTPError:
                break
            except OSError:
                time.sleep(0.05)
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    imported = {
        line.split("|")[-1].strip() for line in stderr.splitlines() if line.startswith("import time:")
    }
    assert "mcpfleet.cli.options" in imported  # (the listing is complete)
    assert not {m.split(".")[0] for m in imported} & unwanted, sorted(
        unwanted & {m.split(".")[0] for m in imported}
    )


def test_an_option_not_declared_with_opt_is_refused() -> None:
    """A `typer.Option` default would reach the command as its value on the fast path: both
    builders refuse it (the full CLI then fails at import, in every test)."""
    import typer

    from mcpfleet.cli.options import Opt, typer_command

    def command(a: str = Opt("x", "--a", help="a"), b: str = typer.Option("y", "--b")) -> None: ...

    for build in (lambda: parse(command, []), lambda: typer_command(command)):
        with pytest.raises(TypeError, match="declare the option with Opt"):
            build()
