"""`mcpfleet embeddings serve`: a bundled embedding model (`embedmodel`) over TEI's and OpenAI's APIs.

TEI (HuggingFace Text Embeddings Inference): `POST /embed {"inputs": str | [str], "normalize"?,
"truncate"?}` -> `[[float]]`, `GET /info` (`model_id`, limits), `GET /health`. OpenAI: `POST
/v1/embeddings` (also `/embeddings`) `{"input": str | [str], "model"?, "encoding_format"?,
"dimensions"?}` -> `{"data": [{"embedding", "index"}], "model", "usage"}`. What the gateway's
optimizer speaks with `embeddingProvider: tei` or `openai`.

Hostile input is bounded before any work: the body size (`BodyLimits`, 413), the number of inputs
(`MAX_INPUTS`) and each input's length (`MAX_INPUT_CHARS`), the JSON shape (pydantic, unknown fields
refused); every refusal is a 4xx `{"error": "<field>: <problem>", "error_type": "Validation"}`, TEI's
error shape. Embedding runs in a worker thread, `MAX_CONCURRENT` requests at a time, so the event loop
keeps answering `/health`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from mcpfleet.vmcp.embedmodel import MAX_TOKENS, Embedder

MAX_INPUTS = 512
MAX_INPUT_CHARS = 16_384
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_CONCURRENT = 2


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


Inputs = str | list[str]


class TEIRequest(_Strict):
    inputs: Inputs
    normalize: bool = True
    truncate: bool | None = None
    truncation_direction: Literal["Left", "Right", "left", "right"] | None = None
    prompt_name: str | None = Field(default=None, max_length=256)


class OpenAIRequest(_Strict):
    input: Inputs
    model: str | None = Field(default=None, max_length=256)
    """Any name is accepted (clients send their own); the answer names the model that ran."""
    encoding_format: Literal["float"] | None = None
    dimensions: int | None = Field(default=None, ge=1, le=4096)
    user: str | None = Field(default=None, max_length=256)


class InputError(ValueError):
    """A request whose inputs break a bound (413) or make no sense (422); the message names the field."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def _texts(value: Inputs, field: str) -> list[str]:
    texts = [value] if isinstance(value, str) else value
    if not texts:
        raise InputError(f"{field}: must not be empty")
    if len(texts) > MAX_INPUTS:
        raise InputError(f"{field}: more than {MAX_INPUTS} inputs", 413)
    for i, t in enumerate(texts):
        where = field if isinstance(value, str) else f"{field}[{i}]"
        if len(t) > MAX_INPUT_CHARS:
            raise InputError(f"{where}: longer than {MAX_INPUT_CHARS} characters", 413)
    return texts


def refusal(status: int, message: str) -> tuple[bytes, bytes]:
    """`BodyLimits`' refusals (413 body too large, 408 too slow) in TEI's error shape."""
    import orjson

    return b"application/json", orjson.dumps({"error": message, "error_type": "Validation"})


def _json(value: Any, status: int = 200) -> Response:
    import orjson

    return Response(orjson.dumps(value), status_code=status, media_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json({"error": message, "error_type": "Validation"}, status)


def _field(loc: tuple[Any, ...]) -> str:
    # A union's member types ("str", "list[str]") are in pydantic's loc, not in the request.
    parts = [str(p) for p in loc if p not in ("body", "str", "list[str]")]
    path = ""
    for p in parts:
        path += f"[{p}]" if p.isdigit() else (f".{p}" if path else p)
    return path or "body"


def create_app(embedder: Embedder) -> FastAPI:
    """The ASGI app serving `embedder` (wrap it in `BodyLimits` to bound the body size)."""
    app = FastAPI(title="mcpfleet embeddings", docs_url=None, redoc_url=None, openapi_url=None)
    slots = asyncio.Semaphore(MAX_CONCURRENT)
    model_id = embedder.model.model_id

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        # The deepest error is the most precise one (`inputs[1]` rather than the union's `inputs`).
        errors = list(exc.errors()) or [{"loc": (), "msg": "invalid request"}]
        first = max(errors, key=lambda e: len(e.get("loc", ())))
        msg = str(first.get("msg", "invalid"))
        if first.get("type") == "json_invalid":
            return _error(400, f"body: not JSON ({msg})")
        return _error(422, f"{_field(tuple(first.get('loc', ())))}: {msg}")

    @app.exception_handler(InputError)
    async def too_much(_: Request, exc: InputError) -> Response:
        return _error(exc.status, str(exc))

    async def run(texts: list[str]) -> Any:
        async with slots:
            return await asyncio.to_thread(embedder.embed, texts)

    @app.post("/embed")
    async def tei(req: TEIRequest) -> Response:
        texts = _texts(req.inputs, "inputs")
        vectors = await run(texts)
        return _json(vectors.tolist())

    async def openai(req: OpenAIRequest) -> Response:
        texts = _texts(req.input, "input")
        if req.dimensions is not None and req.dimensions != embedder.dimensions:
            raise InputError(f"dimensions: this model has {embedder.dimensions}")
        vectors = await run(texts)
        tokens = await asyncio.to_thread(embedder.count_tokens, texts)
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors.tolist())]
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return _json({"object": "list", "data": data, "model": model_id, "usage": usage})

    app.post("/v1/embeddings")(openai)
    app.post("/embeddings")(openai)

    @app.get("/info")
    async def info() -> dict[str, Any]:
        return {
            "model_id": model_id,
            "model_sha": None,
            "model_dtype": "float32",
            "model_type": {"embedding": {"pooling": "mean"}},
            "dimensions": embedder.dimensions,
            "max_concurrent_requests": MAX_CONCURRENT,
            "max_input_length": MAX_TOKENS,
            "max_client_batch_size": MAX_INPUTS,
            "max_input_chars": MAX_INPUT_CHARS,
            "max_body_bytes": MAX_BODY_BYTES,
            "version": "mcpfleet",
        }

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app
