"""`mcpfleet proxy --attach`: a container's stdio through the pods/attach WebSocket channel protocol."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.client.client import Client
from mcp.types import TextContent

from mcpfleet.backoff import Backoff
from mcpfleet.proxy.attach import AttachTarget, attach_factory, load_kubeconfig
from mcpfleet.proxy.backend import ChildFactory
from tests.proxy.attach_endpoint import AttachEndpoint
from tests.proxy.conftest import RunningProxy, running_proxy
from tests.waiting import wait_until


async def _healthy(proxy: RunningProxy) -> bool:
    return (await proxy.health())[0] == 200


def _factory(endpoint: AttachEndpoint, tmp_path: Path, token: str | None = None) -> ChildFactory:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(endpoint.kubeconfig() if token is None else endpoint.kubeconfig(token))
    target = AttachTarget(endpoint.namespace, endpoint.pod, endpoint.container)
    return attach_factory(load_kubeconfig(kubeconfig), target, Backoff(initial=0.2))


async def _call_simple(client: Client) -> str:
    result = await client.call_tool("test_simple_text", {})
    text = result.content[0]
    assert isinstance(text, TextContent)
    return text.text


async def test_attach_serves_the_container_and_survives_its_restart(tmp_path: Path) -> None:
    endpoint = AttachEndpoint()
    async with endpoint.serving(), running_proxy(factory=_factory(endpoint, tmp_path)) as proxy:
        await wait_until(lambda: _healthy(proxy), "the proxy healthy")
        assert endpoint.negotiated == ["v5.channel.k8s.io"]
        assert (await proxy.child())["command"] == ["attach team-a/time-server-0/mcp"]
        async with Client(proxy.url, mode="legacy") as client:
            tools = await client.list_tools()
            assert "test_tool_with_progress" in {t.name for t in tools.tools}
            assert (await _call_simple(client)).startswith("This is a simple text")

            await endpoint.restart_container()

            async def reattached() -> bool:
                return endpoint.attaches >= 2 and await _healthy(proxy)

            await wait_until(reattached, "the proxy re-attached to the restarted container")
            assert "container mcp restarted" in " ".join((await proxy.child())["stderrTail"])
            # The new container was initialised by the proxy with this session's parameters.
            assert (await _call_simple(client)).startswith("This is a simple text")


async def test_attach_negotiates_v4(tmp_path: Path) -> None:
    endpoint = AttachEndpoint(protocols=("v4.channel.k8s.io",))
    async with endpoint.serving(), running_proxy(factory=_factory(endpoint, tmp_path)) as proxy:
        await wait_until(lambda: _healthy(proxy), "the proxy healthy")
        async with Client(proxy.url, mode="legacy") as client:
            assert (await _call_simple(client)).startswith("This is a simple text")
        assert endpoint.negotiated == ["v4.channel.k8s.io"]


async def test_attach_with_bad_credentials_reports_unhealthy(tmp_path: Path) -> None:
    endpoint = AttachEndpoint()
    async with (
        endpoint.serving(),
        running_proxy(factory=_factory(endpoint, tmp_path, token="wrong")) as proxy,
    ):

        async def refused() -> bool:
            return "401" in " ".join((await proxy.child())["stderrTail"])

        await wait_until(refused, "the 401 in the child's stderr")
        status, body = await proxy.health()
        assert status == 503 and body["children"]["handshake"]["running"] is False
        assert endpoint.attaches == 0


async def test_attach_rereads_a_rotated_token_file_on_reconnect(tmp_path: Path) -> None:
    """Projected service-account tokens rotate: a reconnect uses the token file's current token."""
    token_file = tmp_path / "token"
    token_file.write_text("token-1\n")
    endpoint = AttachEndpoint(token="token-1")
    async with endpoint.serving():
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(endpoint.kubeconfig(token_file=str(token_file)))
        target = AttachTarget(endpoint.namespace, endpoint.pod, endpoint.container)
        factory = attach_factory(load_kubeconfig(kubeconfig), target, Backoff(initial=0.2))
        async with running_proxy(factory=factory) as proxy:
            await wait_until(lambda: _healthy(proxy), "the proxy healthy")
            # The kubelet rotated the token; the API server no longer accepts the old one.
            token_file.write_text("token-2\n")
            endpoint.token = "token-2"
            await endpoint.restart_container()

            async def reattached() -> bool:
                return endpoint.attaches >= 2 and await _healthy(proxy)

            await wait_until(reattached, "the proxy re-attached with the rotated token")
            async with Client(proxy.url, mode="legacy") as client:
                assert (await _call_simple(client)).startswith("This is a simple text")
    assert endpoint.authorizations[:2] == ["Bearer token-1", "Bearer token-2"]


def test_target_and_kubeconfig_parsing(tmp_path: Path) -> None:
    assert AttachTarget.parse("ns/pod") == AttachTarget("ns", "pod", None)
    assert AttachTarget.parse("ns/pod/c").container == "c"
    for bad in ("ns", "ns/", "a/b/c/d"):
        with pytest.raises(ValueError, match="NAMESPACE/POD"):
            AttachTarget.parse(bad)
    config = tmp_path / "kc"
    config.write_text(
        "current-context: c\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
        "clusters: [{name: k, cluster: {server: 'https://10.0.0.1:6443', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {username: admin, password: pw}}]\n"
    )
    conn = load_kubeconfig(config)
    assert conn.headers["Authorization"].startswith("Basic ")
    url = conn.attach_url(AttachTarget("ns", "p", "c"))
    assert url.startswith("wss://10.0.0.1:6443/api/v1/namespaces/ns/pods/p/attach?")
    assert "container=c" in url and "stdin=true" in url
    with pytest.raises(ValueError, match="context 'other' not found"):
        load_kubeconfig(config, "other")
