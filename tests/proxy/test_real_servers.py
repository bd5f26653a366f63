"""The proxy in front of real stdio servers, driven by the mcp SDK client in both protocol eras."""

from __future__ import annotations

import asyncio
import contextlib
import os

from mcp.client.client import Client
from mcp.types import ErrorData, PromptReference, TextContent

from tests.proxy.conftest import VENV_BIN, RunningProxy, descendants, running_proxy

ERAS = ["legacy", "2026-07-28"]


async def test_mcp_server_time_from_pypi_both_eras() -> None:
    """One process serves both eras under the default `--modern-era auto`: mcp-server-time (mcp SDK
    2.x) answers the era probe but announces no list changes, so the probed process is replaced by
    one handshake-era process that 2026-07-28 clients are translated onto."""
    command = [str(VENV_BIN / "mcp-server-time"), "--local-timezone", "UTC"]
    async with running_proxy(command, modern_era="auto") as proxy:
        _, body = await proxy.health()
        assert body["eraProbe"]["answered"] and body["eraProbe"]["restarted"], body
        assert not body["eraProbe"]["nativeModern"]
        pids = set()
        for mode in ERAS:
            async with Client(proxy.url, mode=mode) as client:
                tools = await client.list_tools()
                assert {"get_current_time", "convert_time"} <= {tool.name for tool in tools.tools}
                result = await client.call_tool("get_current_time", {"timezone": "Europe/Paris"})
                assert not result.is_error
                text = result.content[0]
                assert isinstance(text, TextContent)
                assert "Europe/Paris" in text.text
            _, body = await proxy.health()
            assert list(body["children"]) == ["handshake"] and body["children"]["handshake"]["running"]
            pids.add(body["children"]["handshake"]["pid"])
        assert len(pids) == 1
        servers = [pid for pid, cmd in descendants(os.getpid()) if "mcp-server-time" in cmd]
        assert servers == list(pids), f"one mcp-server-time process expected, found {servers}"


async def test_separate_modern_era_runs_a_second_process() -> None:
    """`--modern-era separate` keeps the old layout: a second process serves 2026-07-28 natively."""
    command = [str(VENV_BIN / "mcp-server-time"), "--local-timezone", "UTC"]
    async with running_proxy(command, modern_era="separate") as proxy:
        for mode in ERAS:
            async with Client(proxy.url, mode=mode) as client:
                result = await client.call_tool("get_current_time", {"timezone": "UTC"})
                assert not result.is_error
        _, body = await proxy.health()
        assert body["children"]["handshake"]["running"] and body["children"]["modern"]["running"]
        assert body["children"]["handshake"]["pid"] != body["children"]["modern"]["pid"]


async def test_fixture_tools_and_completion_both_eras(fixture_proxy: RunningProxy) -> None:
    for mode in ERAS:
        async with Client(fixture_proxy.url, mode=mode) as client:
            result = await client.call_tool("test_simple_text", {})
            text = result.content[0]
            assert isinstance(text, TextContent)
            assert text.text == "This is a simple text response for testing."
            # Completion passes through untouched (a hand-rolled MCP re-implementation tends to lose it).
            ref = PromptReference(type="ref/prompt", name="test_prompt_with_arguments")
            completion = await client.complete(ref, {"name": "arg1", "value": "b"})
            assert completion.completion.values == ["beta"]


async def test_many_concurrent_sessions_get_their_own_answers(fixture_proxy: RunningProxy) -> None:
    """16 sessions share one child; every client gets its own responses and progress, ids never cross."""

    async def one(n: int) -> tuple[int, list[float], str]:
        seen: list[float] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append(progress)

        async with Client(fixture_proxy.url, mode="legacy") as client:
            # All sessions use the same request ids and the same progress token at the same time.
            result = await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            template = await client.read_resource(f"test://template/{n}/data")
            text = template.contents[0]
            assert not result.is_error
            return n, seen, getattr(text, "text", "")

    results = await asyncio.gather(*(one(n) for n in range(16)))
    for n, progress, text in results:
        assert progress == [0, 50, 100], f"client {n} got progress {progress}"
        assert f'"id": "{n}"' in text
    _, body = await fixture_proxy.health()
    assert body["children"]["handshake"]["inFlight"] == 0


async def test_sampling_request_reaches_the_session_that_caused_it(fixture_proxy: RunningProxy) -> None:
    """A server->client request (sampling) is routed to the session whose tool call triggered it."""
    from mcp.client.session import ClientRequestContext
    from mcp.types import (
        CreateMessageRequestParams,
        CreateMessageResult,
        CreateMessageResultWithTools,
    )

    asked: list[str] = []

    async def sampling(
        context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | CreateMessageResultWithTools | ErrorData:
        content = params.messages[0].content
        asked.append(getattr(content, "text", ""))
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="Paris"), model="m"
        )

    async with Client(fixture_proxy.url, mode="legacy") as bystander:
        async with Client(fixture_proxy.url, mode="legacy", sampling_callback=sampling) as client:
            result = await client.call_tool("test_sampling", {"prompt": "Capital of France?"})
            text = result.content[0]
            assert isinstance(text, TextContent) and text.text == "LLM response: Paris"
        await bystander.list_tools()
    assert asked == ["Capital of France?"]


async def test_many_concurrent_stateless_requests(fixture_proxy: RunningProxy) -> None:
    """2026-07-28: 16 clients, each request on its own POST, same ids at the same time."""

    async def one(n: int) -> str:
        async with Client(fixture_proxy.url, mode="2026-07-28") as client:
            template = await client.read_resource(f"test://template/{n}/data")
            return getattr(template.contents[0], "text", "")

    texts = await asyncio.gather(*(one(n) for n in range(16)))
    for n, text in enumerate(texts):
        assert f'"id": "{n}"' in text


async def test_elicitation_left_unanswered_by_a_departing_client_does_not_hang_the_server(
    fixture_proxy: RunningProxy,
) -> None:
    """A client that disconnects while the server waits for its elicitation answer releases the tool call."""
    from mcp.client.session import ClientRequestContext
    from mcp.types import ElicitRequestParams, ElicitResult

    asked = asyncio.Event()

    async def never_answers(
        context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        asked.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def call() -> None:
        async with Client(fixture_proxy.url, mode="legacy", elicitation_callback=never_answers) as client:
            await client.call_tool("test_elicitation", {"message": "name?"})

    task = asyncio.create_task(call())
    await asyncio.wait_for(asked.wait(), 20)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task

    async def settled() -> bool:
        _, body = await fixture_proxy.health()
        return bool(body["children"]["handshake"]["inFlight"] == 0)

    for _ in range(100):
        if await settled():
            break
        await asyncio.sleep(0.1)
    assert await settled()
    # The shared child is still responsive for everyone else.
    async with Client(fixture_proxy.url, mode="legacy") as other:
        result = await other.call_tool("test_simple_text", {})
        assert not result.is_error
