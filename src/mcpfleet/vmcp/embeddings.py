"""Embedding clients of the optimizer: TEI (`POST /embed`) and OpenAI-compatible (`POST /embeddings`).

Vectors are returned unit-length as a float32 matrix, so cosine similarity is a dot product. Inputs
are sent in batches and cut to `MAX_INPUT_CHARS` (an OpenAI-compatible service refuses over-long
inputs rather than truncating them). The API key of an openai-provider service comes from the
OPENAI_API_KEY environment variable only, and never appears in a log or an error.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp
    import numpy as np
    from numpy.typing import NDArray

BATCH = 128
MAX_INPUT_CHARS = 4096
MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class EmbeddingError(Exception):
    """The embedding service failed or answered something that is not embeddings."""


class EmbeddingClient:
    def __init__(
        self,
        base_url: str,
        provider: str,
        *,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self.model = model
        self.timeout = timeout
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        key = os.environ.get("OPENAI_API_KEY", "") if provider == "openai" else ""
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._session = session
        self._own = session is None
        self.served_model: str | None = None
        """The model the service says it ran (an OpenAI answer's `model`, TEI's /info `model_id`)."""

    async def close(self) -> None:
        if self._own and self._session is not None:
            await self._session.close()
            self._session = None

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Unit-length embeddings of `texts`, one row each."""
        import numpy

        rows: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            rows.extend(await self._batch([t[:MAX_INPUT_CHARS] or " " for t in texts[start : start + BATCH]]))
        if not rows:
            return numpy.zeros((0, 0), dtype=numpy.float32)
        m = numpy.asarray(rows, dtype=numpy.float32)
        norms = numpy.linalg.norm(m, axis=1, keepdims=True)
        unit: NDArray[np.float32] = (m / numpy.where(norms == 0, 1.0, norms)).astype(numpy.float32)
        return unit

    async def _batch(self, texts: list[str]) -> list[list[float]]:
        import aiohttp  # only with an embedding service: not part of a gateway's start

        if self._session is None:
            self._session = aiohttp.ClientSession()
        body: dict[str, Any]
        if self.provider == "openai":
            url, body = f"{self.base_url}/embeddings", {"input": texts, "model": self.model}
        else:
            url, body = f"{self.base_url}/embed", {"inputs": texts, "truncate": True}
        try:
            async with self._session.post(
                url, json=body, headers=self._headers, timeout=aiohttp.ClientTimeout(total=self.timeout)
            ) as resp:
                raw = bytearray()
                async for chunk in resp.content.iter_chunked(65_536):
                    raw += chunk
                    if len(raw) > MAX_RESPONSE_BYTES:
                        break
                if resp.status != 200:
                    raise EmbeddingError(f"embedding service answered HTTP {resp.status}")
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise EmbeddingError(f"embedding service unreachable: {type(exc).__name__}") from exc
        if len(raw) > MAX_RESPONSE_BYTES:
            raise EmbeddingError("embedding service answer too large")
        import orjson

        try:
            data: Any = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise EmbeddingError("embedding service answered invalid JSON") from exc
        if isinstance(data, dict) and isinstance(data.get("model"), str):
            self.served_model = data["model"][:256]
        elif self.provider == "tei" and self.served_model is None:
            await self._tei_info()
        vectors = _vectors(data, self.provider)
        if len(vectors) != len(texts):
            raise EmbeddingError(f"embedding service returned {len(vectors)} vectors for {len(texts)} inputs")
        return vectors

    async def _tei_info(self) -> None:
        """`served_model` from TEI's GET /info, best effort (its absence changes nothing else)."""
        import aiohttp
        import orjson

        assert self._session is not None
        try:
            async with self._session.get(
                f"{self.base_url}/info",
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            ) as resp:
                raw = await resp.content.read(65_536)
            info = orjson.loads(raw) if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
            return
        if isinstance(info, dict) and isinstance(info.get("model_id"), str):
            self.served_model = info["model_id"][:256]


def _vectors(data: Any, provider: str) -> list[list[float]]:
    """The vectors of an answer, in input order; raises EmbeddingError on any other shape."""
    if provider == "openai":
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise EmbeddingError("openai answer has no data list")
        items = sorted(items, key=lambda x: x.get("index", 0) if isinstance(x, dict) else 0)
        data = [x.get("embedding") if isinstance(x, dict) else None for x in items]
    if not isinstance(data, list) or not all(
        isinstance(v, list) and v and all(isinstance(f, int | float) for f in v) for v in data
    ):
        raise EmbeddingError("embedding answer is not a list of number vectors")
    return data
