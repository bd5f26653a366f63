"""Ranking ideas for the optimizer's hybrid search, compared in-process on BFCL and MetaTool.

Owns the "how the change was chosen" table of docs/bench-optimizer.md: the same data as
bench/optimizer.py (BFCL v4 simple_python + multiple from PyPI `bfcl-eval`, MetaTool vendored in
bench/data/metatool), the gateway's own `ToolIndex` for BM25 and the bundled WordLlama model loaded
directly (no HTTP, no gateway), so each idea costs a matrix product rather than 1,600 round trips.
BFCL decides; MetaTool only checks that a change does not lose there.

Run: `.venv/bin/python -P bench/optimizer_ideas.py` (prints a Markdown table: recall@1 / recall@5).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).parent))

from optimizer import load_bfcl, load_metatool  # bench/ is not a package

from mcpfleet.vmcp import embedmodel
from mcpfleet.vmcp.toolindex import ToolIndex, document, embedding_text, query_terms

Matrix = NDArray[np.float32]


class DataSet:
    """One set's BM25 scores (question x tool), gold tool per question, and embeddings on demand."""

    def __init__(self, tools: list[dict[str, Any]], questions: list[tuple[str, str]]) -> None:
        self.index = ToolIndex(tools)
        self.questions = [q for q, _ in questions]
        self.gold = np.array([self.index.names.index(g) for _, g in questions])
        self.bm25 = np.stack([self.index.bm25(query_terms(q)) for q in self.questions])
        self._model = embedmodel.load()

    def cosine(self, question: Callable[[str], str], tool: Callable[[dict[str, Any]], str]) -> Matrix:
        queries = self._model.embed([question(q) for q in self.questions])
        tools = self._model.embed([tool(t) for t in self.index.tools])
        product: Matrix = queries @ tools.T
        return product

    def recall(self, scores: Matrix) -> tuple[float, float]:
        top = np.argsort(-scores, axis=1, kind="stable")[:, :5]
        return float((top[:, 0] == self.gold).mean()), float((top == self.gold[:, None]).any(axis=1).mean())


def blend(bm25: Matrix, cosine: Matrix, ratio: float, scale: str) -> Matrix:
    """(1 - ratio) * BM25 / best BM25 + ratio * the cosine as `scale` says (per question)."""
    best = bm25.max(axis=1, keepdims=True)
    lexical = bm25 / np.where(best > 0, best, 1)
    clipped = np.clip(cosine, 0, 1)
    if scale == "none":
        semantic = clipped
    elif scale == "best":
        semantic = clipped / np.maximum(clipped.max(axis=1, keepdims=True), 1e-6)
    elif scale == "minmax":
        low, high = cosine.min(axis=1, keepdims=True), cosine.max(axis=1, keepdims=True)
        semantic = (cosine - low) / np.maximum(high - low, 1e-6)
    else:  # z-score, then scaled by its best
        z = (cosine - cosine.mean(axis=1, keepdims=True)) / (cosine.std(axis=1, keepdims=True) + 1e-6)
        semantic = z / np.maximum(z.max(axis=1, keepdims=True), 1e-6)
    mixed: Matrix = (1 - ratio) * lexical + ratio * semantic
    return mixed


def rrf(bm25: Matrix, cosine: Matrix, k: int, weight: float) -> Matrix:
    """Reciprocal-rank fusion: 1 / (k + BM25 rank) + weight / (k + cosine rank)."""
    ranks = [np.argsort(np.argsort(-m, axis=1, kind="stable"), axis=1) for m in (bm25, cosine)]
    fused: Matrix = 1 / (k + ranks[0]) + weight / (k + ranks[1])
    return fused


def weighted(cosines: list[Matrix], weights: tuple[float, ...]) -> Matrix:
    """The weighted mean of per-field cosines."""
    total: Matrix = sum((w * c for w, c in zip(weights, cosines, strict=True)), np.zeros_like(cosines[0]))
    mean: Matrix = total / sum(weights)
    return mean


def full_text(tool: dict[str, Any]) -> str:
    return " ".join(document(tool))


def stopword_free(tool: dict[str, Any]) -> str:
    return embedding_text(full_text(tool))


def main() -> None:
    sets = {"BFCL": DataSet(*load_bfcl()), "MetaTool": DataSet(*load_metatool())}
    before = {n: s.cosine(lambda q: q, full_text) for n, s in sets.items()}
    kept = {n: s.cosine(embedding_text, stopword_free) for n, s in sets.items()}
    fields = {
        n: [s.cosine(lambda q: q, lambda t, i=i: document(t)[i] or " ") for i in range(3)]
        for n, s in sets.items()
    }
    named = {
        (n, rep): s.cosine(
            embedding_text,
            lambda t, rep=rep: embedding_text(" ".join([document(t)[0]] * rep + list(document(t)[1:]))),
        )
        for n, s in sets.items()
        for rep in (2, 3)
    }
    ideas: list[tuple[str, Callable[[str], Matrix]]] = [
        ("BM25 alone", lambda n: sets[n].bm25),
        ("before: full text, cosine unscaled, r 0.6", lambda n: blend(sets[n].bm25, before[n], 0.6, "none")),
        ("stopwords dropped, r 0.6", lambda n: blend(sets[n].bm25, kept[n], 0.6, "none")),
        ("cosine scaled by the best, r 0.6", lambda n: blend(sets[n].bm25, before[n], 0.6, "best")),
        ("cosine min-max, r 0.6", lambda n: blend(sets[n].bm25, before[n], 0.6, "minmax")),
        ("cosine z-scored, r 0.6", lambda n: blend(sets[n].bm25, before[n], 0.6, "z")),
        *[
            (f"RRF k {k}, weight {w}", lambda n, k=k, w=w: rrf(sets[n].bm25, before[n], k, w))
            for k in (10, 60)
            for w in (0.5, 1.0)
        ],
        *[
            (
                f"fields separately {w}, r 0.6",
                lambda n, w=w: blend(sets[n].bm25, weighted(fields[n], w), 0.6, "none"),
            )
            for w in ((1, 1, 0.5), (0.5, 1, 0.5), (1, 1, 0))
        ],
        *[
            (
                f"kept + name x{rep}, r 0.6",
                lambda n, rep=rep: blend(sets[n].bm25, named[(n, rep)], 0.6, "best"),
            )
            for rep in (2, 3)
        ],
        *[
            (
                f"kept: stopwords dropped + scaled by the best, r {r}",
                lambda n, r=r: blend(sets[n].bm25, kept[n], r, "best"),
            )
            for r in (0.4, 0.5, 0.6)
        ],
    ]
    print("| idea | BFCL recall@1 / @5 | MetaTool recall@1 / @5 |\n|---|---|---|")
    for label, scores in ideas:
        cells = [sets[n].recall(scores(n)) for n in sets]
        print(f"| {label} | " + " | ".join(f"{r1:.3f} / {r5:.3f}" for r1, r5 in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
