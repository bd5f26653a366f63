"""The console on Kubernetes, against the dev test cluster: the chart's RBAC applied, the console
served with a token of the chart's ServiceAccount, and Debian's Chromium driven by Playwright.

Objects are created and their status written as the operator would (kwok runs no containers: the
workloads' URLs are real MCP servers served by this test — the hostile server and a real vMCP gateway
with the optimizer over it). Checked: the objects appear with their phase, a failing one shows its
cause, the Events show on the fleet and object pages, the gateway's find_tool box answers, hostile
texts stay text, axe-core passes on the new pages, and the console's account cannot create or patch
(the API answers 403) nor read a namespace it is not bound to.
"""

from __future__ import annotations

import asyncio
import html
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError

from mcpfleet.console.app import create_app
from mcpfleet.console.kubesource import KubeSource, _resource
from mcpfleet.console.security import CsrfToken
from mcpfleet.devcluster.handle import ClusterHandle
from tests.console.conftest import BASE, TOKEN, post_headers
from tests.console.hostile_server import HOSTILE_TOOL, IMG, SCRIPT, hostile_server
from tests.console.test_browser import _axe, _chromium, _screenshots
from tests.helm.conftest import OPERATOR_CHART, Helm
from tests.helm.conftest import helm as helm
from tests.helm.conftest import helm_binary as helm_binary
from tests.vmcp.conftest import GatewayFactory, gateway, served  # noqa: F401  (fixtures)
from tests.vmcp.servers import Served

pytestmark = pytest.mark.usefixtures("crds_installed")
HOSTILE_MESSAGE = f"crashed: {SCRIPT} {IMG}"
BROKEN_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "broken-7d9f-x2x4q",
        # The operator's Deployment selector labels (render.objects.selector_labels).
        "labels": {"app.kubernetes.io/instance": "broken", "mcpfleet.dev/kind": "mcpserver"},
    },
    "spec": {"containers": [{"name": "mcp", "image": "ghcr.io/example/broken:1"}]},
}
API = "mcpfleet.dev/v1alpha1"


def _objects(hostile_url: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": API, "kind": "MCPGroup", "metadata": {"name": "team"}, "spec": {}},
        {
            "apiVersion": API,
            "kind": "MCPRemoteProxy",
            "metadata": {"name": "hostile"},
            "spec": {"remoteURL": hostile_url, "groupRef": "team"},
        },
        {
            "apiVersion": API,
            "kind": "MCPServer",
            "metadata": {"name": "broken"},
            "spec": {"image": "ghcr.io/example/broken:1", "transport": "stdio", "groupRef": "team"},
        },
        {
            "apiVersion": API,
            "kind": "VirtualMCPServer",
            "metadata": {"name": "gateway"},
            "spec": {"config": {"groupRef": "team"}, "incomingAuth": {"type": "anonymous"}},
        },
    ]


def _status(phase: str, url: str = "", message: str = "", ready: bool = True, **extra: Any) -> dict[str, Any]:
    condition = {
        "type": "Ready",
        "status": "True" if ready else "False",
        "reason": "Ready" if ready else "CrashLoop",
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    return {"phase": phase, "url": url, "message": message, "conditions": [condition], **extra}


def _event(namespace: str, kind: str, name: str, reason: str, message: str, warning: bool) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{name}-", "namespace": namespace},
        "involvedObject": {"apiVersion": API, "kind": kind, "name": name, "namespace": namespace},
        "reason": reason,
        "message": message,
        "type": "Warning" if warning else "Normal",
        "count": 3 if warning else 1,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "source": {"component": "mcpfleet-operator"},
    }


def _apply_chart_rbac(cluster: ClusterHandle, chart: Helm, namespace: str) -> tuple[str, str]:
    """The chart's console ServiceAccount, ClusterRole and RoleBinding (release = the namespace),
    applied as the chart renders them; (service account, cluster role)."""
    rendered = chart.template(
        namespace,
        OPERATOR_CHART,
        namespace=namespace,
        values=["console.enabled=true", f"console.namespace={namespace}"],
    )
    rbac = [d for d in rendered if d["kind"] in ("ServiceAccount", "ClusterRole", "RoleBinding")]
    rbac = [d for d in rbac if d["metadata"]["name"].endswith("-console")]
    assert sorted(d["kind"] for d in rbac) == ["ClusterRole", "RoleBinding", "ServiceAccount"]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(rbac))
    account = next(d for d in rbac if d["kind"] == "ServiceAccount")["metadata"]["name"]
    role = next(d for d in rbac if d["kind"] == "ClusterRole")["metadata"]["name"]
    return account, role


def _token_kubeconfig(cluster: ClusterHandle, namespace: str, account: str, folder: Path) -> Path:
    """A kubeconfig with a bound token of the ServiceAccount (as the pod would get), nothing else."""
    token = cluster.kubectl("-n", namespace, "create", "token", account, "--duration=15m").stdout.strip()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "dev",
                "cluster": {"server": cluster.server, "certificate-authority": str(cluster.info.ca_cert)},
            }
        ],
        "users": [{"name": account, "user": {"token": token}}],
        "contexts": [
            {"name": "console", "context": {"cluster": "dev", "user": account, "namespace": namespace}}
        ],
        "current-context": "console",
    }
    path = folder / "console.kubeconfig"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


@pytest.fixture
async def fleet_on_cluster(
    dev_cluster: ClusterHandle,
    namespace: str,
    helm: Helm,
    gateway: GatewayFactory,  # noqa: F811
    tmp_path: Path,
) -> AsyncIterator[tuple[str, Path, Served, Served]]:
    """(namespace, the console account's kubeconfig, the hostile server, the gateway)."""
    hostile = await Served(hostile_server().streamable_http_app()).start()
    gw = await gateway(
        {
            "name": "gateway",
            "backends": [{"name": "hostile", "url": hostile.url}],
            "optimizer": {"maxToolsToReturn": 3},
        }
    )
    cluster = dev_cluster
    cluster.kubectl("-n", namespace, "apply", "-f", "-", input=yaml.safe_dump_all(_objects(hostile.url)))
    statuses = {
        ("mcpremoteproxies", "hostile"): _status("Running", hostile.url, "1/1 replicas ready"),
        ("mcpservers", "broken"): _status("Failed", message=HOSTILE_MESSAGE, ready=False),
        ("virtualmcpservers", "gateway"): _status(
            "Ready",
            gw.url,
            "1 backend",
            discoveredBackends=[{"name": "hostile", "url": hostile.url, "status": "ready"}],
        ),
    }
    for (kind, name), status in statuses.items():
        cluster.kubectl(
            "-n", namespace, "patch", kind, name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}),
        )  # fmt: skip
    events = [
        _event(namespace, "MCPServer", "broken", "BackOff", HOSTILE_MESSAGE, warning=True),
        _event(namespace, "MCPRemoteProxy", "hostile", "Started", "the proxy is ready", warning=False),
    ]
    for event in events:
        cluster.kubectl("create", "-f", "-", input=json.dumps(event))
    cluster.kubectl("-n", namespace, "apply", "-f", "-", input=json.dumps(BROKEN_POD))
    account, role = _apply_chart_rbac(cluster, helm, namespace)
    try:
        yield namespace, _token_kubeconfig(cluster, namespace, account, tmp_path), hostile, gw
    finally:
        cluster.kubectl("delete", "clusterrole", role, "--ignore-not-found", check=False)
        await hostile.stop()


async def test_the_console_account_reads_but_cannot_write(
    fleet_on_cluster: tuple[str, Path, Served, Served],
) -> None:
    namespace, kubeconfig, _, _ = fleet_on_cluster
    client = AsyncClient(KubeConfig.from_file(kubeconfig), namespace=namespace)
    server = _resource("MCPServer")
    names = [obj.metadata.name async for obj in client.list(server, namespace=namespace)]
    assert names == ["broken"]
    with pytest.raises(ApiError) as created:
        await client.create(
            server({"metadata": {"name": "sneaky", "namespace": namespace}, "spec": {"image": "x:1"}}),
            namespace=namespace,
        )
    assert created.value.status.code == 403
    with pytest.raises(ApiError) as patched:
        await client.patch(server, "broken", {"spec": {"image": "evil:1"}}, namespace=namespace)
    assert patched.value.status.code == 403
    with pytest.raises(ApiError) as other_namespace:
        await client.get(server, "broken", namespace="default")
    assert other_namespace.value.status.code == 403

    # "Add to fleet" on a cluster shows the manifest `mcpfleet add` writes, in the namespace, and
    # creates nothing (the account could not, and the console never acts with more than its visitor).
    source = KubeSource.from_environment(namespace, kubeconfig=str(kubeconfig))
    app = create_app(source, csrf=CsrfToken(TOKEN))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE, timeout=60) as c:
        entry_name = "io.github.modelcontextprotocol/time"
        entry = await c.get("/catalogue/entry", params={"name": entry_name})
        assert entry.status_code == 200 and "Show the manifest" in entry.text, entry.text
        assert "<option>team</option>" in entry.text
        form = {"csrf_token": TOKEN, "entry": entry_name, "object_name": "clock", "group": "team"}
        shown = await c.post("/catalogue/add", data=form, headers=post_headers())
        assert shown.status_code == 200, shown.text
        manifest = yaml.safe_load(
            html.unescape(shown.text.split("<pre", 1)[1].split(">", 1)[1].split("</pre>")[0])
        )
        assert manifest["kind"] == "MCPServer" and manifest["metadata"]["name"] == "clock"
        assert manifest["metadata"]["namespace"] == namespace and manifest["spec"]["groupRef"] == "team"
        assert await source.find("MCPServer", "clock") is None
        listed = await c.get("/objects/MCPServer/broken")
        assert listed.status_code == 200 and "BackOff" in listed.text
        assert 'id="pods"' in listed.text and BROKEN_POD["metadata"]["name"] in listed.text

    # The console as that account: the namespace it may read, and a refusal for one it may not.
    refused = create_app(KubeSource.from_environment("default", kubeconfig=str(kubeconfig)))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=refused), base_url="http://127.0.0.1:8765"
    ) as c:
        page = await c.get("/")
        assert page.status_code == 200
        assert "answered 403" in page.text and "forbidden" in page.text.lower()
        assert (await c.get("/objects/MCPServer/broken")).status_code == 403


@pytest.mark.timeout(300)
async def test_console_on_kubernetes_in_a_real_browser(
    fleet_on_cluster: tuple[str, Path, Served, Served], tmp_path: Path
) -> None:
    from playwright.async_api import async_playwright, expect

    namespace, kubeconfig, _, _ = fleet_on_cluster
    chromium = _chromium()
    shots = _screenshots(tmp_path)
    console = await Served(
        create_app(KubeSource.from_environment(namespace, kubeconfig=str(kubeconfig)))
    ).start()
    url = console.base + "/"
    try:
        async with async_playwright() as playwright:
            browser = await playwright.chromium.launch(executable_path=chromium, headless=True)
            page = await browser.new_page(viewport={"width": 1280, "height": 860})
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), asyncio.ensure_future(d.dismiss())))
            failures: list[str] = []
            page.on("pageerror", lambda error: failures.append(str(error)))

            # The fleet: phases, the failing object's cause, the Events; hostile text stays text.
            await page.goto(url)
            await expect(page.locator('tr[data-name="hostile"]')).to_have_attribute("data-phase", "Running")
            await expect(page.locator('tr[data-name="gateway"]')).to_have_attribute("data-phase", "Ready")
            broken = page.locator('tr[data-name="broken"]')
            await expect(broken).to_have_attribute("data-phase", "Failed")
            await expect(broken.locator("pre.cause")).to_have_text(HOSTILE_MESSAGE)
            await expect(page.locator("#events li.warning")).to_contain_text("BackOff (\u00d73)")
            await expect(page.locator("#events")).to_contain_text(SCRIPT)
            await expect(page.locator("main p").first).to_contain_text(namespace)
            await _axe(page, "the fleet page on Kubernetes")
            await page.screenshot(path=str(shots / "console-kubernetes.png"), full_page=True)

            # A server's page: tools read live from its endpoint, its Events, no logs (not readable).
            await page.goto(url + "objects/MCPRemoteProxy/hostile")
            await expect(page.locator(f'a:text-is("{HOSTILE_TOOL}")').first).to_be_visible()
            await expect(page.locator("#events")).to_contain_text("Started")
            await expect(page.locator("main")).to_contain_text("may not read pod logs")
            await _axe(page, "a server's page on Kubernetes")

            # The failing server's page: its cause, its Warning event, its pods.
            await page.goto(url + "objects/MCPServer/broken")
            await expect(page.locator("pre.cause").first).to_have_text(HOSTILE_MESSAGE)
            await expect(page.locator("#events li.warning")).to_contain_text("BackOff")
            await expect(page.locator("#pods")).to_contain_text(str(BROKEN_POD["metadata"]["name"]))
            await _axe(page, "a failing server's page on Kubernetes")
            await page.screenshot(path=str(shots / "console-kubernetes-object.png"), full_page=True)

            # The gateway: find_tool through the box, the answer as text.
            await page.goto(url + "gateways/gateway")
            await page.fill("#find-query", "look up a city")
            await page.click('#find button[type="submit"]')
            found = page.locator("#found-tools tbody tr")
            await expect(found.first).to_contain_text(f"hostile_{HOSTILE_TOOL}")
            await expect(found.first.locator("td.description")).to_contain_text(SCRIPT)
            await page.click("#found details summary")
            await expect(page.locator("#found #call-result")).to_contain_text('"tools"')
            await _axe(page, "the gateway page with find_tool's answer")
            await page.screenshot(path=str(shots / "console-find-tool.png"), full_page=True)

            # The audit files are the pods' own: not readable by the console's account, and it says so.
            await page.goto(url + "audit")
            await expect(page.locator("main")).to_contain_text("Not available on Kubernetes")
            await _axe(page, "the audit page on Kubernetes")

            assert dialogs == [], f"a script ran: {dialogs}"
            assert await page.evaluate("() => document.querySelectorAll('script:not([src])').length") == 0
            assert failures == []
            await browser.close()
    finally:
        await console.stop()
