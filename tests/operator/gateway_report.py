"""Playing a gateway's report on the dev cluster, whose kwok pods run nothing: what the gateway's
`KubernetesStatusWriter` patches into its VirtualMCPServer's status, here every backend healthy."""

from __future__ import annotations

from typing import Any

import yaml

from .conftest import Kube


def wait_unreported(kube: Kube, name: str, backends: int) -> dict[str, Any]:
    """The gateway serves but has not reported: Pending, reason BackendsNotReported, backends listed."""

    def check() -> dict[str, Any] | None:
        status = kube.status("VirtualMCPServer", name)
        found = status.get("discoveredBackends") or []
        ready = next((c for c in status.get("conditions", []) if c["type"] == "Ready"), {})
        if (
            len(found) == backends
            and all(b.get("url") for b in found)
            and ready.get("reason") == "BackendsNotReported"
        ):
            return status
        return None

    status: dict[str, Any] = kube.cluster.wait_for(
        f"{name} waiting for its gateway's report", check, timeout=120
    )
    return status


def report_healthy(kube: Kube, name: str) -> None:
    """Patch the status as the gateway does once it reached every backend."""
    status = kube.status("VirtualMCPServer", name)
    backends = [{**b, "status": "healthy", "consecutiveFailures": 0} for b in status["discoveredBackends"]]
    kube.cluster.kubectl(
        "patch", "-n", kube.ns, "virtualmcpservers", name, "--subresource=status", "--type=merge",
        "-p", yaml.safe_dump({"status": {"discoveredBackends": backends}}),
    )  # fmt: skip
