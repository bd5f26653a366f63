"""vMCP optimizer and code mode: retrieval quality on BFCL, find_tool latency, rebuild time, bytes.

Retrieval quality uses data nobody here wrote: the Berkeley Function Calling Leaderboard's
`simple_python` and `multiple` categories (PyPI `bfcl-eval`, only its data files: install it into
the bench venv with `pip install --no-deps bfcl-eval`; it is not a dependency of mcpfleet). Every
function of both categories is pooled into one catalogue, split over 4 real MCP backends (JSON-RPC
over streamable HTTP) behind one gateway; for each question an MCP SDK client calls `find_tool`
with the question as `tool_description`, and we count whether the gold function is first / in the
top 5. BM25 alone, then hybrid with the real embedding server (`mcpfleet embeddings serve`'s app: the
WordLlama model bundled in the `wordllama` wheel, over TEI's API), then hybrid with the hashed-feature
test double (`mcpfleet.vmcp.hashembed`) for reference. The blend (`hybridSearchSemanticRatio`) is tuned
on BFCL and then reported on a second, independent set: MetaTool's tool-selection queries (199 tools,
995 user-phrased queries, vendored in bench/data/metatool with its MIT licence and source).

Then: find_tool p50 at 1,000 and 10,000 tools, BM25 and (10,000) hybrid (through the gateway's dispatch, and over HTTP),
index rebuild time after a list_changed, bytes of a full tools/list against a find_tool round
trip, and a 10-call code-mode script against 10 tools/call round trips.

Run: `.venv/bin/python -P bench/optimizer.py` (prints a Markdown table).
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import sys
import time
from importlib import resources
from typing import Any

import orjson
import uvicorn
from mcp.client.client import Client

from mcpfleet.vmcp import embedmodel, embedserver
from mcpfleet.vmcp.config import parse_config
from mcpfleet.vmcp.context import CallContext
from mcpfleet.vmcp.hashembed import create_app as embeddings_app
from mcpfleet.vmcp.server import ServeOptions, build_app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load_bfcl() -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """(pooled functions as MCP tools, [(question, gold function name)])."""
    data = resources.files("bfcl_eval") / "data"
    tools: dict[str, dict[str, Any]] = {}
    questions: list[tuple[str, str]] = []
    for cat in ("simple_python", "multiple"):
        entries = [
            json.loads(x) for x in (data / f"BFCL_v4_{cat}.json").read_text().splitlines() if x.strip()
        ]
        answers = {
            (a := json.loads(x))["id"]: a
            for x in (data / "possible_answer" / f"BFCL_v4_{cat}.json").read_text().splitlines()
            if x.strip()
        }
        for e in entries:
            for f in e["function"]:
                schema = dict(f.get("parameters") or {})
                if schema.get("type") == "dict":
                    schema["type"] = "object"
                tools.setdefault(
                    f["name"],
                    {"name": f["name"], "description": f.get("description", ""), "inputSchema": schema},
                )
            gold = next(iter(answers[e["id"]]["ground_truth"][0]))
            text = " ".join(m["content"] for turn in e["question"] for m in turn if m.get("role") == "user")
            questions.append((text, gold))
    return list(tools.values()), questions


BACKENDS: list[Backend] = []


class Backend:
    """A minimal MCP server (2025 era, JSON answers) serving a fixed tool list; calls echo arguments."""

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self.tools = tools
        self.list_body = orjson.dumps({"tools": tools})

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                m = await receive()
                await send({"type": m["type"] + ".complete"})
                if m["type"] == "lifespan.shutdown":
                    return
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        if scope["method"] != "POST":
            await send({"type": "http.response.start", "status": 405, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        msg = orjson.loads(body)
        if "id" not in msg:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        method = msg.get("method")
        if method == "initialize":
            result: Any = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "bfcl", "version": "1"},
            }
            out = orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        elif method == "tools/list":
            out = b'{"jsonrpc":"2.0","id":' + orjson.dumps(msg["id"]) + b',"result":' + self.list_body + b"}"
        elif method == "tools/call":
            p = msg.get("params") or {}
            text = orjson.dumps({"tool": p.get("name"), "arguments": p.get("arguments")}).decode()
            result = {"content": [{"type": "text", "text": text}]}
            out = orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        else:
            out = orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {}})
        headers = [(b"content-type", b"application/json"), (b"mcp-session-id", b"s1")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": out})


async def serve(app: Any, port: int | None = None) -> tuple[uvicorn.Server, int]:
    port = port or free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="on")
    )
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    asyncio.get_running_loop().create_task(server.serve())
    for _ in range(3000):
        if server.started:
            return server, port
        await asyncio.sleep(0.02)
    raise RuntimeError(f"server on port {port} did not start")


async def gateway(
    tools: list[dict[str, Any]], parts: int, **config: Any
) -> tuple[Any, list[uvicorn.Server], int]:
    servers = []
    backends = []
    for i in range(parts):
        served = Backend(tools[i::parts])
        BACKENDS.append(served)
        srv, port = await serve(served)
        servers.append(srv)
        backends.append({"name": f"b{i}", "url": f"http://127.0.0.1:{port}/mcp"})
    cfg = parse_config(
        {"name": "bench", "backends": backends, "aggregation": {"conflictResolution": "manual"}, **config}
    )
    port = free_port()
    app = build_app(cfg, ServeOptions(host="127.0.0.1", port=port))
    srv, _ = await serve(app, port)
    servers.append(srv)
    finder = app.gateway.finder
    if finder is not None:
        await finder.index("legacy")
    return app, servers, port


async def stop(app: Any, servers: list[uvicorn.Server]) -> None:
    for s in servers:
        s.should_exit = True
    await asyncio.sleep(0.3)
    await app.aclose()


async def recall(
    tools: list[dict[str, Any]], questions: list[tuple[str, str]], **optimizer: Any
) -> tuple[float, float, float]:
    app, servers, port = await gateway(tools, 4, optimizer={"maxToolsToReturn": 5, **optimizer})
    await app.gateway.finder.embedded()  # tool vectors are computed after the index is built
    at1 = at5 = 0
    t0 = time.perf_counter()
    async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as c:
        for q, gold in questions:
            res = await c.call_tool("find_tool", {"tool_description": q})
            names = [t["name"] for t in res.structured_content["tools"]]
            at1 += names[:1] == [gold]
            at5 += gold in names[:5]
    per = (time.perf_counter() - t0) / len(questions)
    await stop(app, servers)
    n = len(questions)
    return at1 / n, at5 / n, per


async def latency(
    tools: list[dict[str, Any]], size: int, questions: list[tuple[str, str]], embeddings: str | None = None
) -> dict[str, float]:
    catalogue = []
    k = 0
    while len(catalogue) < size:
        for t in tools:
            if len(catalogue) >= size:
                break
            catalogue.append({**t, "name": f"{t['name']}_v{k}"} if k else t)
        k += 1
    optimizer = {"embeddingProvider": "tei", "embeddingService": embeddings} if embeddings else {}
    app, servers, port = await gateway(catalogue, 10, optimizer=optimizer)
    gw = app.gateway
    cold = gw.finder.last_build_seconds
    await gw.finder.embedded()
    embed_s = gw.finder.last_embed_seconds
    for q, _ in questions[:300]:  # warm: query vectors cached as they are for an agent repeating a search
        await gw.dispatch(
            "tools/call",
            {"name": "find_tool", "arguments": {"tool_description": q}},
            CallContext(era="legacy"),
        )
    ctx = CallContext(era="legacy")
    qs = [q for q, _ in questions[:300]]
    ts = []
    for q in qs:
        t0 = time.perf_counter()
        await gw.dispatch("tools/call", {"name": "find_tool", "arguments": {"tool_description": q}}, ctx)
        ts.append(time.perf_counter() - t0)
    http = []
    async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as c:
        for q in qs[:100]:
            t0 = time.perf_counter()
            res = await c.call_tool("find_tool", {"tool_description": q})
            http.append(time.perf_counter() - t0)
        find_bytes = len(orjson.dumps(res.model_dump(mode="json", by_alias=True, exclude_none=True)))
    full_list = len(gw.router._cache[("tools/list", "legacy")])
    catalogue_bytes = len(orjson.dumps({"tools": gw.aggs["legacy"].catalogue}))
    # A list_changed of one backend: the index is rebuilt (tokens of unchanged tools are cached).
    b = next(iter(gw.backends.values()))
    first = BACKENDS[-10]  # this gateway's first backend gains one tool
    first.tools = [
        *first.tools,
        {"name": "added_tool", "description": "A tool added at run time", "inputSchema": {"type": "object"}},
    ]
    first.list_body = orjson.dumps({"tools": first.tools})
    t0 = time.perf_counter()
    await gw.pool.on_backend_notification(b.upstream, {"method": "notifications/tools/list_changed"})
    await gw.finder.index("legacy")
    rebuild_after = time.perf_counter() - t0
    index_rebuild = gw.finder.last_build_seconds
    await stop(app, servers)
    return {
        "p50_ms": statistics.median(ts) * 1000,
        "p95_ms": sorted(ts)[int(0.95 * len(ts))] * 1000,
        "http_p50_ms": statistics.median(http) * 1000,
        "list_changed_to_searchable_s": rebuild_after,
        "index_rebuild_s": index_rebuild or 0.0,
        "cold_build_s": cold or 0.0,
        "embed_all_s": embed_s or 0.0,
        "list_bytes": full_list,
        "catalogue_bytes": catalogue_bytes,
        "find_bytes": find_bytes,
    }


async def code_mode(tools: list[dict[str, Any]]) -> dict[str, float]:
    app, servers, port = await gateway(tools[:20], 2, codeMode={"enabled": True})
    names = [t["name"] for t in tools[:10]]
    calls = [(n, {"x": i}) for i, n in enumerate(names)]
    script = (
        "[" + ", ".join(f"call_tool({json.dumps(n)}, {{'x': {i}}})" for i, (n, _) in enumerate(calls)) + "]"
    )
    pscript = (
        "parallel(["
        + ", ".join(f"lambda: call_tool({json.dumps(n)}, {{'x': {i}}})" for i, (n, _) in enumerate(calls))
        + "])"
    )
    out: dict[str, list[float]] = {"calls": [], "script": [], "parallel": []}
    sizes: dict[str, int] = {}
    async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as c:
        for _ in range(10):
            t0 = time.perf_counter()
            total = 0
            for n, a in calls:
                r = await c.call_tool(n, a)
                total += len(orjson.dumps(r.model_dump(mode="json", by_alias=True, exclude_none=True)))
            out["calls"].append(time.perf_counter() - t0)
            sizes["calls"] = total
            for key, s in (("script", script), ("parallel", pscript)):
                t0 = time.perf_counter()
                r = await c.call_tool("execute_tool_script", {"script": s})
                out[key].append(time.perf_counter() - t0)
                assert not r.is_error, r
                sizes[key] = len(orjson.dumps(r.model_dump(mode="json", by_alias=True, exclude_none=True)))
    await stop(app, servers)
    return {
        **{f"{k}_ms": statistics.median(v) * 1000 for k, v in out.items()},
        **{f"{k}_bytes": v for k, v in sizes.items()},
    }


async def main() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--skip-recall", action="store_true", help="only latency, rebuild, bytes and code mode"
    )
    args = parser.parse_args()
    tools, questions = load_bfcl()
    print(f"BFCL simple_python + multiple: {len(tools)} functions, {len(questions)} questions", flush=True)
    # One embedding server for the whole run (the real model, TEI API), as a gateway would use it.
    model, port = await serve(embedserver.create_app(embedmodel.load()))
    service = f"http://127.0.0.1:{port}"
    for size in (1000, 10000):
        print(size, await latency(tools, size, questions), flush=True)
    print("10000 hybrid", await latency(tools, 10000, questions, service), flush=True)
    print("code mode", await code_mode(tools), flush=True)
    if not args.skip_recall:
        await quality(tools, questions, service)
    model.should_exit = True
    await asyncio.sleep(0.5)  # let it close its connections before the loop ends


def load_metatool() -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """MetaTool's 199 tools and the vendored 995 queries (bench/data/metatool/README.md)."""
    import csv
    from pathlib import Path

    folder = Path(__file__).parent / "data" / "metatool"
    described = json.loads((folder / "plugin_des.json").read_text())
    tools = [{"name": n, "description": d, "inputSchema": {"type": "object"}} for n, d in described.items()]
    with (folder / "queries.csv").open(newline="") as f:
        questions = [(row["Query"], row["Tool"]) for row in csv.DictReader(f)]
    return tools, questions


RATIOS = ("0.3", "0.4", "0.5", "0.6", "0.7", "0.8")


async def quality(tools: list[dict[str, Any]], questions: list[tuple[str, str]], service: str) -> None:
    """BM25 and hybrid on BFCL (where the blend is tuned), then on MetaTool with the tuned blend."""
    tei = {"embeddingService": service, "embeddingProvider": "tei"}
    r1, r5, per = await recall(tools, questions)
    print(f"| BFCL | BM25 | {r1:.3f} | {r5:.3f} | {per * 1000:.1f} ms |", flush=True)
    best = ("0.5", -1.0)
    for ratio in RATIOS:
        r1, r5, per = await recall(tools, questions, **tei, hybridSearchSemanticRatio=ratio)
        print(f"| BFCL | hybrid (ratio {ratio}) | {r1:.3f} | {r5:.3f} | {per * 1000:.1f} ms |", flush=True)
        if r1 > best[1]:
            best = (ratio, r1)
    emb, port = await serve(embeddings_app(512))
    r1, r5, per = await recall(
        tools,
        questions,
        embeddingService=f"http://127.0.0.1:{port}/v1",
        embeddingProvider="openai",
        embeddingModel="hash",
    )
    print(
        f"| BFCL | hybrid, hashed features (test double) | {r1:.3f} | {r5:.3f} | {per * 1000:.1f} ms |",
        flush=True,
    )
    emb.should_exit = True
    mtools, mquestions = load_metatool()
    print(
        f"MetaTool: {len(mtools)} tools, {len(mquestions)} queries; blend tuned on BFCL: {best[0]}",
        flush=True,
    )
    r1, r5, per = await recall(mtools, mquestions)
    print(f"| MetaTool | BM25 | {r1:.3f} | {r5:.3f} | {per * 1000:.1f} ms |", flush=True)
    for ratio in sorted({best[0], "0.5"}):
        r1, r5, per = await recall(mtools, mquestions, **tei, hybridSearchSemanticRatio=ratio)
        print(
            f"| MetaTool | hybrid (ratio {ratio}) | {r1:.3f} | {r5:.3f} | {per * 1000:.1f} ms |", flush=True
        )


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
