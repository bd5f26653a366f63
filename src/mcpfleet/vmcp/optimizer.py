"""The optimizer: `find_tool` and `call_tool`, over an index that follows the advertised tools.

Stateless by design, so it works the same for 2025-era sessions and the sessionless 2026-07-28
protocol: the index belongs to the gateway (one per protocol era, shared when both eras see the
same tools), not to a session, and `call_tool` is a normal tools/call of the named tool. The index
holds only what clients may see (after filters and overrides), and each search is filtered by the
caller's `visible` check, so a hidden or forbidden tool is never found.

Rebuilds run in a worker thread when the advertised tools change (a backend's list_changed, a
backend joining or leaving, a config edit); a search waits for a rebuild in progress, so a client
told `tools/list_changed` finds the new tools. With an embedding service, tool vectors are computed
after each rebuild in a task of their own (only for tools whose text is new: vectors are cached by
the tool's content fingerprint) and blended into the ranking once all are there. A search never
waits for them: until then, or when the service fails, ranking is keyword-only, and `/status`
(`optimizer.embeddings.state`) says `pending`, `ready` or `failed` with the cause.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcpfleet.api.duration import parse_duration
from mcpfleet.api.gatewayconfig import Optimizer
from mcpfleet.vmcp import wire
from mcpfleet.vmcp.embeddings import EmbeddingClient, EmbeddingError
from mcpfleet.vmcp.toolindex import Tokenizer, ToolIndex, document, embedding_text, query_terms
from mcpfleet.vmcp.wire import RPCError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

log = logging.getLogger(__name__)

FIND_TOOL = "find_tool"
CALL_TOOL = "call_tool"
META_TOOLS = frozenset({FIND_TOOL, CALL_TOOL})
MAX_QUERY_CHARS = 4096
MAX_KEYWORDS = 64
# Tool texts sent per embedding call: progress is kept between calls when a newer list cancels a run.
EMBED_CHUNK = 512
# Query vectors kept (agents repeat searches); each is one embedding service round trip saved.
QUERY_CACHE = 1024


def meta_tools(cfg: Optimizer) -> list[dict[str, Any]]:
    """find_tool and call_tool as advertised."""
    return [
        {
            "name": FIND_TOOL,
            "description": (
                "Find the tools for a task among every tool this gateway offers. Describe the task in "
                "natural language; optionally add keywords. Returns up to "
                f"{cfg.max_tools_to_return} tools, best first, with their input schemas; call one "
                "with call_tool."
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "tool_description": {
                        "type": "string",
                        "description": "What the tool should do, e.g. 'convert a temperature to Celsius'",
                        "maxLength": MAX_QUERY_CHARS,
                    },
                    "tool_keywords": {
                        "description": "Extra search words (a string or a list of strings)",
                        "anyOf": [
                            {"type": "string", "maxLength": MAX_QUERY_CHARS},
                            {"type": "array", "items": {"type": "string"}, "maxItems": MAX_KEYWORDS},
                        ],
                    },
                },
                "required": ["tool_description"],
            },
        },
        {
            "name": CALL_TOOL,
            "description": "Call a tool found with find_tool, by its name, with its arguments.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "tool_name": {"type": "string", "description": "The tool's name, as find_tool gave it"},
                    "parameters": {"type": "object", "description": "The tool's arguments"},
                },
                "required": ["tool_name"],
            },
        },
    ]


def _bad(field: str, problem: str) -> RPCError:
    return RPCError(wire.INVALID_PARAMS, f"{field}: {problem}")


def find_arguments(arguments: Any) -> tuple[str, list[str]]:
    """(description, keywords) of a find_tool call; RPCError naming the field otherwise."""
    if not isinstance(arguments, dict):
        raise _bad(f"{FIND_TOOL}: arguments", "must be an object")
    desc = arguments.get("tool_description")
    if not isinstance(desc, str) or not desc.strip():
        raise _bad(f"{FIND_TOOL}: arguments.tool_description", "must be a non-empty string")
    if len(desc) > MAX_QUERY_CHARS:
        raise _bad(f"{FIND_TOOL}: arguments.tool_description", f"longer than {MAX_QUERY_CHARS} characters")
    kw = arguments.get("tool_keywords")
    if kw is None:
        keywords: list[str] = []
    elif isinstance(kw, str):
        if len(kw) > MAX_QUERY_CHARS:
            raise _bad(f"{FIND_TOOL}: arguments.tool_keywords", f"longer than {MAX_QUERY_CHARS} characters")
        keywords = [kw]
    elif isinstance(kw, list) and all(isinstance(k, str) for k in kw):
        if len(kw) > MAX_KEYWORDS or sum(map(len, kw)) > MAX_QUERY_CHARS:
            raise _bad(
                f"{FIND_TOOL}: arguments.tool_keywords",
                f"more than {MAX_KEYWORDS} keywords or {MAX_QUERY_CHARS} characters",
            )
        keywords = kw
    else:
        raise _bad(f"{FIND_TOOL}: arguments.tool_keywords", "must be a string or a list of strings")
    unknown = sorted(set(arguments) - {"tool_description", "tool_keywords"})
    if unknown:
        raise _bad(f"{FIND_TOOL}: arguments.{unknown[0]}", "unknown argument")
    return desc, keywords


def call_arguments(arguments: Any) -> tuple[str, dict[str, Any]]:
    """(tool name, its arguments) of a call_tool call; RPCError naming the field otherwise."""
    if not isinstance(arguments, dict):
        raise _bad(f"{CALL_TOOL}: arguments", "must be an object")
    name = arguments.get("tool_name")
    if not isinstance(name, str) or not name:
        raise _bad(f"{CALL_TOOL}: arguments.tool_name", "must be a non-empty string")
    if name in META_TOOLS:
        raise _bad(f"{CALL_TOOL}: arguments.tool_name", f"{name!r} is a meta-tool; call it directly")
    params = arguments.get("parameters", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _bad(f"{CALL_TOOL}: arguments.parameters", "must be an object")
    unknown = sorted(set(arguments) - {"tool_name", "parameters"})
    if unknown:
        raise _bad(f"{CALL_TOOL}: arguments.{unknown[0]}", "unknown argument")
    return name, params


class ToolFinder:
    """The gateway's search side: indexes per era, rebuilt when the catalogue changes."""

    def __init__(self, cfg: Optimizer) -> None:
        self.cfg = cfg
        self.ratio = float(cfg.hybrid_search_semantic_ratio)
        self.max_distance = float(cfg.semantic_distance_threshold)
        self._tokenizer = Tokenizer()
        self._catalogues: dict[str, list[dict[str, Any]]] = {}
        self._indexes: dict[str, ToolIndex] = {}
        self._build: asyncio.Task[None] | None = None
        self._vectors: dict[bytes, NDArray[np.float32]] = {}
        self.embedder: EmbeddingClient | None = None
        if cfg.embedding_service:
            self.embedder = EmbeddingClient(
                cfg.embedding_service,
                cfg.embedding_provider,
                model=cfg.embedding_model,
                headers=cfg.embedding_headers,
                timeout=parse_duration(cfg.embedding_service_timeout),
            )
        self.last_build_seconds: float | None = None
        self._embedding: asyncio.Task[None] | None = None
        self._queries: dict[str, NDArray[np.float32]] = {}
        self.embedding_state = "pending"
        """pending (tool vectors being computed), ready (blended ranking) or failed (keyword-only)."""
        self.embedding_error: str | None = None
        self.last_query_error: str | None = None
        self.last_embed_seconds: float | None = None

    def status(self) -> dict[str, Any]:
        """What /status shows of the optimizer."""
        embeddings: dict[str, Any] | None = None
        if self.embedder is not None:
            embeddings = {
                "state": self.embedding_state,
                "cause": self.embedding_error,
                "model": self.embedder.served_model or self.embedder.model,
                "vectors": len(self._vectors),
                "lastEmbedSeconds": self.last_embed_seconds,
                "lastQueryError": self.last_query_error,
            }
        return {
            "indexedTools": {era: len(ix) for era, ix in self._indexes.items()},
            "lastBuildSeconds": self.last_build_seconds,
            "ranking": "hybrid" if self.embedding_state == "ready" and embeddings else "bm25",
            "embeddings": embeddings,
        }

    async def close(self) -> None:
        for task in (self._build, self._embedding):
            if task is not None:
                task.cancel()
        if self.embedder is not None:
            await self.embedder.close()

    async def embedded(self) -> None:
        """Wait for the tool vectors of the current indexes (tests and benchmarks; searches never wait)."""
        while True:
            build, task = self._build, self._embedding
            if build is not None and not build.done():
                await asyncio.wait({build})
                continue
            if task is None or task.done():
                return
            await asyncio.wait({task})

    def update(self, catalogues: dict[str, list[dict[str, Any]]]) -> None:
        """Take the tools each era now offers; rebuilds (in the background) only when they changed."""
        if catalogues == self._catalogues:
            return
        self._catalogues = {k: list(v) for k, v in catalogues.items()}
        previous = self._build
        self._build = asyncio.get_running_loop().create_task(self._rebuild(previous, self._catalogues))

    async def _rebuild(
        self, previous: asyncio.Task[None] | None, catalogues: dict[str, list[dict[str, Any]]]
    ) -> None:
        if previous is not None and not previous.done():
            # Builds share the tokenizer's cache: one at a time, the newest last.
            await asyncio.wait({previous})
        t0 = time.perf_counter()
        indexes: dict[str, ToolIndex] = {}
        built: list[tuple[list[dict[str, Any]], ToolIndex]] = []
        for era, tools in catalogues.items():
            same = next((ix for cat, ix in built if cat == tools), None)
            if same is None:
                same = await asyncio.to_thread(ToolIndex, tools, self._tokenizer)
                built.append((tools, same))
            indexes[era] = same
        self._tokenizer.retain({k for _, ix in built for k in ix.keys})
        self._indexes = indexes
        self.last_build_seconds = time.perf_counter() - t0
        log.info(
            "optimizer index rebuilt: %s tools in %.3fs",
            {e: len(i) for e, i in indexes.items()},
            self.last_build_seconds,
        )
        if self.embedder is not None:
            if self._embedding is not None:
                self._embedding.cancel()  # its finished chunks stay cached; this run skips them
            self.embedding_state = "pending"
            self._embedding = asyncio.get_running_loop().create_task(self._embed([ix for _, ix in built]))

    async def _embed(self, indexes: list[ToolIndex]) -> None:
        assert self.embedder is not None
        import numpy

        t0 = time.perf_counter()
        docs = {k: t for ix in indexes for k, t in zip(ix.keys, ix.tools, strict=True)}
        missing = [k for k in docs if k not in self._vectors]
        try:
            for start in range(0, len(missing), EMBED_CHUNK):
                chunk = missing[start : start + EMBED_CHUNK]
                vectors = await self.embedder.embed(
                    [embedding_text(" ".join(document(docs[k]))) for k in chunk]
                )
                for k, v in zip(chunk, vectors, strict=True):
                    self._vectors[k] = v
            if self._vectors and len({v.shape for v in self._vectors.values()}) > 1:
                # A service that changed models: vectors of two models do not compare; start over.
                self._vectors = {}
                raise EmbeddingError("embedding service changed dimensions; recomputing on the next change")
        except EmbeddingError as exc:
            self.embedding_state, self.embedding_error = "failed", str(exc)
            log.warning("optimizer: embeddings unavailable, ranking by keywords only: %s", exc)
            return
        self._vectors = {k: v for k, v in self._vectors.items() if k in docs}
        for ix in indexes:
            if ix.tools:
                ix.vectors = numpy.stack([self._vectors[k] for k in ix.keys])
        self._queries.clear()
        self.embedding_state, self.embedding_error = "ready", None
        self.last_embed_seconds = time.perf_counter() - t0
        log.info("optimizer: %d tool vectors ready in %.3fs", len(missing), self.last_embed_seconds)

    async def _query_vector(self, text: str) -> NDArray[np.float32] | None:
        """The query's embedding (cached), None when the service fails (this search is keyword-only)."""
        assert self.embedder is not None
        cached = self._queries.get(text)
        if cached is not None:
            return cached
        try:
            vector: NDArray[np.float32] = (await self.embedder.embed([text]))[0]
        except EmbeddingError as exc:
            self.last_query_error = str(exc)
            return None
        if len(self._queries) >= QUERY_CACHE:
            self._queries.pop(next(iter(self._queries)))
        self._queries[text] = vector
        return vector

    async def index(self, era: str) -> ToolIndex | None:
        """The current index of `era`, after any rebuild in progress."""
        build = self._build
        if build is not None and not build.done():
            await asyncio.shield(build)
        return self._indexes.get(era)

    async def find(self, arguments: Any, era: str, visible: Callable[[str], bool]) -> dict[str, Any]:
        """A find_tool result: the best tools the caller may see, with their schemas."""
        desc, keywords = find_arguments(arguments)
        index = await self.index(era)
        hits = []
        if index is not None and len(index):
            query_vector = None
            if self.embedder is not None and index.vectors is not None and self.ratio > 0:
                query_vector = await self._query_vector(embedding_text(" ".join([desc, *keywords])))
            hits = index.search(
                query_terms(desc, keywords),
                self.cfg.max_tools_to_return,
                visible,
                query_vector,
                self.ratio,
                self.max_distance,
            )
        tools = []
        for h in hits:
            t = index.tools_by_name[h.name] if index is not None else {}
            entry: dict[str, Any] = {
                k: t[k] for k in ("name", "title", "description", "inputSchema", "annotations") if k in t
            }
            entry["score"] = round(h.score, 4)
            tools.append(entry)
        found = {"tools": tools}
        return {
            "content": [{"type": "text", "text": wire.dumps(found).decode()}],
            "structuredContent": found,
            "isError": False,
        }
