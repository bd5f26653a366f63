"""A small deterministic embeddings service: feature hashing served over the OpenAI and TEI APIs.

No model, no download: each text becomes the signed hashed counts of its stemmed words and word
bigrams (the "hashing trick"), L2-normalized. It is what the optimizer's hybrid ranking is tested
and benchmarked against, and a usable embedding endpoint where no model server can run. It speaks
`POST /v1/embeddings` (OpenAI: `{"input": str | [str], "model"}` -> `{"data": [{"embedding",
"index"}]}`) and `POST /embed` (TEI: `{"inputs": str | [str]}` -> `[[float]]`).

Run: `python -m mcpfleet.vmcp.hashembed --port 8089 [--dimensions 512]`.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import math
from typing import Any

from fastapi import Body, FastAPI, HTTPException
from pydantic import BaseModel, Field

from mcpfleet.vmcp.toolindex import STOPWORDS, words

MAX_INPUTS = 2048
MAX_CHARS = 32_768


def _bucket(feature: str, dims: int) -> tuple[int, float]:
    h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return h % dims, (1.0 if (h >> 63) & 1 else -1.0)


def embed(text: str, dims: int) -> list[float]:
    """The unit-length hashed feature vector of `text` (all zeros for a text without words)."""
    import Stemmer

    stem = Stemmer.Stemmer("english").stemWords
    ws = [w for w in stem(words(text[:MAX_CHARS])) if w not in STOPWORDS]
    vec = [0.0] * dims
    feats = ws + [f"{a} {b}" for a, b in itertools.pairwise(ws)]
    for f in feats:
        i, sign = _bucket(f, dims)
        vec[i] += sign * (0.5 if " " in f else 1.0)
    norm = math.sqrt(sum(v * v for v in vec))
    return [v / norm for v in vec] if norm else vec


class OpenAIRequest(BaseModel):
    input: str | list[str] = Field(max_length=MAX_INPUTS)
    model: str = Field(default="hash-embedding", max_length=256)
    encoding_format: str | None = None


class TEIRequest(BaseModel):
    inputs: str | list[str] = Field(max_length=MAX_INPUTS)
    truncate: bool | None = None
    normalize: bool | None = None


def create_app(dimensions: int = 512) -> FastAPI:
    app = FastAPI(title="mcpfleet hash embeddings")

    def inputs(value: str | list[str]) -> list[str]:
        texts = [value] if isinstance(value, str) else value
        for i, t in enumerate(texts):
            if len(t) > MAX_CHARS:
                raise HTTPException(413, f"input[{i}]: longer than {MAX_CHARS} characters")
        return texts

    @app.post("/v1/embeddings")
    @app.post("/embeddings")
    async def openai(req: OpenAIRequest = Body(...)) -> dict[str, Any]:
        texts = inputs(req.input)
        data = [
            {"object": "embedding", "index": i, "embedding": embed(t, dimensions)}
            for i, t in enumerate(texts)
        ]
        tokens = sum(len(t.split()) for t in texts)
        return {
            "object": "list",
            "data": data,
            "model": req.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    @app.post("/embed")
    async def tei(req: TEIRequest = Body(...)) -> list[list[float]]:
        return [embed(t, dimensions) for t in inputs(req.inputs)]

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    parser.add_argument("--dimensions", type=int, default=512)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(create_app(args.dimensions), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
