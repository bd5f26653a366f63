"""The gateway's optimizer with the real embedding server: `embeddingProvider: tei` and
`embeddingService` alone give hybrid ranking and the model's name in /status; the gateway serves
find_tool with BM25 while tool vectors are pending, says `pending` / `ready` / `failed` (with the
cause) in `optimizer.embeddings.state`, and computes each tool's vector once (cached by content)."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.client.client import Client

from mcpfleet.vmcp.embedmodel import DEFAULT_MODEL
from tests.vmcp.conftest import GatewayFactory
from tests.vmcp.servers import Served
from tests.vmcp.test_optimizer import config, found


async def test_tei_service_alone_gives_hybrid_ranking(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, embed_server: str
) -> None:
    opt = {"embeddingProvider": "tei", "embeddingService": embed_server, "maxToolsToReturn": 3}
    gw = await gateway(config(*alpha_beta, optimizer=opt))
    finder = gw.app.gateway.finder
    await finder.index("modern")
    await finder.embedded()
    status = gw.app.gateway.status()["optimizer"]
    embeddings = status["embeddings"]
    assert embeddings["state"] == "ready" and embeddings["cause"] is None, embeddings
    assert embeddings["model"] == DEFAULT_MODEL and status["ranking"] == "hybrid"
    async with Client(gw.url, mode="2026-07-28") as c:
        res = await c.call_tool("find_tool", {"tool_description": "make the text upper case"})
        tools = res.structured_content["tools"]
        assert tools[0]["name"].endswith("_upper"), tools
        # Blended: BM25 scaled to [0, 1] mixed with a cosine, so no score exceeds 1.
        assert all(0 < t["score"] <= 1.0 for t in tools), tools


class SlowEmbeddings:
    """An ASGI wrapper holding every /embed request until `release` is set; counts the texts sent."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.release = asyncio.Event()
        self.texts = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/embed":
            body = b""
            while True:
                m = await receive()
                body += m.get("body", b"")
                if not m.get("more_body"):
                    break
            import orjson

            self.texts += len(orjson.loads(body)["inputs"])
            await self.release.wait()

            async def replay() -> dict[str, Any]:
                return {"type": "http.request", "body": body, "more_body": False}

            await self.app(scope, replay, send)
            return
        await self.app(scope, receive, send)


async def test_bm25_until_embeddings_are_ready_then_hybrid(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory, served: Any
) -> None:
    from mcpfleet.vmcp import embedmodel, embedserver

    slow = SlowEmbeddings(embedserver.create_app(embedmodel.load()))
    emb = await served(slow)
    gw = await gateway(
        config(*alpha_beta, optimizer={"embeddingProvider": "tei", "embeddingService": emb.base})
    )
    finder = gw.app.gateway.finder
    await finder.index("modern")
    assert finder.status()["embeddings"]["state"] == "pending"
    async with Client(gw.url, mode="legacy") as c:
        # Served at once, by keywords, while the vectors are pending.
        names = await asyncio.wait_for(found(c, "upper case the text"), 10)
        assert names[0].endswith("_upper")
        assert gw.app.gateway.status()["optimizer"]["ranking"] == "bm25"
        slow.release.set()
        await finder.embedded()
        assert finder.status()["embeddings"]["state"] == "ready"
        sent = slow.texts
        assert (await found(c, "upper case the text"))[0].endswith("_upper")
    # A rebuild of the same tools (a config edit re-applying them) embeds nothing again: cached by content.
    finder.update(
        {
            "modern": [*finder._catalogues["modern"]],
            "legacy": [*finder._catalogues["legacy"], {"name": "new_tool", "description": "brand new"}],
        }
    )
    await finder.embedded()
    assert slow.texts - sent <= 2  # the new tool (and no other tool text); plus none for old tools


async def test_failed_service_says_so_and_keeps_keywords(
    alpha_beta: tuple[Served, Served], gateway: GatewayFactory
) -> None:
    opt = {"embeddingProvider": "tei", "embeddingService": "http://127.0.0.1:9"}
    gw = await gateway(config(*alpha_beta, optimizer=opt))
    finder = gw.app.gateway.finder
    await finder.index("legacy")
    await finder.embedded()
    embeddings = gw.app.gateway.status()["optimizer"]["embeddings"]
    assert embeddings["state"] == "failed" and "unreachable" in embeddings["cause"], embeddings
    async with Client(gw.url, mode="legacy") as c:
        assert (await found(c, "upper case the text"))[0].endswith("_upper")
