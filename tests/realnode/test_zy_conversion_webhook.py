"""The CRDs' conversion webhook served by the operator in its pods, as shipped (docs/versions.md).

Elsewhere in the tier the dev control plane's webhook process converts (the operator overlay turns
the operator's off). Here deploy/'s operator serves it again (`MCPFLEET_CONVERSION_WEBHOOK_PORT=9443`,
as deploy/ and the Helm chart's `conversionWebhook.enabled` set it): its pods on the real node create
the TLS Secret, inject the CA bundle and their Service into the three CRDs whose versions differ, and
the API server converts through the `mcpfleet-conversion` Service (kube-proxy routes its ClusterIP
to a pod). Objects written in one version read back through kubectl in the other, and the dev
control plane's webhook is never asked. Afterwards the CRDs point at the dev webhook again.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from tests.conftest import REPO_ROOT

from mcpfleet.api.conversion import CONVERT_PATH, SERVICE_NAME, SERVICE_PORT
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.devcluster.operator_install import DEPLOYMENT, NAMESPACE
from mcpfleet.operator.conversion import SECRET_NAME

CRDS = ("mcpservers", "mcpremoteproxies", "virtualmcpservers")
OBJECTS = """
apiVersion: mcpfleet.dev/v1alpha1
kind: MCPServer
metadata: {name: conv-alpha}
spec: {image: "uvx://mcp-server-time@2025.1", groupRef: conv}
---
apiVersion: mcpfleet.dev/v1beta1
kind: MCPRemoteProxy
metadata: {name: conv-beta}
spec: {remoteUrl: "https://mcp.example.com/mcp", groupRef: {name: conv}}
---
apiVersion: mcpfleet.dev/v1alpha1
kind: VirtualMCPServer
metadata: {name: conv-gw}
spec:
  config: {groupRef: conv}
  incomingAuth: {type: anonymous}
"""
PROBE = """
apiVersion: mcpfleet.dev/v1beta1
kind: MCPRemoteProxy
metadata: {name: conv-probe}
spec: {remoteUrl: "https://probe.example.com/mcp"}
"""
OPERATOR_COUNTS = (
    "import ssl, urllib.request; "
    "print(urllib.request.urlopen('https://127.0.0.1:9443/metrics', context=ssl._create_unverified_context(), "
    "timeout=10).read().decode())"
)


def _webhook_port(k: ClusterHandle, port: str) -> None:
    k.kubectl(
        "-n", NAMESPACE, "set", "env", f"deployment/{DEPLOYMENT}", f"MCPFLEET_CONVERSION_WEBHOOK_PORT={port}"
    )
    proc = k.kubectl(
        "-n", NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=180s", check=False, timeout=200
    )  # fmt: skip
    if proc.returncode != 0:
        logs = k.kubectl("-n", NAMESPACE, "logs", "-l", "app.kubernetes.io/name=mcpfleet-operator", "--tail=40", "--prefix", check=False)  # fmt: skip
        raise AssertionError(
            f"the operator did not roll out with the webhook port {port!r}:\n{proc.stderr}\n"
            f"{logs.stdout[-6000:]}{logs.stderr}\n{k.describe(NAMESPACE)}"
        )


def _get(k: ClusterHandle, ns: str, resource: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(k.kubectl("-n", ns, "get", resource, name, "-o", "json").stdout)
    return obj


def _operator_conversions(k: ClusterHandle) -> int:
    """Objects the operator's pods converted (each pod's webhook /metrics, read inside the pod)."""
    pods = json.loads(
        k.kubectl("-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=mcpfleet-operator", "-o", "json").stdout
    )["items"]  # fmt: skip
    total = 0
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        text = k.kubectl(
            "-n", NAMESPACE, "exec", pod["metadata"]["name"], "-c", "operator", "--", "python3", "-c", OPERATOR_COUNTS
        ).stdout  # fmt: skip
        total += sum(
            int(float(line.rsplit(" ", 1)[1]))
            for line in text.splitlines()
            if line.startswith("mcpfleet_conversion_objects_total{")
        )
    return total


def test_operator_pods_serve_the_conversion_webhook(real_cluster: ClusterHandle, operator_installed: str, rn_namespace: str) -> None:  # fmt: skip
    k, ns = real_cluster, rn_namespace
    try:
        _webhook_port(k, "9443")
        secret = json.loads(k.kubectl("-n", NAMESPACE, "get", "secret", SECRET_NAME, "-o", "json").stdout)
        ca = base64.b64decode(secret["data"]["ca.crt"])

        def injected() -> bool:
            for plural in CRDS:
                crd = k.get_json(
                    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.mcpfleet.dev"
                )
                client = (crd or {})["spec"]["conversion"]["webhook"]["clientConfig"]
                if "url" in client or base64.b64decode(client.get("caBundle", "")) != ca:
                    return False
                wanted = {
                    "namespace": NAMESPACE,
                    "name": SERVICE_NAME,
                    "path": CONVERT_PATH,
                    "port": SERVICE_PORT,
                }
                if client.get("service") != wanted:
                    return False
            return True

        k.wait_for("the operator's Service and CA bundle in the CRDs", injected, timeout=60)

        # The API server rebuilds a CRD's handler when the CRD changes: until a read in the other
        # version no longer reaches the dev webhook, it may still convert there.
        k.kubectl("-n", ns, "apply", "-f", "-", input=PROBE)

        def through_the_operator() -> bool:
            before = k.conversion_counts()
            read = k.kubectl(
                "-n", ns, "get", "mcpremoteproxies.v1alpha1.mcpfleet.dev", "conv-probe", check=False
            )
            return read.returncode == 0 and k.conversion_counts() == before

        k.wait_for(
            "the API server converting through the operator's Service", through_the_operator, timeout=60
        )
        dev_before = k.conversion_counts()
        k.kubectl("-n", ns, "apply", "-f", "-", input=OBJECTS)
        server = _get(k, ns, "mcpservers.v1beta1.mcpfleet.dev", "conv-alpha")
        assert server["apiVersion"] == "mcpfleet.dev/v1beta1" and server["spec"]["groupRef"] == {
            "name": "conv"
        }
        proxy = _get(k, ns, "mcpremoteproxies.v1alpha1.mcpfleet.dev", "conv-beta")
        assert proxy["apiVersion"] == "mcpfleet.dev/v1alpha1"
        assert (
            proxy["spec"]["remoteURL"] == "https://mcp.example.com/mcp"
            and proxy["spec"]["groupRef"] == "conv"
        )
        gateway = _get(k, ns, "virtualmcpservers.v1beta1.mcpfleet.dev", "conv-gw")
        assert gateway["spec"]["groupRef"] == {"name": "conv"} and "config" not in gateway["spec"]
        # And back: the v1beta1 object as v1alpha1, the v1alpha1 one as v1alpha1 again, unchanged.
        assert _get(k, ns, "mcpservers.v1alpha1.mcpfleet.dev", "conv-alpha")["spec"]["groupRef"] == "conv"
        beta = _get(k, ns, "mcpremoteproxies.v1beta1.mcpfleet.dev", "conv-beta")
        assert beta["spec"] == {
            **beta["spec"],
            "remoteUrl": "https://mcp.example.com/mcp",
            "groupRef": {"name": "conv"},
        }

        assert _operator_conversions(k) > 0, "the operator's pods converted nothing"
        assert k.conversion_counts() == dev_before, "the dev control plane's webhook was asked"
    finally:
        k.kubectl("-n", ns, "delete", "mcpservers,mcpremoteproxies,virtualmcpservers", "--all", "--wait=false", check=False)  # fmt: skip
        # Back to the tier's setup: the CRDs convert through the dev webhook, the operator serves none.
        k.apply_crds(REPO_ROOT / "deploy" / "crds")
        _webhook_port(k, "")
