"""Synchronous helpers around a running dev cluster, for tests and scripts.

Owns: `ClusterHandle` — the object the `dev_cluster` pytest fixture returns: paths (kubeconfig,
kubectl, server URL), a `kubectl(...)` runner, an httpx client with the admin credentials,
namespace creation/deletion, and CRD installation that waits for `Established`.
Synchronous on purpose: pytest fixtures and test bodies call it without an event loop; async code
under test uses the kubeconfig with its own client (lightkube, kopf).
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from mcpfleet.devcluster.cluster import ClusterInfo


class KubectlError(RuntimeError):
    """kubectl exited non-zero; the message holds the command and its stderr."""


@dataclass(frozen=True)
class ClusterHandle:
    info: ClusterInfo

    @property
    def kubeconfig(self) -> Path:
        return self.info.kubeconfig

    @property
    def kubectl_path(self) -> Path:
        return self.info.kubectl

    @property
    def server(self) -> str:
        return self.info.server

    def env(self) -> dict[str, str]:
        """os.environ plus KUBECONFIG (and kubectl's directory first on PATH), for subprocesses."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{self.kubectl_path.parent}{os.pathsep}{env.get('PATH', '')}"
        return env

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Runs the built kubectl against this cluster; raises KubectlError if check and it fails."""
        cmd = [str(self.kubectl_path), f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise KubectlError(
                f"kubectl {' '.join(args)} failed (exit {proc.returncode}):\n{proc.stderr.strip()}"
            )
        return proc

    def api(self, timeout: float = 10.0) -> httpx.Client:
        """An httpx client for the API server with the admin client certificate (close it after use)."""
        return httpx.Client(base_url=self.server, verify=self.info.ssl_context(), timeout=timeout)

    def create_namespace(self, hint: str, wait_for_service_account: float = 30.0) -> str:
        """Creates a uniquely named namespace derived from `hint`; returns its name.

        Waits for its `default` ServiceAccount, without which pod creation is rejected.
        """
        base = re.sub(r"[^a-z0-9-]+", "-", hint.lower()).strip("-")[:40].strip("-") or "test"
        name = f"{base}-{secrets.token_hex(3)}"
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"mcpfleet.dev/test": "true"}},
        }
        with self.api() as api:
            r = api.post("/api/v1/namespaces", json=body)
            if r.status_code != 201:
                raise RuntimeError(f"creating namespace {name}: HTTP {r.status_code} {r.text[:300]}")
            deadline = time.monotonic() + wait_for_service_account
            while api.get(f"/api/v1/namespaces/{name}/serviceaccounts/default").status_code != 200:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"namespace {name}: no default ServiceAccount after {wait_for_service_account}s"
                    )
                time.sleep(0.05)
        return name

    def delete_namespace(self, name: str) -> None:
        """Starts deletion (the namespace controller finishes it in the background)."""
        with self.api() as api:
            r = api.delete(f"/api/v1/namespaces/{name}", params={"propagationPolicy": "Background"})
            if r.status_code not in (200, 202, 404):
                raise RuntimeError(f"deleting namespace {name}: HTTP {r.status_code} {r.text[:300]}")

    def apply_crds(self, directory: Path, timeout: float = 60.0) -> list[str]:
        """Server-side applies every manifest in `directory` and waits until each CRD is Established.

        Returns the CRD names (plural.group). Raises FileNotFoundError if the directory has no manifests.
        """
        files = sorted(p for p in directory.glob("*") if p.suffix in (".yaml", ".yml", ".json"))
        if not files:
            raise FileNotFoundError(f"{directory} holds no CRD manifests (*.yaml, *.yml, *.json)")
        documents = [d for f in files for d in yaml.safe_load_all(f.read_text()) if isinstance(d, dict)]
        for document in documents:
            self._use_dev_conversion_webhook(document)
        args: list[str] = [
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=mcpfleet-tests",
            "-o",
            "name",
            "-f",
            "-",
        ]
        out = self.kubectl(*args, input=yaml.safe_dump_all(documents)).stdout.split()
        crds = [n for n in out if n.startswith("customresourcedefinition")]
        if crds:
            self.kubectl("wait", "--for=condition=Established", f"--timeout={int(timeout)}s", *crds)
        return [n.split("/", 1)[1] for n in crds]

    def conversion_webhook_url(self) -> str:
        """The dev control plane's conversion webhook (see `DevCluster._argv('conversion-webhook')`)."""
        from mcpfleet.api.conversion import CONVERT_PATH

        return f"https://127.0.0.1:{self.info.ports['conversion']}{CONVERT_PATH}"

    def conversion_counts(self) -> dict[str, float]:
        """What the dev control plane's conversion webhook converted so far (its GET /metrics):
        `reviews` (ConversionReviews answered) and objects by `Kind v1alpha1->v1beta1`."""
        from prometheus_client.parser import text_string_to_metric_families

        port = self.info.ports["conversion"]
        response = httpx.get(f"https://127.0.0.1:{port}/metrics", verify=self.info.ssl_context(), timeout=30)
        if response.status_code != 200:
            raise RuntimeError(
                f"the dev conversion webhook's /metrics answered HTTP {response.status_code} "
                "(a cluster started by an older mcpfleet: `mcpfleet dev-cluster down` and up again)"
            )
        counts: dict[str, float] = {}
        for family in text_string_to_metric_families(response.text):
            for sample in family.samples:
                if sample.name == "mcpfleet_conversion_reviews_total":
                    counts["reviews"] = counts.get("reviews", 0.0) + sample.value
                elif sample.name == "mcpfleet_conversion_objects_total":
                    labels = sample.labels
                    source = labels["from_version"].rsplit("/", 1)[-1]
                    target = labels["to_version"].rsplit("/", 1)[-1]
                    key = f"{labels['kind']} {source}->{target}"
                    counts[key] = counts.get(key, 0.0) + sample.value
        return counts

    def _use_dev_conversion_webhook(self, document: dict[str, Any]) -> None:
        """A CRD converting through the operator's Service converts through the dev webhook instead,
        trusted through the cluster CA (nothing in a kwok cluster can serve a Service)."""
        from mcpfleet.api.crdgen import webhook_config

        conversion = (
            document.get("spec", {}).get("conversion")
            if document.get("kind") == ("CustomResourceDefinition")
            else None
        )
        if not isinstance(conversion, dict) or conversion.get("strategy") != "Webhook":
            return
        ca_bundle = base64.b64encode(self.info.ca_cert.read_bytes()).decode()
        conversion["webhook"] = webhook_config(url=self.conversion_webhook_url(), ca_bundle=ca_bundle)
        # An installed CRD may name the operator's Service (deploy/, the Helm chart, the operator's own
        # CA injection), a field another manager owns that server-side apply would keep beside our
        # URL (one of the two only, says the API server): swap them in one merge patch first.
        self.swap_conversion_client(document["metadata"]["name"], conversion["webhook"]["clientConfig"])

    def swap_conversion_client(self, crd_name: str, client_config: dict[str, Any]) -> None:
        """Replace a CRD's conversion webhook `clientConfig` (URL <-> Service) in one merge patch, so
        an apply of the other form finds nothing to conflict with. A CRD not installed is left alone."""
        other = "service" if "url" in client_config else "url"
        swap = {"spec": {"conversion": {"webhook": {"clientConfig": {**client_config, other: None}}}}}
        self.kubectl(
            "patch", "customresourcedefinition", crd_name, "--type=merge", "-p", json.dumps(swap), check=False
        )

    def use_shipped_conversion_clients(self, directory: Path) -> None:
        """Before applying the shipped CRDs (deploy/, the Helm chart) over the dev ones: their Service."""
        for path in sorted(directory.glob("*.yaml")):
            for document in yaml.safe_load_all(path.read_text()):
                conversion = (document or {}).get("spec", {}).get("conversion") or {}
                if conversion.get("strategy") == "Webhook":
                    self.swap_conversion_client(
                        document["metadata"]["name"], conversion["webhook"]["clientConfig"]
                    )

    def wait_for(
        self,
        what: str,
        check: Callable[[], Any],
        timeout: float = 60.0,
        interval: float = 0.2,
        namespace: str | None = None,
    ) -> Any:
        """Polls `check()` until it returns a truthy value (returned).

        On timeout raises AssertionError naming `what`; with `namespace`, the message also holds the
        namespace's workloads, pods and events and the nodes' state, to tell why.
        """
        deadline = time.monotonic() + timeout
        last: Any = None
        while True:
            last = check()
            if last:
                return last
            if time.monotonic() > deadline:
                message = f"timed out after {timeout}s waiting for {what} (last value: {last!r})"
                if namespace is not None:
                    message += "\n" + self.describe(namespace)
                raise AssertionError(message)
            time.sleep(interval)

    def describe(self, namespace: str) -> str:
        """A text dump for failure messages: workloads, pods, events of a namespace, and the nodes."""
        parts = []
        for args in (
            ("get", "deployments,replicasets,pods", "-n", namespace, "-o", "wide"),
            ("get", "events", "-n", namespace, "--sort-by=.lastTimestamp"),
            ("get", "nodes", "-o", "wide"),
            ("get", "nodes", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.taints}{'\\n'}{end}"),
        ):
            proc = self.kubectl(*args, check=False, timeout=30)
            parts.append(f"$ kubectl {' '.join(args)}\n{proc.stdout}{proc.stderr}")
        return "\n".join(parts)

    def get_json(self, path: str) -> dict[str, Any] | None:
        """GET an API path; the decoded object, or None on 404."""
        with self.api() as api:
            r = api.get(path)
        if r.status_code == 404:
            return None
        r.raise_for_status()
        data: dict[str, Any] = r.json()
        return data
