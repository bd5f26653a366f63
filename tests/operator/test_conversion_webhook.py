"""The operator's conversion webhook on the dev cluster: its TLS Secret (one, even when two replicas
start together), the CA bundle it injects into the CRDs, and a ConversionReview answered over TLS with
that CA for the Service's DNS name."""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
from typing import Any

import httpx

from mcpfleet.api.conversion import SERVICE_NAME
from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.operator.conversion import SECRET_NAME, ensure_tls, serve_conversion_webhook
from mcpfleet.platform.kubernetes.api import KubeApi, login_from
from tests.conftest import CRDS_DIR


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_operator_webhook_tls_ca_injection_and_review(
    dev_cluster: ClusterHandle, crds_installed: list[str], namespace: str
) -> None:
    api = KubeApi(login_from(str(dev_cluster.kubeconfig)))
    task: asyncio.Task[Any] | None = None
    try:
        # Two replicas starting at once end up with the same Secret.
        first, second = await asyncio.gather(ensure_tls(api, namespace), ensure_tls(api, namespace))
        assert first == second
        secret = await api.get("v1", "Secret", namespace, SECRET_NAME)
        assert secret is not None and set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}

        port = _free_port()
        task = await serve_conversion_webhook(api, namespace, port, host="127.0.0.1")
        for plural in ("mcpservers", "virtualmcpservers", "mcpremoteproxies"):
            crd = dev_cluster.get_json(
                f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{plural}.mcpfleet.dev"
            )
            assert crd is not None
            client = crd["spec"]["conversion"]["webhook"]["clientConfig"]
            assert base64.b64decode(client["caBundle"]) == first["ca.crt"]
            assert client["service"]["namespace"] == namespace and client["service"]["name"] == SERVICE_NAME
        plain = dev_cluster.get_json(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/mcpgroups.mcpfleet.dev"
        )
        assert plain is not None and plain["spec"]["conversion"]["strategy"] == "None"

        # The API server would connect to the Service name with the injected CA: do the same.
        context = ssl.create_default_context(cadata=first["ca.crt"].decode())
        host = f"{SERVICE_NAME}.{namespace}.svc"
        transport = httpx.AsyncHTTPTransport(verify=context)
        review = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {
                "uid": "1",
                "desiredAPIVersion": "mcpfleet.dev/v1beta1",
                "objects": [
                    {
                        "apiVersion": "mcpfleet.dev/v1alpha1",
                        "kind": "MCPRemoteProxy",
                        "metadata": {"name": "p"},
                        "spec": {"remoteURL": "https://x", "groupRef": "g"},
                    }
                ],
            },
        }
        async with httpx.AsyncClient(transport=transport, timeout=10) as http:
            for _ in range(100):
                try:
                    answer = await http.post(
                        f"https://127.0.0.1:{port}/convert",
                        json=review,
                        extensions={"sni_hostname": host},
                    )
                    break
                except httpx.ConnectError as exc:
                    if "CERTIFICATE" in str(exc).upper():
                        raise
                    await asyncio.sleep(0.1)
            else:
                raise AssertionError("the webhook never listened")
            assert answer.status_code == 200
            converted = answer.json()["response"]["convertedObjects"][0]
            assert converted["spec"] == {"remoteUrl": "https://x", "groupRef": {"name": "g"}}
            # A body that is not JSON is a 400, not a 500.
            bad = await http.post(
                f"https://127.0.0.1:{port}/convert", content=b"{", extensions={"sni_hostname": host}
            )
            assert bad.status_code == 400
    finally:
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await api.close()
        # Back to the dev control plane's webhook for the rest of the session.
        dev_cluster.apply_crds(CRDS_DIR)
