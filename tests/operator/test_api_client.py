"""The operator's Kubernetes client against a real local HTTP server that misbehaves on purpose.

Non-JSON error bodies give a clear ApiError (status + a truncated body), 429 honours Retry-After, 5xx is
retried with bounded back-off only for requests that are safe to repeat, and logging in from a
kubeconfig file leaves the process environment alone. No cluster needed: an aiohttp server on 127.0.0.1
plays the API server.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml
from aiohttp import web

from mcpfleet.backoff import Backoff
from mcpfleet.platform.kubernetes.api import ApiError, KubeApi, RetryPolicy, kubeconfig_login, login_from
from tests.local_http import serving

FAST = RetryPolicy(attempts=4, backoff=Backoff(initial=0.01, maximum=0.05, jitter=0.5), retry_after_cap=0.5)


class FakeServer:
    """Answers each request with the next scripted response (the last one repeats); records requests."""

    def __init__(self) -> None:
        self.script: list[Callable[[], web.Response]] = []
        self.seen: list[tuple[str, str]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path))
        make = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return make()


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    fake = FakeServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake.handle)
    async with serving(app) as url:
        fake.url = url
        yield fake


def client(server: FakeServer, retry: RetryPolicy = FAST) -> KubeApi:
    return KubeApi(lambda: kopf.ConnectionInfo(server=server.url, token="t"), retry=retry)


def deployment() -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ns"}}


def status(code: int, message: str, **headers: str) -> Callable[[], web.Response]:
    body = {"kind": "Status", "message": message, "reason": "X", "code": code}
    return lambda: web.json_response(body, status=code, headers=headers)


def raw(code: int, text: str = "", content_type: str = "text/plain") -> Callable[[], web.Response]:
    return lambda: web.Response(status=code, text=text or None, content_type=content_type)


def ok(body: dict[str, Any]) -> Callable[[], web.Response]:
    return lambda: web.json_response(body)


async def test_non_json_error_body_gives_status_and_truncated_body(server: FakeServer) -> None:
    page = "<html><body>" + "bad gateway " * 500 + "</body></html>"
    server.script = [raw(502, page, "text/html")]
    api = client(server)
    try:
        with pytest.raises(ApiError) as caught:
            await api.create(deployment())  # POST: never resent after a 5xx
        error = caught.value
        assert error.code == 502
        assert "HTTP 502" in error.message and "<html><body>bad gateway" in error.message
        assert len(error.message) < 400, "the body is truncated"
        assert server.seen == [("POST", "/apis/apps/v1/namespaces/ns/deployments")]
    finally:
        await api.close()


async def test_non_json_success_body_is_an_error_not_a_decode_traceback(server: FakeServer) -> None:
    server.script = [raw(200, "not json at all")]
    api = client(server)
    try:
        with pytest.raises(ApiError) as caught:
            await api.get("apps/v1", "Deployment", "ns", "d")
        assert caught.value.code == 200 and "not json at all" in caught.value.message
    finally:
        await api.close()


async def test_empty_error_body_names_the_status(server: FakeServer) -> None:
    server.script = [raw(403)]
    api = client(server)
    try:
        with pytest.raises(ApiError) as caught:
            await api.get("apps/v1", "Deployment", "ns", "d")
        assert caught.value.code == 403 and "Forbidden" in caught.value.message
    finally:
        await api.close()


async def test_429_waits_for_retry_after_then_succeeds(server: FakeServer) -> None:
    server.script = [
        status(429, "too many requests", **{"Retry-After": "0.3"}),
        ok({"metadata": {"name": "d"}}),
    ]
    api = client(server)
    try:
        started = time.monotonic()
        # Even a POST is resent on 429: priority and fairness refused it before running it.
        result = await api.create(deployment())
        assert time.monotonic() - started >= 0.3
        assert result == {"metadata": {"name": "d"}}
        assert len(server.seen) == 2 and api.retries["429"] == 1
        assert api.requests[("create", "Deployment")] == 1, "a retry is not a second logical request"
    finally:
        await api.close()


async def test_retry_after_is_bounded(server: FakeServer) -> None:
    server.script = [status(429, "too many requests", **{"Retry-After": "3600"}), ok({})]
    api = client(server)
    try:
        started = time.monotonic()
        await api.get("apps/v1", "Deployment", "ns", "d")
        assert time.monotonic() - started < FAST.retry_after_cap + 1.0
    finally:
        await api.close()


@pytest.mark.parametrize("code", [500, 502, 503, 504])
async def test_5xx_on_server_side_apply_is_retried(server: FakeServer, code: int) -> None:
    server.script = [status(code, "etcd hiccup"), status(code, "etcd hiccup"), ok({"ok": 1})]
    api = client(server)
    try:
        assert await api.apply(deployment()) == {"ok": 1}
        assert [m for m, _ in server.seen] == ["PATCH"] * 3
        assert api.retries["5xx"] == 2 and api.writes == 1
    finally:
        await api.close()


async def test_5xx_retries_are_bounded(server: FakeServer) -> None:
    server.script = [status(500, "still broken")]
    api = client(server)
    try:
        with pytest.raises(ApiError) as caught:
            await api.list("apps/v1", "Deployment", "ns")
        assert caught.value.code == 500 and caught.value.message == "still broken"
        assert len(server.seen) == FAST.attempts
    finally:
        await api.close()


async def test_5xx_on_event_post_is_not_resent(server: FakeServer) -> None:
    server.script = [status(500, "maybe stored"), ok({})]
    api = client(server)
    try:
        involved = {"kind": "MCPServer", "metadata": {"name": "s", "namespace": "ns", "uid": "u"}}
        with pytest.raises(ApiError):
            await api.event(involved, reason="Created", message="x")
        assert len(server.seen) == 1
    finally:
        await api.close()


async def test_status_patch_retry_after_5xx_then_conflict_is_reported(server: FakeServer) -> None:
    """A conditional patch that landed before the 5xx comes back 409 on the retry: the controller
    re-reads on 409, so the repeat is safe."""
    server.script = [status(503, "unavailable"), status(409, "the object has been modified")]
    api = client(server)
    try:
        with pytest.raises(ApiError) as caught:
            await api.patch("apps/v1", "Deployment", "ns", "d", {"metadata": {"resourceVersion": "1"}})
        assert caught.value.code == 409
        assert len(server.seen) == 2
    finally:
        await api.close()


async def test_connection_refused_is_retried_then_raised() -> None:
    import aiohttp

    api = KubeApi(lambda: kopf.ConnectionInfo(server="http://127.0.0.1:9", token="t"), retry=FAST)
    try:
        with pytest.raises(aiohttp.ClientConnectorError):
            await api.create(deployment())
        assert api.retries["connection"] == FAST.attempts - 1
    finally:
        await api.close()


def test_kubeconfig_login_reads_the_file_and_leaves_the_environment_alone(tmp_path: Path) -> None:
    (tmp_path / "certs").mkdir()
    (tmp_path / "certs" / "ca.crt").write_text("not used")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "dev",
        "contexts": [{"name": "dev", "context": {"cluster": "c", "user": "u", "namespace": "team"}}],
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority": "certs/ca.crt"},
            }
        ],
        "users": [{"name": "u", "user": {"token": "secret-token"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    before = dict(os.environ)
    info = kubeconfig_login(str(path))
    info_again = login_from(str(path))()
    assert dict(os.environ) == before
    assert info.server == "https://127.0.0.1:6443" and info.token == "secret-token"
    assert info.default_namespace == "team"
    assert info.ca_path == str(tmp_path / "certs" / "ca.crt"), "relative to the kubeconfig's folder"
    assert info_again.server == info.server
