"""Fixtures for the operator tests: the operator as a subprocess against the dev cluster.

`operator` starts `mcpfleet operator run` for the test's namespace (metrics on a free port) and stops
it after the test; `kube` wraps kubectl and the API for the namespace. The operator's /stats endpoint
gives request counts and reconcile counters measured at its client.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from mcpfleet.devcluster.handle import ClusterHandle

REPO = Path(__file__).resolve().parents[2]
MCPFLEET = REPO / ".venv" / "bin" / "mcpfleet"
PLURALS = {
    "MCPServer": "mcpservers",
    "MCPGroup": "mcpgroups",
    "MCPRegistry": "mcpregistries",
    "VirtualMCPServer": "virtualmcpservers",
    "MCPToolConfig": "mcptoolconfigs",
    "MCPExternalAuthConfig": "mcpexternalauthconfigs",
    "MCPRemoteProxy": "mcpremoteproxies",
    "MCPOIDCConfig": "mcpoidcconfigs",
    "MCPTelemetryConfig": "mcptelemetryconfigs",
    "MCPAuthzConfig": "mcpauthzconfigs",
    "MCPWebhookConfig": "mcpwebhookconfigs",
    "VirtualMCPCompositeToolDefinition": "virtualmcpcompositetooldefinitions",
    "MCPServerEntry": "mcpserverentries",
    "EmbeddingServer": "embeddingservers",
}
BUILTIN = {
    "Deployment": "/apis/apps/v1",
    "Service": "/api/v1",
    "ConfigMap": "/api/v1",
    "ServiceAccount": "/api/v1",
    "PersistentVolumeClaim": "/api/v1",
    "Role": "/apis/rbac.authorization.k8s.io/v1",
    "RoleBinding": "/apis/rbac.authorization.k8s.io/v1",
    "Event": "/api/v1",
    "Pod": "/api/v1",
}


class OperatorProcess:
    """One `mcpfleet operator run` subprocess; stderr is kept in a log file for failure messages."""

    def __init__(
        self,
        cluster: ClusterHandle,
        namespaces: list[str],
        log_path: Path,
        resync: float = 300.0,
        extra_args: tuple[str, ...] = (),
        kubeconfig: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.cluster = cluster
        self.kubeconfig = kubeconfig or cluster.kubeconfig
        """Whose credentials the operator uses (default: the cluster admin's)."""
        self.extra_args = extra_args
        self.extra_env = env or {}
        """Added to the process environment (e.g. PYTHONHASHSEED)."""
        self.namespaces = namespaces
        self.log_path = log_path
        self.resync = resync
        self.proc: subprocess.Popen[bytes] | None = None
        self.port: int | None = None
        self.starts = 0
        self.listening = threading.Event()
        """Set once the metrics endpoint of the current start answers (a standby never syncs)."""

    def start(self, timeout: float = 60.0, wait: bool = True) -> None:
        """Start the process; with `wait`, return once it listed everything (synced)."""
        args = [
            str(MCPFLEET),
            "operator",
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--metrics-port",
            "0",
            "--metrics-host",
            "127.0.0.1",
            "--resync-seconds",
            str(self.resync),
            "--log-format",
            "json",
            "--runner-image",
            "mcpfleet-test/runner:1",
        ]
        for ns in self.namespaces:
            args += ["--namespace", ns]
        args += self.extra_args
        self.starts += 1
        log = self.log_path.open("ab")
        log.write(f"--- start #{self.starts}: {' '.join(args)}\n".encode())
        log.flush()
        env = {**self.cluster.env(), **self.extra_env}
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.PIPE, env=env)
        self.port = None
        port_found = self.listening = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stderr is not None
            for line in self.proc.stderr:
                log.write(line)
                log.flush()
                match = re.search(rb"metrics on http://127\.0\.0\.1:(\d+)/metrics", line)
                if match:
                    self.port = int(match.group(1))
                    port_found.set()

        threading.Thread(target=pump, daemon=True).start()
        if not wait:
            return
        if not port_found.wait(timeout):
            self.kill()
            raise AssertionError(f"the operator did not start within {timeout}s:\n{self.log_tail()}")
        self.wait(lambda s: s["synced"], "the operator to sync", timeout)

    def wait_listening(self, timeout: float = 60.0) -> None:
        if not self.listening.wait(timeout):
            self.kill()
            raise AssertionError(f"the operator did not start within {timeout}s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stats(self) -> dict[str, Any]:
        assert self.port is not None
        response = httpx.get(f"http://127.0.0.1:{self.port}/stats", timeout=10)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def resync_now(self) -> None:
        assert self.port is not None
        httpx.post(f"http://127.0.0.1:{self.port}/resync", timeout=10).raise_for_status()

    def wait(self, check: Any, what: str, timeout: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the operator exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                last = self.stats()
                if check(last):
                    return last
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}; last stats {last}\n{self.log_tail()}")

    def wait_idle(self, settle: float = 1.0, timeout: float = 60.0) -> dict[str, Any]:
        """Idle = empty queue and no new request for `settle` seconds."""
        deadline = time.monotonic() + timeout
        previous: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            stats = self.wait(lambda s: s["idle"], "an idle queue", timeout)
            if previous is not None and stats["total"] == previous["total"] and stats["idle"]:
                return stats
            previous = stats
            time.sleep(settle)
        raise AssertionError(f"the operator never went idle:\n{self.log_tail()}")

    def kill(self) -> None:
        """SIGKILL: no cleanup, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Kube:
    """kubectl and raw API helpers for one namespace."""

    def __init__(self, cluster: ClusterHandle, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace

    def apply(self, text: str) -> None:
        self.cluster.kubectl("apply", "-n", self.ns, "-f", "-", input=text)

    def delete(self, kind: str, name: str, wait: bool = False) -> None:
        self.cluster.kubectl(
            "delete", "-n", self.ns, PLURALS.get(kind, kind.lower()), name, f"--wait={str(wait).lower()}"
        )

    def path(self, kind: str, name: str | None = None) -> str:
        base = (
            f"/apis/mcpfleet.dev/v1alpha1/namespaces/{self.ns}/{PLURALS[kind]}"
            if kind in PLURALS
            else (f"{BUILTIN[kind]}/namespaces/{self.ns}/{kind.lower()}s")
        )
        if kind == "ServiceAccount":
            base = f"/api/v1/namespaces/{self.ns}/serviceaccounts"
        return f"{base}/{name}" if name else base

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return self.cluster.get_json(self.path(kind, name))

    def items(self, kind: str, selector: str | None = None) -> list[dict[str, Any]]:
        path = self.path(kind) + (f"?labelSelector={selector}" if selector else "")
        data = self.cluster.get_json(path) or {}
        items: list[dict[str, Any]] = data.get("items", [])
        return items

    def status(self, kind: str, name: str) -> dict[str, Any]:
        obj = self.get(kind, name)
        return (obj or {}).get("status") or {}

    def wait_phase(
        self, kind: str, name: str, phase: str, timeout: float = 60.0, generation: int | None = None
    ) -> dict[str, Any]:
        """Wait until the status shows `phase` (computed from `generation`, when given)."""

        def check() -> dict[str, Any] | None:
            status = self.status(kind, name)
            if status.get("phase") != phase:
                return None
            if generation is not None and status.get("observedGeneration") != generation:
                return None
            return status

        result: dict[str, Any] = self.cluster.wait_for(f"{kind}/{name} phase {phase}", check, timeout=timeout)
        return result

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.items("Event") if e["involvedObject"]["name"] == name]

    def wait_gone(self, kind: str, name: str, timeout: float = 60.0) -> None:
        self.cluster.wait_for(
            f"{kind}/{name} to be gone", lambda: self.get(kind, name) is None, timeout=timeout
        )


@pytest.fixture
def kube(dev_cluster: ClusterHandle, namespace: str, crds_installed: list[str]) -> Kube:
    return Kube(dev_cluster, namespace)


@pytest.fixture
def operator(
    dev_cluster: ClusterHandle, namespace: str, crds_installed: list[str], tmp_path: Path
) -> Iterator[OperatorProcess]:
    process = OperatorProcess(dev_cluster, [namespace], tmp_path / "operator.log")
    process.start()
    try:
        yield process
    finally:
        # While the operator still runs: the config kinds' in-use finalizers are released once their
        # workloads are gone, so the namespace can be deleted after the test.
        kube = Kube(dev_cluster, namespace)
        dev_cluster.kubectl(
            "delete", "-n", namespace, ",".join(PLURALS.values()), "--all", "--wait=false", check=False
        )
        try:
            config_kinds = ("MCPToolConfig", "MCPExternalAuthConfig")
            dev_cluster.wait_for(
                "config objects to go", lambda: not any(kube.items(k) for k in config_kinds), timeout=30
            )
        finally:
            process.stop()
        if os.environ.get("MCPFLEET_OPERATOR_LOG"):
            sys.stderr.write(process.log_tail(200))


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)
