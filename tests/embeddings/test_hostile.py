"""Hostile input to `mcpfleet embeddings serve` (a real process): a corpus of bad requests, each
refused with a 4xx naming the field (TEI's `{"error", "error_type"}`), and hypothesis-generated bodies
and inputs: never a 5xx, never a traceback, and the server still answers afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpfleet.vmcp.embedserver import MAX_BODY_BYTES, MAX_INPUT_CHARS, MAX_INPUTS

TRACEBACK = ("Traceback", 'File "', "Internal Server Error")

CORPUS: list[tuple[str, bytes, int, str]] = [
    ("/embed", b"", 422, "body"),
    ("/embed", b"{", 400, "body: not JSON"),
    ("/embed", b"[]", 422, "body"),
    ("/embed", b"{}", 422, "inputs"),
    ("/embed", b'{"inputs": 5}', 422, "inputs"),
    ("/embed", b'{"inputs": [1, 2]}', 422, "inputs[0]"),
    ("/embed", b'{"inputs": []}', 422, "inputs: must not be empty"),
    ("/embed", b'{"inputs": "x", "extra": 1}', 422, "extra"),
    ("/embed", b'{"inputs": "x", "normalize": "yes"}', 422, "normalize"),
    ("/embed", b'{"inputs": [[["deep"]]]}', 422, "inputs[0]"),
    ("/embed", orjson.dumps({"inputs": ["a"] * (MAX_INPUTS + 1)}), 413, f"more than {MAX_INPUTS}"),
    ("/embed", orjson.dumps({"inputs": ["ok", "a" * (MAX_INPUT_CHARS + 1)]}), 413, "inputs[1]: longer"),
    ("/embed", b'{"inputs": "' + b"a" * (MAX_BODY_BYTES + 10) + b'"}', 413, "larger than"),
    ("/v1/embeddings", b'{"model": "m"}', 422, "input"),
    ("/v1/embeddings", b'{"input": "x", "encoding_format": "base64"}', 422, "encoding_format"),
    ("/v1/embeddings", b'{"input": "x", "dimensions": 12}', 422, "dimensions: this model has 256"),
    ("/v1/embeddings", b'{"input": "x", "dimensions": -1}', 422, "dimensions"),
    ("/v1/embeddings", b'{"input": "x", "model": "' + b"m" * 300 + b'"}', 422, "model"),
    ("/v1/embeddings", orjson.dumps({"input": "a" * (MAX_INPUT_CHARS + 1)}), 413, "input: longer"),
    ("/v1/embeddings", b'{"input": "x", "user": {"a": 1}}', 422, "user"),
]


def _clean(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    assert not any(marker in response.text for marker in TRACEBACK), response.text


@pytest.mark.parametrize(("path", "body", "status", "field"), CORPUS, ids=range(len(CORPUS)))
def test_corpus_refused_naming_the_field(
    embed_server: str, path: str, body: bytes, status: int, field: str
) -> None:
    response = httpx.post(
        f"{embed_server}{path}", content=body, headers={"content-type": "application/json"}, timeout=30
    )
    _clean(response)
    assert response.status_code == status, response.text
    assert field in response.json()["error"], response.text
    assert httpx.get(f"{embed_server}/health").status_code == 200


def test_unicode_and_empty_text_embed(embed_server: str) -> None:
    """Text the tokenizer may make nothing of still gets a vector (zeros), not a NaN or an error."""
    texts = ["", " ", "\x00\ud7ff", "🙂" * 5000, "\u202e" * 100]
    answer = httpx.post(f"{embed_server}/embed", json={"inputs": texts}, timeout=30)
    assert answer.status_code == 200 and len(answer.json()) == len(texts)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "inputs": JSON | st.lists(st.text(max_size=200), max_size=20),
        "input": JSON | st.lists(st.text(max_size=200), max_size=20),
        "normalize": JSON,
        "truncate": JSON,
        "model": JSON,
        "dimensions": JSON,
        "encoding_format": JSON,
    },
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(["/embed", "/v1/embeddings", "/embeddings"]), body=FIELDS | JSON)
def test_generated_bodies_never_fail_the_server(embed_server: str, path: str, body: object) -> None:
    response = httpx.post(f"{embed_server}{path}", content=json.dumps(body), timeout=30)
    _clean(response)
    if response.status_code != 200:
        assert response.json()["error_type"] == "Validation"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=300))
def test_raw_bytes_never_fail_the_server(embed_server: str, raw: bytes) -> None:
    _clean(httpx.post(f"{embed_server}/embed", content=raw, timeout=30))
    assert httpx.get(f"{embed_server}/health").status_code == 200


def test_no_traceback_logged(embed_server: str, embed_server_log: Path) -> None:
    """Runs after the suites above (file order): nothing they sent made the server log a traceback."""
    assert httpx.get(f"{embed_server}/health").status_code == 200
    assert "Traceback" not in embed_server_log.read_text(errors="replace")
