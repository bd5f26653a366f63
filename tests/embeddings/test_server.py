"""`mcpfleet embeddings serve` with its real bundled model (WordLlama l2_supercat, from the installed
`wordllama` wheel): TEI's /embed, /info, /health and OpenAI's /v1/embeddings, vectors unit-length and
the same through both APIs and in any batch, meaning reflected in the ranking, an unknown model
refused at start naming --model."""

from __future__ import annotations

import subprocess
import sys

import httpx
import numpy as np

from mcpfleet.vmcp.embedmodel import DEFAULT_MODEL


def test_tei_api(embed_server: str) -> None:
    info = httpx.get(f"{embed_server}/info").json()
    assert info["model_id"] == DEFAULT_MODEL == "dleemiller/word-llama-l2-supercat"
    assert info["max_client_batch_size"] >= 128  # the gateway's batch
    assert httpx.get(f"{embed_server}/health").status_code == 200
    one = httpx.post(f"{embed_server}/embed", json={"inputs": "get the current time"}).json()
    many = httpx.post(
        f"{embed_server}/embed", json={"inputs": ["get the current time", "convert a temperature"]}
    ).json()
    assert len(one) == 1 and len(many) == 2 and len(one[0]) == info["dimensions"] == 256
    assert np.allclose(one[0], many[0], atol=1e-6)
    assert abs(np.linalg.norm(many[1]) - 1.0) < 1e-4


def test_openai_api_matches_tei(embed_server: str) -> None:
    texts = ["weather forecast for a city", "send an email to a colleague"]
    answer = httpx.post(f"{embed_server}/v1/embeddings", json={"input": texts, "model": "anything"}).json()
    assert answer["object"] == "list" and answer["model"] == DEFAULT_MODEL
    assert [d["index"] for d in answer["data"]] == [0, 1]
    assert answer["usage"]["prompt_tokens"] > 0
    tei = httpx.post(f"{embed_server}/embed", json={"inputs": texts}).json()
    assert np.allclose([d["embedding"] for d in answer["data"]], tei, atol=1e-6)


def test_similar_meaning_ranks_first(embed_server: str) -> None:
    """A real model, not hashed words: the nearest tool shares meaning with the query, not words."""
    tools = [
        "Return the weather forecast (temperature, rain) for a location",
        "Send an email message to a recipient",
        "Compute the square root of a number",
    ]
    queries = [
        "will it be sunny in Paris tomorrow",
        "mail my colleague the report",
        "math function of a value",
    ]
    vectors = np.array(httpx.post(f"{embed_server}/embed", json={"inputs": tools + queries}).json())
    similarity = vectors[3:] @ vectors[:3].T
    assert list(similarity.argmax(axis=1)) == [0, 1, 2], similarity


def test_unknown_model_is_refused_naming_the_flag() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mcpfleet.cli.main", "embeddings", "serve", "--port", "1", "--model", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.startswith("--model: unknown model 'nope'"), done.stderr
