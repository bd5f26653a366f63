"""End to end on real pods: the operator (in-cluster, from deploy/) runs every kind on the real node,
and a client pod calls each through its Service DNS name.

Each test applies manifests in its own namespace, waits for `Ready` (the readiness gates), then
calls from the client pod: `tools/list`, a `tools/call` whose answer only the real server can give,
or the registry's `GET /v0.1/servers`.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from datetime import datetime
from typing import Any

import httpx
from tests.mcp_messages import initialize_request
from tests.realnode import workloads
from tests.realnode.conftest import PodClient, wait_ready

from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.devcluster.realnode import NODE_NAME, SIMULATED_TAINT


def _status(k: ClusterHandle, ns: str, kind: str, name: str) -> dict[str, Any]:
    out = k.kubectl("-n", ns, "get", kind, name, "-o", "json").stdout
    status: dict[str, Any] = json.loads(out).get("status", {})
    return status


def _apply(k: ClusterHandle, ns: str, text: str) -> None:
    k.kubectl("-n", ns, "apply", "-f", "-", input=text)


def test_real_node_beside_kwok(real_cluster: ClusterHandle) -> None:
    nodes = json.loads(real_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    by_name = {n["metadata"]["name"]: n for n in nodes}
    real = by_name[NODE_NAME]
    assert real["metadata"]["labels"]["mcpfleet.dev/node"] == "real"
    assert real["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.3"
    assert real["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert any(c["type"] == "Ready" and c["status"] == "True" for c in real["status"]["conditions"])
    kwok = [n for n in nodes if n["metadata"]["labels"].get("type") == "kwok"]
    assert kwok, "the kwok nodes stay"
    for n in kwok:
        assert SIMULATED_TAINT in n["spec"].get("taints", []), "unpinned pods must not land on kwok nodes"


def test_operator_runs_in_cluster_with_leader_election(
    real_cluster: ClusterHandle, operator_installed: str
) -> None:
    k = real_cluster
    pods = json.loads(
        k.kubectl(
            "-n",
            "mcpfleet-system",
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/name=mcpfleet-operator",
            "-o",
            "json",
        ).stdout
    )["items"]
    running = [
        p for p in pods if p["status"].get("phase") == "Running" and p["spec"]["nodeName"] == NODE_NAME
    ]
    assert len(running) == 2, [p["metadata"]["name"] for p in pods]
    assert {p["spec"]["serviceAccountName"] for p in running} == {"mcpfleet-operator"}
    assert {p["spec"]["containers"][0]["image"] for p in running} == {operator_installed}
    leases = json.loads(k.kubectl("-n", "mcpfleet-system", "get", "leases", "-o", "json").stdout)["items"]
    holders = {lease["spec"].get("holderIdentity") for lease in leases}
    names = {p["metadata"]["name"] for p in running}
    assert any(h and any(n in h for n in names) for h in holders), f"no replica leads: {holders} vs {names}"


def test_http_transport_server(
    real_cluster: ClusterHandle, operator_installed: str, client: PodClient, started: dict[str, str]
) -> None:
    k, ns = real_cluster, started["http"]
    wait_ready(k, ns, "mcpserver/everything-http")
    url = _status(k, ns, "mcpserver", "everything-http")["url"]
    res = client.mcp(url, "echo", {"message": "over http"})
    assert "echo" in res["tools"] and "over http" in res["result"]


def test_oci_image_over_stdio_through_attach(
    real_cluster: ClusterHandle,
    operator_installed: str,
    client: PodClient,
    started: dict[str, str],
) -> None:
    k, ns = real_cluster, started["oci"]
    wait_ready(k, ns, "mcpserver/echo-oci")
    res = client.mcp(_status(k, ns, "mcpserver", "echo-oci")["url"], "echo", {"message": "attached"})
    assert res["tools"] == ["echo"] and res["result"] == "echo: attached"


def test_remote_proxy_and_registry_configmap(
    real_cluster: ClusterHandle, operator_installed: str, client: PodClient, started: dict[str, str]
) -> None:
    k, ns = real_cluster, started["remote"]
    wait_ready(k, ns, "mcpserver/time", "mcpremoteproxy/time-remote", "mcpregistry/files")
    assert _status(k, ns, "mcpserver", "time")["url"].startswith(
        f"http://mcp-time.{ns}.svc.cluster.local:8080"
    )
    proxied = client.mcp(
        _status(k, ns, "mcpremoteproxy", "time-remote")["url"], "get_current_time", {"timezone": "UTC"}
    )
    assert json.loads(proxied["result"])["timezone"] == "UTC"
    servers = client.get(f"{_status(k, ns, 'mcpregistry', 'files')['url']}/v0.1/servers")
    assert [s["server"]["name"] for s in servers["body"]["servers"]] == ["io.github.stacklok/fetch"]


def test_lifecycle_roll_pod_delete_logs_port_forward(
    real_cluster: ClusterHandle, operator_installed: str, client: PodClient, started: dict[str, str]
) -> None:
    k, ns = real_cluster, started["lifecycle"]
    wait_ready(k, ns, "mcpserver/time")
    url = _status(k, ns, "mcpserver", "time")["url"]
    assert sorted(client.mcp(url)["tools"]) == ["convert_time", "get_current_time"]

    # kubectl logs reaches the runner's container on the real node.
    logs = k.kubectl("-n", ns, "logs", "deployment/mcp-time", "--all-containers", "--tail=200").stdout
    assert logs.strip(), "the runner logged nothing"

    # kubectl port-forward reaches the pod: an MCP initialize from the host through the tunnel.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        local = s.getsockname()[1]
    pf = subprocess.Popen(
        [
            str(k.kubectl_path),
            f"--kubeconfig={k.kubeconfig}",
            "-n",
            ns,
            "port-forward",
            "deployment/mcp-time",
            f"{local}:8080",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        answer: httpx.Response | None = None
        while time.monotonic() < deadline:
            try:
                answer = httpx.post(
                    f"http://127.0.0.1:{local}/mcp",
                    json=initialize_request("2025-06-18"),
                    headers={"accept": "application/json, text/event-stream"},
                    timeout=10,
                )
                break
            except httpx.HTTPError:
                time.sleep(0.3)
        assert answer is not None and answer.status_code == 200, "port-forward did not reach the pod"
        assert "mcp-time" in answer.text or "serverInfo" in answer.text
    finally:
        pf.terminate()
        pf.wait(10)

    # A toolConfig edit rolls the pod; count failed calls while it rolls.
    failures: list[str] = []
    calls = 0
    stop = threading.Event()

    def hammer() -> None:
        nonlocal calls
        while not stop.is_set():
            calls += 1
            try:
                client.mcp(url, "get_current_time", {"timezone": "UTC"})
            except AssertionError as exc:
                failures.append(str(exc)[-200:])

    thread = threading.Thread(target=hammer, daemon=True)
    thread.start()
    rolled_at = time.monotonic()
    k.kubectl(
        "-n",
        ns,
        "patch",
        "mcptoolconfig",
        "time-tools",
        "--type=merge",
        "-p",
        '{"spec": {"toolsFilter": ["get_current_time"]}}',
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if client.mcp(url)["tools"] == ["get_current_time"]:
                break
        except AssertionError:
            pass
        time.sleep(1)
    roll_seconds = time.monotonic() - rolled_at
    stop.set()
    thread.join(120)
    assert client.mcp(url)["tools"] == ["get_current_time"], "the edit did not reach the pod"
    print(
        f"toolConfig roll: new tools after {roll_seconds:.1f}s; {len(failures)} of {calls} calls failed during the roll"
    )

    # Deleting the pod: the status shows it, then recovers.
    pod = k.kubectl(
        "-n",
        ns,
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/instance=time,mcpfleet.dev/kind=mcpserver",
        "--field-selector=status.phase=Running",
        "-o",
        "jsonpath={.items[0].metadata.name}",
    ).stdout
    k.kubectl("-n", ns, "delete", "pod", pod, "--wait=false")
    seen_not_ready = False
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st = _status(k, ns, "mcpserver", "time")
        ready: dict[str, Any] = next((c for c in st.get("conditions", []) if c["type"] == "Ready"), {})
        if ready.get("status") != "True" or st.get("readyReplicas", 1) == 0:
            seen_not_ready = True
            break
        time.sleep(0.2)
    wait_ready(k, ns, "mcpserver/time")
    assert seen_not_ready, "the status never showed the deleted pod"
    assert json.loads(client.mcp(url, "get_current_time", {"timezone": "UTC"})["result"])["timezone"] == "UTC"

    # Delete and re-create the resource.
    k.kubectl("-n", ns, "delete", "mcpserver", "time", "--wait=true", "--timeout=60s")
    k.wait_for(
        "the Deployment to go",
        lambda: k.get_json(f"/apis/apps/v1/namespaces/{ns}/deployments/mcp-time") is None,
        60,
    )
    _apply(k, ns, workloads.TIME)
    wait_ready(k, ns, "mcpserver/time")
    # The re-created Service has a new ClusterIP: CoreDNS's cache (5 s) and kube-proxy's rule sync
    # converge after the pod is Ready, so the first calls may still go to the old address.
    recreated_at = time.monotonic()
    tools = k.wait_for(
        "the re-created Service to answer", lambda: _tools_or_none(client, url), 60, interval=1, namespace=ns
    )
    assert "convert_time" in tools
    print(f"re-created server answered {time.monotonic() - recreated_at:.1f}s after Ready")


def _tools_or_none(client: PodClient, url: str) -> list[str] | None:
    """The tools the server at `url` lists, or None while the call fails (the network still converging)."""
    try:
        tools: list[str] = client.mcp(url)["tools"]
    except AssertionError:
        return None
    return tools


def test_missing_package_fails_with_a_clear_status(
    real_cluster: ClusterHandle, operator_installed: str, started: dict[str, str]
) -> None:
    """A `uvx://` package not in the image's offline cache: the runner gives up with a termination
    message, and the operator copies it into the MCPServer's status (not just "0/1 replicas ready")."""
    k, ns = real_cluster, started["missing"]
    deadline = time.monotonic() + 180
    st: dict[str, Any] = {}
    while time.monotonic() < deadline:
        st = _status(k, ns, "mcpserver", "absent")
        if "not available offline" in (st.get("message") or ""):
            break
        time.sleep(2)
    message = st.get("message") or ""
    assert message.startswith(
        "container proxy: package mcp-server-not-in-the-image (uvx://mcp-server-not-in-the-image) "
        "is not available offline in the image"
    ), st
    assert "not found in the cache" in message, message
    assert st.get("phase") == "Failed", st
    ready: dict[str, Any] = next((c for c in st.get("conditions", []) if c["type"] == "Ready"), {})
    assert ready.get("status") == "False" and ready.get("message") == message, st
    events = k.kubectl("-n", ns, "get", "events", "--field-selector=involvedObject.name=absent", "-o", "json")
    reasons = {(e.get("reason"), e.get("type")) for e in json.loads(events.stdout)["items"]}
    assert ("WorkloadFailed", "Warning") in reasons, reasons
    created = json.loads(k.kubectl("-n", ns, "get", "mcpserver", "absent", "-o", "json").stdout)["metadata"][
        "creationTimestamp"
    ]
    after = time.time() - datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    print(f"missing package: the status names it (seen {after:.0f}s after the MCPServer was created)")


def test_zz_operator_rbac_was_enough(real_cluster: ClusterHandle, operator_installed: str) -> None:
    """Runs last: every kind above was reconciled by the in-cluster operator under deploy/'s RBAC;
    not one request of it was refused."""
    logs = real_cluster.kubectl(
        "-n",
        "mcpfleet-system",
        "logs",
        "-l",
        "app.kubernetes.io/name=mcpfleet-operator",
        "--tail=-1",
        "--prefix",
    ).stdout
    assert logs.strip(), "the operator logged nothing"
    # A 403 from NamespaceLifecycle admission ("... because it is being terminated", a test's
    # namespace deleted while its objects still reconcile) is not an RBAC refusal.
    refused = [
        line
        for line in logs.splitlines()
        if ("forbidden" in line.lower() or " 403" in line) and "being terminated" not in line
    ]
    assert not refused, "\n".join(refused[:20])
