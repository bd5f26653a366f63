"""The console end to end in a real browser: Debian's Chromium driven by Playwright, over a real
`mcpfleet up` of the quickstart's servers plus a hostile server (an MCPRemoteProxy in the same group).

The browser is Debian's (`chromium` on PATH, installed by scripts/system-deps.sh); Playwright never
downloads one. Without it the test fails and says so. axe-core (tools/node) checks every page for
accessibility violations. With MCPFLEET_CONSOLE_SCREENSHOTS=DIR (`make console-screenshots`: DIR is
docs/images) the main pages' screenshots are written there, else into the test's temp folder.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.console.hostile_server import HOSTILE_TOOL, hostile_server
from tests.local.conftest import start_up, stop_process
from tests.vmcp.servers import Served

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "tools/node/node_modules/axe-core/axe.min.js"
CONSOLE_LINE = re.compile(r"console: (http://127\.0\.0\.1:\d+/)")
START_SECONDS = 240.0
"""First start of the quickstart's packages (uvx / npx caches warm in the suite; cold on a fresh machine)."""
CAUSE_SECONDS = 15.0
"""A broken manifest's cause must be on the page within this, without a reload."""


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail(
            "Debian's chromium is not on PATH: run `make system-deps` (scripts/system-deps.sh installs it)"
        )
    if not AXE.is_file():
        pytest.fail(f"{AXE} is missing: run `make node-tools` (tools/node pins axe-core)")
    return path


def _screenshots(tmp_path: Path) -> Path:
    wanted = os.environ.get("MCPFLEET_CONSOLE_SCREENSHOTS")
    folder = (ROOT / wanted) if wanted else tmp_path / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _fleet(tmp_path: Path, hostile_url: str) -> Path:
    folder = tmp_path / "fleet"
    shutil.copytree(ROOT / "examples/quickstart", folder)
    hostile = {
        "apiVersion": "mcpfleet.dev/v1alpha1",
        "kind": "MCPRemoteProxy",
        "metadata": {"name": "hostile"},
        "spec": {"remoteURL": hostile_url, "groupRef": "quickstart"},
    }
    (folder / "hostile.yaml").write_text(yaml.safe_dump(hostile))
    return folder


async def _console_url(output: Path, process: Any) -> str:
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        text = await asyncio.to_thread(output.read_text)
        found = CONSOLE_LINE.search(text)
        if found:
            return found.group(1)
        assert process.poll() is None, f"mcpfleet up exited:\n{text}"
        await asyncio.sleep(0.5)
    raise AssertionError(f"mcpfleet up printed no console URL:\n{await asyncio.to_thread(output.read_text)}")


async def _axe(page: Any, what: str) -> None:
    """axe-core's violations on the page (evaluated through the DevTools protocol: the page's CSP
    forbids inline scripts, which is the point)."""
    if not await page.evaluate("() => typeof window.axe !== 'undefined'"):
        await page.evaluate(AXE.read_text())
    violations = await page.evaluate(
        """async () => (await axe.run(document)).violations.map(
            v => ({id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))"""
    )
    assert violations == [], f"accessibility violations on {what}: {violations}"


@pytest.mark.timeout(600)
async def test_console_in_a_real_browser(tmp_path: Path) -> None:
    from playwright.async_api import async_playwright, expect

    chromium = _chromium()
    shots = _screenshots(tmp_path)
    server = await Served(hostile_server().streamable_http_app()).start()
    state_dir = tmp_path / ".mcpfleet"
    state_dir.mkdir()
    fleet = _fleet(tmp_path, server.url)
    output = tmp_path / "up.log"
    process = start_up(fleet, state_dir, output)
    try:
        url = await _console_url(output, process)
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium, headless=True)
            page = await browser.new_page(viewport={"width": 1280, "height": 860})
            dialogs: list[str] = []
            page.on(
                "dialog",
                lambda dialog: (dialogs.append(dialog.message), asyncio.ensure_future(dialog.dismiss())),
            )
            failures: list[str] = []
            page.on("pageerror", lambda error: failures.append(str(error)))
            # htmx runs under the strict CSP: no inline style or script it would need is refused.
            page.on(
                "console",
                lambda message: (
                    failures.append(message.text) if "Content Security Policy" in message.text else None
                ),
            )

            # The fleet: the quickstart's servers appear Running, without reloading the page.
            await page.goto(url)
            for name in ("time", "everything", "hostile"):
                await expect(page.locator(f'tr[data-name="{name}"]')).to_have_attribute(
                    "data-phase", "Running", timeout=START_SECONDS * 1000
                )
            await expect(page.locator('tr[data-name="gateway"]')).to_have_attribute(
                "data-phase", "Ready", timeout=60_000
            )
            await _axe(page, "the fleet page")
            await page.screenshot(path=str(shots / "console-fleet.png"), full_page=True)

            # Try a tool through the gateway: the form's answer is on the page.
            await page.goto(f"{url}gateways/gateway")
            await expect(page.locator("#tools")).to_contain_text("time_get_current_time")
            await expect(page.locator("#tools")).to_contain_text("hostile_" + HOSTILE_TOOL)
            await expect(page.locator('#backends a[href="/objects/MCPRemoteProxy/hostile"]')).to_have_count(1)
            await _axe(page, "the gateway page")
            await page.screenshot(path=str(shots / "console-gateway.png"), full_page=True)
            await page.get_by_role("link", name="time_get_current_time", exact=True).click()
            await page.get_by_label(re.compile(r"^timezone")).fill("Europe/Paris")
            await _axe(page, "the try-a-tool page")
            await page.get_by_role("button", name="Call time_get_current_time").click()
            await expect(page.locator("#call-result")).to_contain_text(
                '"timezone": "Europe/Paris"', timeout=30_000
            )
            await expect(page.locator("#call-result")).to_contain_text('"datetime"')
            await page.screenshot(path=str(shots / "console-try.png"), full_page=True)

            # A hostile server's tool description and result stay text: no dialog, no element.
            await page.goto(f"{url}objects/MCPRemoteProxy/hostile")
            await expect(page.locator("#tools")).to_contain_text("<script>alert('xss-script')</script>")
            await expect(page.locator("#tools")).to_contain_text("<img src=x onerror=")
            assert await page.locator("img").count() == 0
            assert await page.locator("main script, main h1 + * h1").count() == 0
            assert await page.locator("h1").count() == 1
            await _axe(page, "a server's page")
            await page.goto(f"{url}try?kind=MCPRemoteProxy&name=hostile&tool={HOSTILE_TOOL}")
            await page.get_by_label(re.compile(r"^city")).fill("<img src=y onerror=alert('typed')>")
            await page.get_by_role("button", name=f"Call {HOSTILE_TOOL}").click()
            await expect(page.locator("#call-result")).to_contain_text(
                "<script>alert('xss-script')</script>", timeout=30_000
            )
            assert await page.locator("#call-result img, #call-result script").count() == 0

            # Breaking a manifest: its cause is on the fleet page within seconds, without a reload.
            await page.goto(url)
            servers = fleet / "servers.yaml"
            servers.write_text(
                servers.read_text().replace("  transport: stdio\n", "  transport: stdio\n  replicaz: 1\n", 1)
            )
            started = time.monotonic()
            await expect(page.locator("#invalid")).to_contain_text("replicaz", timeout=CAUSE_SECONDS * 1000)
            shown_after = time.monotonic() - started
            await page.screenshot(path=str(shots / "console-broken.png"), full_page=True)
            print(f"broken manifest's cause shown after {shown_after:.1f} s")

            # The catalogue: search, an entry, "add to fleet" as `mcpfleet add` does; it runs, its
            # tools appear in the gateway.
            await page.goto(f"{url}catalogue")
            await page.get_by_label("Search the catalogues").fill("time")
            await page.get_by_role("button", name="Search").click()
            await expect(page.locator("#entries")).to_contain_text("mcp-server-time")
            await _axe(page, "the catalogue page")
            await page.screenshot(path=str(shots / "console-catalogue.png"), full_page=True)
            await page.locator("#entries tr", has_text="pypi mcp-server-time").get_by_role("link").click()
            await page.get_by_label("Object name").fill("clock")
            await page.get_by_label("Group").select_option("quickstart")
            await _axe(page, "a catalogue entry's page")
            await page.get_by_role("button", name="Add to fleet").click()
            await expect(page.locator("#added-ok")).to_contain_text("clock.yaml")
            assert (fleet / "clock.yaml").is_file()
            await page.goto(url)
            await expect(page.locator('tr[data-name="clock"]')).to_have_attribute(
                "data-phase", "Running", timeout=START_SECONDS * 1000
            )
            await page.goto(f"{url}gateways/gateway")
            await expect(page.locator("#tools")).to_contain_text("clock_get_current_time", timeout=60_000)

            await page.goto(f"{url}audit")
            await _axe(page, "the audit page")

            # A narrow screen: the fleet page still fits (tables scroll inside their box).
            await page.set_viewport_size({"width": 390, "height": 844})
            await page.goto(url)
            width = await page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= 390, f"the fleet page is {width}px wide on a 390px screen"
            await page.screenshot(path=str(shots / "console-narrow.png"))

            assert dialogs == [], f"a server's text ran as script: {dialogs}"
            assert failures == [], failures
            await browser.close()
    finally:
        stop_process(process)
        await server.stop()


SERVERS = 100


@pytest.mark.timeout(300)
async def test_fleet_page_of_100_servers_renders_under_a_second_and_updates_live(tmp_path: Path) -> None:
    """Issue 31's figure: 100 servers (10 tools each behind one gateway) on the fleet page, measured
    in the browser: the page loaded (navigation's loadEventEnd) under 1 s, a status change shown
    without a reload within the poll interval plus a render."""
    from playwright.async_api import async_playwright, expect

    from mcpfleet.console.app import POLL_SECONDS, create_app
    from mcpfleet.platform.local.state import State
    from tests.console.conftest import manifest, running, write_state

    chromium = _chromium()
    state_dir = tmp_path / "state"
    servers = [
        (
            manifest(
                "MCPServer", f"server-{i:03d}", {"image": "uvx://mcp-server-time", "transport": "stdio"}
            ),
            running(f"http://127.0.0.1:{20000 + i}/mcp"),
        )
        for i in range(SERVERS)
    ]
    backends = [
        {
            "name": f"server-{i:03d}",
            "status": "ready",
            "url": f"http://127.0.0.1:{20000 + i}/mcp",
            "toolCount": 10,
        }
        for i in range(SERVERS)
    ]
    gateway = manifest("VirtualMCPServer", "gateway", {"config": {"groupRef": "all"}})
    await write_state(
        state_dir,
        [
            *servers,
            (
                gateway,
                {**running("http://127.0.0.1:19999/mcp"), "phase": "Ready", "discoveredBackends": backends},
            ),
        ],
    )
    served = await Served(create_app(state_dir)).start()
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium, headless=True)
            page = await browser.new_page()
            loads = []
            for _ in range(5):
                await page.goto(served.base + "/")
                loads.append(
                    await page.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd")
                )
            await expect(page.locator("#workloads tbody tr")).to_have_count(SERVERS + 1)
            state = await State.open(state_dir)
            try:
                started = time.monotonic()
                await state.set_status(
                    "MCPServer", "default", "server-042", {"phase": "Failed", "message": "exit 1: boom"}
                )
            finally:
                await state.close()
            await expect(page.locator('tr[data-name="server-042"]')).to_have_attribute(
                "data-phase", "Failed", timeout=(POLL_SECONDS + 3) * 1000
            )
            update = time.monotonic() - started
            await browser.close()
    finally:
        await served.stop()
    best, worst = min(loads), max(loads)
    print(
        f"fleet page, {SERVERS} servers: load {best:.0f}-{worst:.0f} ms over {len(loads)} loads; status change shown after {update:.2f} s"
    )
    assert worst < 1000, loads
    assert update < POLL_SECONDS + 2
