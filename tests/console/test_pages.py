"""The console's pages over HTTP (httpx, in-process ASGI), against a real state folder and a real
MCP server: what each page shows, the try-a-tool round trip, add-to-fleet, the audit filters."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

from mcpfleet.cli.main import app as cli_app
from mcpfleet.console.security import CONTENT_SECURITY_POLICY
from tests.console.conftest import TOKEN, failed, manifest, post_headers, running, write_state
from tests.console.hostile_server import HOSTILE_TOOL, hostile_server
from tests.vmcp.servers import Served

ROOT = Path(__file__).resolve().parents[2]
MakeClient = Callable[[Path], httpx.AsyncClient]


async def _fleet(tmp_path: Path, url: str = "http://127.0.0.1:9/mcp") -> Path:
    state_dir = tmp_path / "state"
    folder = tmp_path / "fleet"
    folder.mkdir()
    (folder / "group.yaml").write_text(json.dumps(manifest("MCPGroup", "team", {})))
    await write_state(
        state_dir,
        [
            (manifest("MCPServer", "hostile", {"image": "uvx://x", "transport": "stdio"}), running(url)),
            (
                manifest("MCPServer", "broken", {"image": "uvx://y", "transport": "stdio"}),
                failed("exit 2: error: unrecognized arguments: --no-such-flag <b>bold</b>"),
            ),
            (manifest("MCPGroup", "team", {}), {"phase": "Ready"}),
        ],
        meta={
            "manifests": str(folder),
            "load_errors": [
                {
                    "file": "typo.yaml",
                    "kind": "MCPServer",
                    "name": "typo",
                    "problems": [["spec.replicaz", "Extra inputs are not permitted"]],
                }
            ],
        },
    )
    (state_dir / "logs").mkdir(exist_ok=True)
    (state_dir / "logs" / "hostile.log").write_text("--- started pid 42\nhello <script>alert(1)</script>\n")
    return state_dir


async def test_fleet_page_shows_phases_causes_and_invalid_manifests(
    tmp_path: Path, console_client: MakeClient
) -> None:
    client = console_client(await _fleet(tmp_path))
    page = await client.get("/")
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY and "'unsafe-eval'" not in CONTENT_SECURITY_POLICY
    assert page.headers["x-content-type-options"] == "nosniff"
    html = page.text
    assert 'data-name="hostile" data-phase="Running"' in html
    assert 'data-name="broken" data-phase="Failed"' in html
    assert "unrecognized arguments: --no-such-flag &lt;b&gt;bold&lt;/b&gt;" in html
    assert '<time datetime="2026-01-01T00:00:00Z">' in html
    assert "spec.replicaz" in html and "Extra inputs are not permitted" in html
    assert 'hx-get="/fleet/table" hx-trigger="every 2s"' in html
    table = await client.get("/fleet/table")
    assert table.status_code == 200 and "<html" not in table.text and 'data-name="broken"' in table.text


async def test_no_state_yet_is_said_not_failed(tmp_path: Path, console_client: MakeClient) -> None:
    page = await console_client(tmp_path / "nothing").get("/")
    assert page.status_code == 200 and "No fleet state here yet" in page.text


async def test_object_page_reads_tools_live_and_escapes_them(
    tmp_path: Path, console_client: MakeClient
) -> None:
    server = await Served(hostile_server().streamable_http_app()).start()
    try:
        client = console_client(await _fleet(tmp_path, server.url))
        page = await client.get("/objects/MCPServer/hostile")
        assert page.status_code == 200, page.text
        html = page.text
        assert "&lt;script&gt;alert(&#39;xss-script&#39;)&lt;/script&gt;" in html
        assert "&lt;img src=x onerror=" in html
        assert "<script>alert" not in html and "<img src=x" not in html and "<h1>forged" not in html
        assert f"tool={HOSTILE_TOOL}" in html
        assert "hello &lt;script&gt;alert(1)&lt;/script&gt;" in html  # the log, escaped
        assert "started pid 42" in html
        assert "uvx://x" in html  # the manifest
    finally:
        await server.stop()


async def test_try_a_tool_form_call_and_errors(tmp_path: Path, console_client: MakeClient) -> None:
    server = await Served(hostile_server().streamable_http_app()).start()
    try:
        client = console_client(await _fleet(tmp_path, server.url))
        form = await client.get("/try", params={"kind": "MCPServer", "name": "hostile", "tool": HOSTILE_TOOL})
        assert form.status_code == 200, form.text
        assert 'name="arg.city"' in form.text and "(required)" in form.text
        assert 'type="checkbox"' in form.text and 'name="arg.days"' in form.text
        assert f'name="csrf_token" value="{TOKEN}"' in form.text
        base = {"csrf_token": TOKEN, "kind": "MCPServer", "name": "hostile", "tool": HOSTILE_TOOL}
        answer = await client.post(
            "/try",
            data={**base, "arg.city": "Paris", "arg.days": "3", "arg.metric": "true"},
            headers=post_headers(),
        )
        assert answer.status_code == 200, answer.text
        assert "Paris in 3 day(s): &lt;script&gt;" in answer.text and "<script>" not in answer.text
        wrong = await client.post(
            "/try", data={**base, "arg.city": "Paris", "arg.days": "three"}, headers=post_headers()
        )
        assert wrong.status_code == 422 and "days: expected an integer" in wrong.text
        missing = await client.post("/try", data=base, headers=post_headers())
        assert missing.status_code == 422 and "city: required" in missing.text
        failing = await client.post("/try", data={**base, "tool": "fail"}, headers=post_headers())
        assert failing.status_code == 200 and "The tool answered with an error" in failing.text
        assert (
            "Error executing tool fail" in failing.text
        )  # the text the server answered, as a client sees it
        whole_page = await client.post(
            "/try", data={**base, "arg.city": "Oslo"}, headers=post_headers(htmx=False)
        )
        assert (
            whole_page.status_code == 200
            and "<html" in whole_page.text
            and "Oslo in 1 day(s)" in whole_page.text
        )
        unknown = await client.get("/try", params={"kind": "MCPServer", "name": "hostile", "tool": "nope"})
        assert unknown.status_code == 404 and "no tool named 'nope'" in unknown.text
    finally:
        await server.stop()


async def test_unreachable_server_is_an_error_on_the_page(tmp_path: Path, console_client: MakeClient) -> None:
    client = console_client(await _fleet(tmp_path, "http://127.0.0.1:9/mcp"))
    page = await client.get("/objects/MCPServer/hostile")
    assert (
        page.status_code == 200
        and "Could not read the server's lists" in page.text
        and "ConnectError" in page.text
    )


async def test_cross_site_requests_are_refused(tmp_path: Path, console_client: MakeClient) -> None:
    client = console_client(await _fleet(tmp_path))
    data = {"csrf_token": TOKEN, "kind": "MCPServer", "name": "hostile", "tool": HOSTILE_TOOL}
    no_token = await client.post(
        "/try", data={k: v for k, v in data.items() if k != "csrf_token"}, headers=post_headers()
    )
    assert no_token.status_code == 403 and "csrf_token" in no_token.text
    wrong = await client.post("/try", data={**data, "csrf_token": "guess"}, headers=post_headers())
    assert wrong.status_code == 403
    twice = await client.post("/try", content=f"csrf_token={TOKEN}&csrf_token=x", headers=post_headers())
    assert twice.status_code == 403
    no_origin = await client.post(
        "/try", data=data, headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert no_origin.status_code == 403 and "Origin" in no_origin.text
    foreign = await client.post(
        "/try", data=data, headers={**post_headers(), "Origin": "https://evil.example"}
    )
    assert foreign.status_code == 403
    assert (await client.get("/", headers={"Origin": "https://evil.example"})).status_code == 403
    assert (await client.get("/", headers={"Host": "evil.example"})).status_code == 421
    assert (await client.get("/", headers={"Host": "127.0.0.1.evil.example:8765"})).status_code == 421
    json_post = await client.post("/try", json=data, headers={"Origin": "http://127.0.0.1:8765"})
    assert json_post.status_code == 415
    assert (await client.put("/try", headers={"Origin": "http://127.0.0.1:8765"})).status_code == 405


async def test_catalogue_search_and_add_write_what_mcpfleet_add_writes(
    tmp_path: Path, console_client: MakeClient
) -> None:
    state_dir = await _fleet(tmp_path)
    client = console_client(state_dir)
    search = await client.get("/catalogue", params={"q": "time"})
    assert search.status_code == 200 and "pypi mcp-server-time" in search.text
    entry_name = "io.github.modelcontextprotocol/time"
    entry = await client.get("/catalogue/entry", params={"name": entry_name})
    assert entry.status_code == 200 and "Add to fleet" in entry.text and "<option>team</option>" in entry.text
    form = {"csrf_token": TOKEN, "entry": entry_name, "object_name": "clock", "group": "team"}
    added = await client.post("/catalogue/add", data=form, headers=post_headers())
    assert added.status_code == 200, added.text
    written = (tmp_path / "fleet" / "clock.yaml").read_text()
    expected_dir = tmp_path / "cli"
    result = CliRunner().invoke(
        cli_app,
        [
            "add",
            entry_name,
            "--name",
            "clock",
            "--group",
            "team",
            "--dir",
            str(expected_dir),
            "--state-dir",
            str(state_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    assert written == (expected_dir / "clock.yaml").read_text()
    again = await client.post("/catalogue/add", data=form, headers=post_headers())
    assert again.status_code == 422 and "--name" in again.text and "exists" in again.text
    bad_name = await client.post(
        "/catalogue/add", data={**form, "object_name": "../escape"}, headers=post_headers()
    )
    assert bad_name.status_code == 422 and "name: expected a DNS label" in bad_name.text
    bad_group = await client.post(
        "/catalogue/add", data={**form, "object_name": "c2", "group": "nope"}, headers=post_headers()
    )
    assert bad_group.status_code == 422 and "group:" in bad_group.text
    unknown = await client.post("/catalogue/add", data={**form, "entry": "no/such"}, headers=post_headers())
    assert unknown.status_code == 404


def _events(path: Path, events: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events) + "not json\n")


async def test_audit_log_filters(tmp_path: Path, console_client: MakeClient) -> None:
    log = tmp_path / "audit.jsonl"
    _events(
        log,
        [
            {
                "time": "2026-01-01T00:00:01Z",
                "method": "tools/call",
                "outcome": "success",
                "subject": {"sub": "alice"},
                "target": {"type": "tool", "name": "time_get_current_time"},
            },
            {
                "time": "2026-01-01T00:00:02Z",
                "method": "tools/call",
                "outcome": "denied",
                "subject": {"sub": "bob"},
                "target": {"type": "tool", "name": "<script>x</script>"},
            },
        ],
    )
    gateway = manifest(
        "VirtualMCPServer",
        "gw",
        {"config": {"groupRef": "team", "audit": {"enabled": True, "logFile": str(log)}}},
    )
    state_dir = tmp_path / "state"
    await write_state(state_dir, [(gateway, running("http://127.0.0.1:9/mcp"))])
    client = console_client(state_dir)
    everything = await client.get("/audit")
    assert everything.status_code == 200 and "2 events" in everything.text
    assert "&lt;script&gt;x&lt;/script&gt;" in everything.text
    alice = await client.get("/audit", params={"who": "alice"})
    assert "1 event," in alice.text and "time_get_current_time" in alice.text
    denied = await client.get("/audit", params={"outcome": "denied"})
    assert "1 event," in denied.text and "bob" in denied.text
    by_tool = await client.get("/audit", params={"tool": "current"})
    assert "1 event," in by_tool.text
    bad = await client.get("/audit", params={"outcome": "<b>"})
    assert bad.status_code == 400 and "outcome" in bad.text


async def test_static_htmx_is_the_pinned_npm_file(tmp_path: Path, console_client: MakeClient) -> None:
    """The shipped htmx is tools/node's pinned htmx.org, unchanged (`make console-assets` copies it)."""
    npm_copy = ROOT / "tools/node/node_modules/htmx.org/dist/htmx.min.js"
    assert npm_copy.is_file(), f"{npm_copy} missing: run `make node-tools` (tools/node pins htmx.org)"
    served = await console_client(tmp_path).get("/static/htmx.min.js")
    assert served.status_code == 200 and "javascript" in served.headers["content-type"]
    assert served.content == npm_copy.read_bytes(), "stale: run `make console-assets`"
    pinned = json.loads((ROOT / "tools/node/package.json").read_text())["dependencies"]["htmx.org"]
    assert f'version:"{pinned}"' in served.text
