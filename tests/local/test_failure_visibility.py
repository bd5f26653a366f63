"""What a new user sees when something is wrong: the cause of a failure, where they look.

A server that cannot start shows its last stderr lines in the `up` terminal and in `mcpfleet logs`;
invalid manifests are listed by `mcpfleet get` with file and field; `get` takes kubectl's argument
forms; an unknown field gets a "did you mean" hint; a YAML error names its file once; after `up`
stopped, the Ready condition says so. The end-to-end test runs a real package that does not exist.
"""

from __future__ import annotations

import json
import re
import signal
import socket
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from mcpfleet.api.kinds import ManifestError, parse_manifest
from mcpfleet.cli.main import app
from mcpfleet.platform.local.commands import _Reporter
from mcpfleet.platform.local.display import failure_block, headline
from mcpfleet.platform.local.loader import load_dir
from mcpfleet.platform.local.ports import preferred_port
from mcpfleet.platform.local.runner import STOPPED_MESSAGE
from mcpfleet.platform.local.supervisor import _tail_message
from tests.local.conftest import TEST_PORT_RANGE, Up, manifest, time_server

UV_ERROR = [
    "error: No solution found when resolving tool dependencies",
    "  cause: Because mcp-server-does-not-exist-xyz was not found in the package registry and you require it.",
]


def test_a_crash_loop_shows_its_cause_once() -> None:
    message = _tail_message("uvx x exited with code 1", UV_ERROR * 4)
    assert message.count("not found in the package registry") == 1
    assert message.splitlines()[0] == "uvx x exited with code 1:"
    assert _tail_message("x exited with code 1", []) == "x exited with code 1 (no output on stderr)"


def test_the_table_shows_the_cause_not_the_colon() -> None:
    message = _tail_message("uvx x exited with code 1", UV_ERROR)
    assert headline(message).startswith("uvx x exited with code 1: cause: Because")
    assert "package registry" in headline(message)
    block = failure_block("MCPServer", "ghost", message)
    assert block[0] == "✗ MCPServer/ghost: uvx x exited with code 1"
    assert any("not found in the package registry" in line for line in block)
    assert block[-1] == "    (full log: mcpfleet logs ghost)"


def test_a_changed_message_with_the_same_phase_is_printed() -> None:
    console = Console(record=True, width=200)
    reporter = _Reporter(console)
    reporter.live = True
    reporter.on_status(
        "MCPServer", "default", "ghost", {"phase": "Failed", "message": "x exited:\nfirst cause"}
    )
    reporter.on_status(
        "MCPServer", "default", "ghost", {"phase": "Failed", "message": "x exited:\nfirst cause"}
    )
    reporter.on_status(
        "MCPServer", "default", "ghost", {"phase": "Failed", "message": "x exited:\nnew cause"}
    )
    text = console.export_text()
    assert text.count("first cause") == 1 and text.count("new cause") == 1, text


def test_an_unknown_field_gets_a_did_you_mean_hint() -> None:
    document = {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": "MCPServer",
        "metadata": {"name": "t"},
        "spec": {"image": "uvx://mcp-server-time", "transprot": "stdio"},
    }
    with pytest.raises(ManifestError) as caught:
        parse_manifest(document)
    assert caught.value.problems == [
        ("spec.transprot", "Extra inputs are not permitted (did you mean `transport`?)")
    ]
    document["spec"] = {"image": "uvx://mcp-server-time", "zzzz": 1}
    with pytest.raises(ManifestError) as caught:
        parse_manifest(document)
    assert "did you mean" not in str(caught.value)


def test_a_yaml_error_names_its_file_once(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("kind: MCPGroup\nmetadata:\n  name: [oops\n")
    [error] = load_dir(tmp_path).errors
    text = str(error)
    assert text.count("broken.yaml") == 1 and "<unicode string>" not in text, text
    assert text.startswith("broken.yaml: not valid YAML: line 4, column 1:"), text


def _cli(state_dir: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*args, "--state-dir", str(state_dir)])
    return result.exit_code, result.output


@pytest.mark.timeout(240)
async def test_a_package_that_does_not_exist_is_explained_everywhere(running_up: Any) -> None:
    ghost = manifest(
        "MCPServer", "ghost", {"image": "uvx://mcp-server-does-not-exist-xyz", "transport": "stdio"}
    )
    typo = manifest("MCPServer", "typo", {"image": "uvx://mcp-server-time", "transprot": "stdio"})
    up: Up = running_up(
        {"ghost.yaml": ghost, "typo.yaml": typo, "time.yaml": time_server("time", group=None)}
    )
    failed = await up.wait_phase("MCPServer", "ghost", {"Failed"}, limit=180)
    assert failed["message"].count("not found in the package registry") == 1, failed["message"]
    await up.wait_phase("MCPServer", "time", {"Running"}, limit=120)
    await up.wait_for("the summary", lambda: "watching" in up.output.read_text(), limit=120)

    # The `up` terminal: the cause (uv's words), the typo with its hint, and each invalid manifest once.
    terminal = up.output.read_text()
    assert "✗ MCPServer/ghost: uvx -- mcp-server-does-not-exist-xyz exited with code 1" in terminal, terminal
    assert "not found in the package registry" in terminal, terminal
    assert "(full log: mcpfleet logs ghost)" in terminal
    assert terminal.count("spec.transprot") == 1, terminal
    assert "(did you mean `transport`?)" in terminal

    # `mcpfleet logs`: the child's stderr, not only the proxy's restart lines.
    assert "not found in the package registry" in up.get("logs", "ghost")

    # `mcpfleet get`: the objects, then the invalid manifests with file and field.
    code, listing = _cli(up.state_dir, "get", "mcps")
    assert code == 0
    objects, invalid = listing.split("\n\n")
    assert [line.split()[:2] for line in objects.splitlines()[1:]] == [
        ["ghost", "Failed"],
        ["time", "Running"],
    ]
    assert invalid.splitlines()[1].split()[:4] == ["FILE", "DOC", "OBJECT", "FIELD"]
    assert invalid.splitlines()[2].split()[:4] == ["typo.yaml", "1", "MCPServer/typo", "spec.transprot"]

    # kubectl's argument forms; a missing name says "not found", an invalid one says why.
    code, both = _cli(up.state_dir, "get", "mcps", "ghost", "time")
    assert code == 0 and [line.split()[0] for line in both.splitlines()] == ["NAME", "ghost", "time"]
    code, slash = _cli(up.state_dir, "get", "mcpserver/time", "-o", "name")
    assert (code, slash.strip()) == (0, "mcpserver/time")
    code, missing = _cli(up.state_dir, "get", "mcps", "nope", "typo")
    assert code == 1 and "Error from server" not in missing
    assert 'error: mcpserver "nope" not found' in missing
    assert 'error: mcpserver "typo" not found (its manifest is invalid: typo.yaml (document 1)' in missing

    # describe: spec, status with the cause, conditions, the process, its starts / exits, the last log lines.
    code, described = _cli(up.state_dir, "describe", "mcpserver", "ghost")
    assert code == 0, described
    for expected in (
        "Name:         ghost",
        "image: uvx://mcp-server-does-not-exist-xyz",
        "Phase:      Failed",
        "Conditions:",
        "Ready            False",
        "Processes:",
        "Events (process starts and exits, from ghost.log):",
        "starting: ",
    ):
        assert expected in described, (expected, described)
    # The tail holds up to 10 lines; a young log may have fewer, and the heading says how many.
    assert re.search(r"Last (10|[1-9]) log lines \(mcpfleet logs ghost for more\):", described), described
    assert "not found in the package registry" in described.split("Conditions:")[0]
    code, not_found = _cli(up.state_dir, "describe", "mcpserver/typo")
    assert code == 1 and 'mcpserver "typo" not found' in not_found
    assert "spec.transprot: Extra inputs are not permitted (did you mean `transport`?)" in not_found

    # A fixed manifest leaves the invalid list; stopping `up` leaves Ready False with a matching message.
    (up.manifests / "typo.yaml").write_text(time_server("typo", group=None))
    await up.wait_for("typo loaded", lambda: "typo" in up.objects("MCPServer"))
    await up.wait_for(
        "no invalid section", lambda: "Invalid manifests" not in _cli(up.state_dir, "get", "all")[1]
    )
    up.process.send_signal(signal.SIGTERM)
    assert up.process.wait(60) == 0
    status = up.objects("MCPServer")["ghost"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert (status["phase"], status["message"]) == ("Stopped", STOPPED_MESSAGE)
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "NotRunning", STOPPED_MESSAGE)


@pytest.mark.timeout(60)
async def test_up_on_a_folder_without_manifests_warns(running_up: Any) -> None:
    up: Up = running_up({"README.txt": "not a manifest"})
    await up.wait_for("the warning", lambda: "warning: no manifests in" in up.output.read_text(), limit=45)


@pytest.mark.timeout(180)
async def test_a_busy_preferred_port_is_said_loudly_and_a_pinned_port_is_kept(running_up: Any) -> None:
    low, high = (int(p) for p in TEST_PORT_RANGE.split("-"))
    preferred = preferred_port("MCPServer/default/moved/proxy/0", low, high)
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", preferred))
        blocker.listen()
        with socket.socket() as probe:  # a free port for the pinned server, outside the test range
            probe.bind(("127.0.0.1", 0))
            pinned_port = probe.getsockname()[1]
        pinned = json.loads(time_server("pinned", group=None))
        pinned["metadata"]["annotations"] = {"mcpfleet.dev/local-port": str(pinned_port)}
        up: Up = running_up(
            {"moved.yaml": time_server("moved", group=None), "pinned.yaml": json.dumps(pinned)}
        )
        moved = await up.wait_phase("MCPServer", "moved", {"Running"}, limit=150)
        assert f":{preferred}/" not in moved["url"]
        status = await up.wait_phase("MCPServer", "pinned", {"Running"}, limit=150)
        assert status["url"].startswith(f"http://127.0.0.1:{pinned_port}/")
        await up.wait_for("the summary", lambda: "watching" in up.output.read_text(), limit=60)
    terminal = up.output.read_text()
    assert f"port moved: MCPServer/default/moved: port {preferred} is taken by another program" in terminal
    assert f"It goes back to {preferred} at the next `mcpfleet up`" in terminal
    assert 'to pin a port, annotate the object with mcpfleet.dev/local-port: "' in terminal
    assert "MCPServer/default/pinned" not in terminal
