"""Talking to a running server or gateway the way a client does: the MCP SDK's `Client`.

Everything read here comes from a server and is untrusted: it is turned into plain data (strings,
numbers, parsed JSON) that the templates escape, never into markup. Every exchange is bounded in
time (`TIMEOUT_SECONDS`) and in what is kept (`MAX_ITEMS` per list, `MAX_TEXT` characters per text,
`MAX_IMAGE_BYTES` per image); an error is shown as the client got it (the JSON-RPC error's code and
message, or the transport's failure).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

TIMEOUT_SECONDS = 15.0
MAX_ITEMS = 500
MAX_TEXT = 20_000
MAX_IMAGE_BYTES = 2 * 1024 * 1024
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""Image types rendered as images (SVG is not: it can carry script); others are described as text."""


@dataclass(frozen=True)
class Tool:
    name: str
    title: str
    description: str
    schema: dict[str, Any]


@dataclass(frozen=True)
class Named:
    """A prompt or a resource: a name (or URI) and a description."""

    name: str
    description: str


@dataclass
class Lists:
    tools: list[Tool] = field(default_factory=list)
    prompts: list[Named] = field(default_factory=list)
    resources: list[Named] = field(default_factory=list)
    error: str = ""


def cut(text: Any, limit: int = MAX_TEXT) -> str:
    value = text if isinstance(text, str) else ("" if text is None else str(text))
    return value if len(value) <= limit else value[:limit] + "…"


def _tool(raw: Any) -> Tool:
    schema = getattr(raw, "input_schema", None) or getattr(raw, "inputSchema", None) or {}
    return Tool(
        name=cut(raw.name, 300),
        title=cut(getattr(raw, "title", None) or "", 300),
        description=cut(getattr(raw, "description", None) or ""),
        schema=schema if isinstance(schema, dict) else {},
    )


def describe_error(exc: BaseException) -> str:
    """The error as a client gets it: a JSON-RPC error's code and message, else the failure."""
    error = getattr(exc, "error", None)
    code = getattr(error, "code", None)
    message = getattr(error, "message", None)
    if code is not None:
        return cut(f"JSON-RPC error {code}: {message}", 2000)
    if isinstance(exc, TimeoutError):
        return f"no answer within {TIMEOUT_SECONDS:.0f} s"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe_error(e) for e in exc.exceptions[:3])
    return cut(f"{type(exc).__name__}: {exc}", 2000)


def _client(url: str) -> Any:
    from mcp.client.client import Client

    return Client(url, read_timeout_seconds=TIMEOUT_SECONDS)


async def read_lists(url: str) -> Lists:
    """Tools, prompts and resources of the endpoint at `url` (each list that fails is left empty)."""
    lists = Lists()
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS * 2):
            async with _client(url) as client:
                tools = await client.list_tools()
                lists.tools = [_tool(t) for t in tools.tools[:MAX_ITEMS]]
                for what in ("prompts", "resources"):
                    try:
                        answer = await getattr(client, f"list_{what}")()
                    except Exception:  # a server without prompts / resources answers an error
                        continue
                    items = getattr(answer, what)[:MAX_ITEMS]
                    named = [
                        Named(
                            cut(getattr(i, "name", None) or getattr(i, "uri", ""), 300),
                            cut(i.description or ""),
                        )
                        for i in items
                    ]
                    setattr(lists, what, named)
    except Exception as exc:
        lists.error = describe_error(exc)
    return lists


@dataclass(frozen=True)
class Part:
    """One piece of a tool result: kind `text`, `image` (a data: URL of a checked image), `json`."""

    kind: str
    text: str = ""
    data_url: str = ""
    mime: str = ""


@dataclass
class CallResult:
    parts: list[Part] = field(default_factory=list)
    is_error: bool = False
    error: str = ""
    structured: str = ""
    data: Any = None
    """The structured content as the server sent it (read by `found_tools`, never rendered)."""


@dataclass(frozen=True)
class FoundTool:
    """One tool of a `find_tool` answer (the optimizer's), as the find box lists it."""

    name: str
    description: str
    score: str


def found_tools(data: Any) -> list[FoundTool]:
    """The tools of a find_tool answer's structured content (`{"tools": [{name, description,
    score}, ...]}`), at most MAX_ITEMS; anything else gives none (the answer is then shown as text)."""
    tools = data.get("tools") if isinstance(data, dict) else None
    out: list[FoundTool] = []
    for tool in tools if isinstance(tools, list) else []:
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            continue
        score = tool.get("score")
        shown = f"{score:.2f}" if isinstance(score, int | float) and not isinstance(score, bool) else ""
        out.append(FoundTool(cut(tool["name"], 200), cut(tool.get("description") or "", 2000), shown))
        if len(out) >= MAX_ITEMS:
            break
    return out


def _image(data: Any, mime: Any) -> Part:
    mime_text = str(mime or "")
    if mime_text not in IMAGE_TYPES:
        return Part("text", text=f"[image of type {cut(mime_text, 100)!r}, not shown]")
    if not isinstance(data, str) or len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        return Part("text", text="[image larger than the console shows, not shown]")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return Part("text", text="[image that is not valid base64, not shown]")
    return Part("image", data_url=f"data:{mime_text};base64,{base64.b64encode(raw).decode()}", mime=mime_text)


def _part(content: Any) -> Part:
    kind = getattr(content, "type", "")
    if kind == "text":
        return Part("text", text=cut(getattr(content, "text", "")))
    if kind == "image":
        return _image(getattr(content, "data", None), getattr(content, "mime_type", None))
    if kind == "resource":
        resource = getattr(content, "resource", None)
        text = getattr(resource, "text", None)
        uri = getattr(resource, "uri", "")
        return Part(
            "text", text=cut(f"[resource {uri}]\n{text}" if text is not None else f"[resource {uri}]")
        )
    if kind == "resource_link":
        return Part("text", text=cut(f"[resource link {getattr(content, 'uri', '')}]"))
    return Part("text", text=f"[{cut(kind, 50)} content]")


async def call_tool(url: str, name: str, arguments: dict[str, Any]) -> CallResult:
    result = CallResult()
    try:
        async with asyncio.timeout(TIMEOUT_SECONDS * 2):
            async with _client(url) as client:
                answer = await client.call_tool(name, arguments)
    except Exception as exc:
        result.is_error = True
        result.error = describe_error(exc)
        return result
    result.is_error = bool(getattr(answer, "is_error", False))
    result.parts = [_part(c) for c in (answer.content or [])[:MAX_ITEMS]]
    structured = getattr(answer, "structured_content", None)
    if structured is not None:
        result.structured = cut(json.dumps(structured, indent=2, ensure_ascii=False, default=str))
        result.data = structured
    return result
