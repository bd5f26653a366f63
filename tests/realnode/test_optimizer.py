"""The gateway's optimizer and code mode on real pods, called by the real `mcp` SDK client.

What runs (workloads.OPTIMIZER_GROUP and `workloads.optimizer`, ToolHive's v1beta1 shape, in the
`optimizer` namespace of the tier's `started` fixture): the real servers `uvx://mcp-server-time` and
`npx://@modelcontextprotocol/server-everything` in an MCPGroup, and two VirtualMCPServers over it:

- `finder`: optimizer on (keyword ranking, no embedding service) and code mode on; the time server's
  `convert_time` hidden by the gateway's filter, everything's `get-sum` forbidden by a Cedar policy;
- `hybrid`: `embeddingServerRef` to an EmbeddingServer with `image: mcpfleet://embeddings`: a pod of
  the mcpfleet image running `mcpfleet embeddings serve` with the real WordLlama model from its PyPI
  wheel (nothing downloaded, so it runs offline), with `exposeAllTools`.

From the client pod, over the gateways' Service DNS names, in both protocol eras where it matters:
`tools/list` holds the meta-tools as configured; `find_tool` ranks `time_get_current_time` first
with its schema; `call_tool` routes to the time server and returns its real answer;
`execute_tool_script` (found by `find_tool`, run through `call_tool`) calls one tool per backend in
`parallel()` and returns both answers; the hidden and the forbidden tool are never found, and
calling them fails (unknown tool; -32012, also from inside a script, naming the line). The
EmbeddingServer pod names the model in TEI's /info; the hybrid gateway's /status shows its
embeddings `ready` with that model's name, its scores are the blend of keyword and embedding
scores, so its embeddings really came from the EmbeddingServer, and it finds the tool `finder`
forbids.

Printed: the time from the VirtualMCPServer's creation to its first full find_tool answer, find_tool
and call_tool round trips as the client pod sees them, the gateway pod's and the embedding pod's RSS.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import pytest
from tests.realnode.conftest import PodClient, wait_ready

from mcpfleet.devcluster.handle import ClusterHandle
from mcpfleet.vmcp.embedmodel import DEFAULT_MODEL

FORBIDDEN = -32012
TIME_QUERY = {"tool_description": "current time in a timezone"}
TOKYO = {"timezone": "Asia/Tokyo"}
# What the hybrid gateway lists (exposeAllTools: the meta-tools beside every tool, none filtered).
HYBRID_LISTS = {"find_tool", "call_tool", "time_get_current_time", "time_convert_time", "everything_echo"}
SCRIPT = """
answers = parallel([
    lambda: time_get_current_time(timezone="Asia/Tokyo"),
    lambda: everything_echo(message="from a script"),
])
return {"time": answers[0], "echo": answers[1]}
"""
FORBIDDEN_SCRIPT = """
now = time_get_current_time(timezone="UTC")
total = everything_get_sum(a=2, b=3)
return total
"""
# The image's own python; the sum leaves out the reading process itself.
RSS_KIB = (
    "import glob, os\n"
    "total = 0\n"
    "for f in glob.glob('/proc/[0-9]*/status'):\n"
    "    if f != f'/proc/{os.getpid()}/status':\n"
    "        try:\n"
    "            total += sum(int(l.split()[1]) for l in open(f) if l.startswith('VmRSS:'))\n"
    "        except OSError:\n"
    "            pass\n"
    "print(total)\n"
)


def _status(k: ClusterHandle, ns: str, kind: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = json.loads(k.kubectl("-n", ns, "get", kind, name, "-o", "json").stdout).get(
        "status", {}
    )
    return status


def _found(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """The tools of a find_tool answer (its structuredContent, which must match its text)."""
    assert not answer.get("error") and not answer["is_error"], answer
    tools: list[dict[str, Any]] = answer["structured"]["tools"]
    assert json.loads(answer["text"]) == {"tools": tools}
    return tools


def _names(answer: dict[str, Any]) -> list[str]:
    return [t["name"] for t in _found(answer)]


def _find(query: str) -> tuple[str, dict[str, Any]]:
    return ("find_tool", {"tool_description": query})


def _first_full_answer(
    k: ClusterHandle, client: PodClient, ns: str, url: str, want: set[str]
) -> dict[str, Any]:
    """Polls until find_tool indexes both backends: the everything backend may join the gateway a
    health check after the VirtualMCPServer turns Ready. Returns that session's answer."""

    def answer() -> dict[str, Any] | None:
        try:
            res = client.session(url, [("find_tool", TIME_QUERY), _find("echo back a message")])
        except AssertionError:
            return None
        calls = res["calls"]
        if any(c.get("error") or c["is_error"] for c in calls):
            return None
        return res if want <= {n for c in calls for n in _names(c)} else None

    result: dict[str, Any] = k.wait_for(f"find_tool to find {sorted(want)}", answer, 180, 2, namespace=ns)
    return result


def _created(k: ClusterHandle, ns: str, kind: str, name: str) -> float:
    raw = json.loads(k.kubectl("-n", ns, "get", kind, name, "-o", "json").stdout)["metadata"]
    return datetime.fromisoformat(raw["creationTimestamp"].replace("Z", "+00:00")).timestamp()


@pytest.mark.timeout(900)
def test_optimizer_and_code_mode_through_the_in_cluster_gateway(
    real_cluster: ClusterHandle, operator_installed: str, client: PodClient, started: dict[str, str]
) -> None:
    k, ns = real_cluster, started["optimizer"]
    wait_ready(
        k, ns, "mcpserver/time", "mcpserver/everything", "embeddingserver/wordllama",
        "virtualmcpserver/finder", "virtualmcpserver/hybrid", timeout=300,
    )  # fmt: skip
    finder = _status(k, ns, "virtualmcpserver", "finder")["url"]
    assert finder.startswith(f"http://vmcp-finder.{ns}.svc.cluster.local:"), finder
    first = _first_full_answer(k, client, ns, finder, {"time_get_current_time", "everything_echo"})
    after = time.time() - _created(k, ns, "virtualmcpserver", "finder")
    print(f"optimizer: first full find_tool answer {after:.0f}s after the VirtualMCPServer was created")

    # tools/list: only the meta-tools (exposeAllTools is off); execute_tool_script is findable.
    assert {t["name"] for t in first["tools"]} == {"find_tool", "call_tool"}, first["tools"]
    find_schema = next(t for t in first["tools"] if t["name"] == "find_tool")["inputSchema"]
    assert find_schema["required"] == ["tool_description"]

    # Ranking, routing and code mode, in one session of each protocol era.
    for mode in ("legacy", "2026-07-28"):
        res = client.session(
            finder,
            [
                ("find_tool", TIME_QUERY),
                ("call_tool", {"tool_name": "time_get_current_time", "parameters": TOKYO}),
                _find("run a script that calls several tools in parallel"),
                ("call_tool", {"tool_name": "execute_tool_script", "parameters": {"script": SCRIPT}}),
            ],
            mode=mode,
        )
        found, called, script_found, script = res["calls"]
        tools = _found(found)
        assert tools[0]["name"] == "time_get_current_time", (mode, tools)
        assert "timezone" in tools[0]["inputSchema"]["properties"], tools[0]
        assert tools[0]["description"] and tools[0]["score"] > 0
        assert not called["is_error"], (mode, called)
        now = json.loads(called["text"])
        assert now["timezone"] == "Asia/Tokyo" and now["datetime"].endswith("+09:00"), now
        assert "execute_tool_script" in _names(script_found), (mode, script_found)
        assert not script["is_error"], (mode, script)
        both = script["structured"]
        assert both["time"]["timezone"] == "Asia/Tokyo", both
        assert "from a script" in json.dumps(both["echo"]), both
        print(
            f"optimizer ({mode}): find_tool {found['seconds'] * 1000:.0f} ms, call_tool "
            f"{called['seconds'] * 1000:.0f} ms, 2-call parallel() script {script['seconds'] * 1000:.0f} ms "
            "(client pod's round trips)"
        )

    # The gateway's filter and its authorization: the hidden and the forbidden tool are never found.
    res = client.session(
        finder,
        [
            _find("convert a time from one timezone to another"),
            ("find_tool", {"tool_description": "add two numbers", "tool_keywords": ["sum", "get-sum"]}),
            ("call_tool", {"tool_name": "time_convert_time", "parameters": {}}),
            ("call_tool", {"tool_name": "everything_get-sum", "parameters": {"a": 2, "b": 3}}),
            ("everything_get-sum", {"a": 2, "b": 3}),
            ("call_tool", {"tool_name": "execute_tool_script", "parameters": {"script": FORBIDDEN_SCRIPT}}),
        ],
    )
    convert, add, hidden_call, forbidden_call, direct_call, forbidden_script = res["calls"]
    assert "time_convert_time" not in _names(convert), convert
    assert "everything_get-sum" not in _names(add), add
    assert hidden_call.get("is_error") and "time_convert_time" in hidden_call["text"], hidden_call
    for refused in (forbidden_call, direct_call):
        assert refused.get("error", {}).get("code") == FORBIDDEN, refused
        assert "everything_get-sum" in refused["error"]["message"], refused
    assert forbidden_script.get("is_error"), forbidden_script
    assert forbidden_script["text"].startswith("script line 3: tool everything_get-sum:"), forbidden_script
    assert "forbidden" in forbidden_script["text"], forbidden_script

    # Hybrid ranking: the EmbeddingServer's real model, its vectors blended in, every tool listed too.
    embedding = _status(k, ns, "embeddingserver", "wordllama")
    assert embedding["url"].startswith(f"http://emb-wordllama.{ns}.svc.cluster.local:8080"), embedding
    info = client.get(embedding["url"].rstrip("/") + "/info")["body"]
    assert info["model_id"] == DEFAULT_MODEL, info
    hybrid = _status(k, ns, "virtualmcpserver", "hybrid")["url"]

    def blended() -> dict[str, Any] | None:
        # Blended scores are in [0, 1] and the best is (1 - ratio) + ratio * its cosine scaled by the
        # best cosine, above 0.5 when that is positive; keyword-only scores are raw BM25 (the top > 1).
        try:
            res = client.session(hybrid, [("find_tool", TIME_QUERY), _find("add two numbers")])
        except AssertionError:
            return None
        found, add = res["calls"]
        if found.get("error") or found["is_error"] or add.get("error") or add["is_error"]:
            return None
        tools = _found(found)
        if not tools or not 0.5 < tools[0]["score"] <= 1.0 or "everything_get-sum" not in _names(add):
            return None
        return res

    res = k.wait_for("the hybrid gateway to blend in embeddings", blended, 120, 2, namespace=ns)
    listed = {t["name"] for t in res["tools"]}
    assert listed >= HYBRID_LISTS, listed
    assert "execute_tool_script" not in listed, "code mode is off on the hybrid gateway"
    tools = _found(res["calls"][0])
    assert tools[0]["name"] == "time_get_current_time", tools
    assert all(0.0 < t["score"] <= 1.0 for t in tools), tools
    status = client.get(hybrid.removesuffix("/mcp") + "/status")["body"]
    embeddings = status["optimizer"]["embeddings"]
    assert embeddings["state"] == "ready" and embeddings["model"] == DEFAULT_MODEL, status["optimizer"]
    assert embeddings["cause"] is None and embeddings["vectors"] > 0, embeddings
    assert status["optimizer"]["ranking"] == "hybrid", status["optimizer"]
    print(f"optimizer: hybrid top score {tools[0]['score']}, /status optimizer {status['optimizer']}")

    # Resident memory of the finder gateway's pod (gateway + code mode's spare script process).
    rss = k.kubectl(
        "-n", ns, "exec", "deployment/vmcp-finder", "--", "/opt/mcpfleet/bin/python", "-c", RSS_KIB
    ).stdout  # fmt: skip
    print(f"optimizer: finder gateway pod RSS {int(rss.strip()) / 1024:.0f} MiB")
    rss = k.kubectl(
        "-n", ns, "exec", "deployment/emb-wordllama", "--", "/opt/mcpfleet/bin/python", "-c", RSS_KIB
    ).stdout  # fmt: skip
    print(f"optimizer: WordLlama EmbeddingServer pod RSS {int(rss.strip()) / 1024:.0f} MiB")
