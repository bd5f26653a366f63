"""Hybrid ranking in `ToolIndex.search` with the real model's vectors: the blend scores (each part scaled
by its best), the fast path (only the best few sorted) agreeing with a full sort, a `visible` filter
hiding most tools still answering `limit` tools, and the text that is embedded (stopwords dropped)."""

from __future__ import annotations

import numpy as np

from mcpfleet.vmcp import embedmodel
from mcpfleet.vmcp.toolindex import ToolIndex, document, embedding_text, query_terms

WORDS = "weather email calendar invoice stock image translate music flight recipe".split()


def _index() -> ToolIndex:
    tools = [
        {
            "name": f"tool_{i}",
            "description": f"{WORDS[i % 10]} helper number {i} for {WORDS[(i * 7) % 10]} tasks",
        }
        for i in range(600)
    ]
    tools.append({"name": "forecast", "description": "Tells whether it will rain or be sunny tomorrow"})
    index = ToolIndex(tools)
    index.vectors = embedmodel.load().embed([" ".join(document(t)) for t in tools])
    return index


def test_meaning_wins_where_words_do_not_match() -> None:
    index = _index()
    query = "do I need an umbrella in Paris tonight"
    vector = embedmodel.load().embed([query])[0]
    hybrid = index.search(query_terms(query), 5, None, vector, 0.6)
    assert hybrid[0].name == "forecast", hybrid
    assert all(0 < h.score <= 1 for h in hybrid)


def test_fast_path_equals_full_sort_and_respects_visible() -> None:
    index = _index()
    query = "translate an invoice"
    vector = embedmodel.load().embed([query])[0]
    hits = index.search(query_terms(query), 8, None, vector, 0.5)
    lexical = index.bm25(query_terms(query))
    cosine = np.clip(index.vectors @ vector, 0, 1)
    blended = 0.5 * lexical / lexical.max() + 0.5 * cosine / cosine.max()
    expected = [index.names[i] for i in np.argsort(-blended, kind="stable")[:8]]
    assert [h.name for h in hits] == expected
    # Only every 50th tool visible: more than the fast path's head is hidden, the answer is still full.
    visible = {f"tool_{i}" for i in range(0, 600, 50)}
    hits = index.search(query_terms(query), 8, visible.__contains__, vector, 0.5)
    assert len(hits) == 8 and all(h.name in visible for h in hits)


def test_the_best_cosine_weighs_the_full_ratio() -> None:
    # No query word is in any tool: the ranking is the cosine's, scaled so the closest tool scores
    # exactly the ratio (unscaled, a static model's best cosine is far below 1 and the ratio lied).
    index = _index()
    query = "umbrella"
    vector = embedmodel.load().embed([query])[0]
    hits = index.search(query_terms(query), 3, None, vector, 0.6)
    assert not index.bm25(query_terms(query)).any()
    assert abs(hits[0].score - 0.6) < 1e-6 and all(h.score < 0.6 for h in hits[1:]), hits


def test_embedded_text_drops_stopwords_and_splits_identifiers() -> None:
    assert embedding_text("What is the current time in Tokyo?") == "current time tokyo"
    assert embedding_text("get_current_time getWeatherForecast") == "get current time get weather forecast"
    # Only stopwords: all kept (an empty text would embed to nothing).
    assert embedding_text("what is it") == "what is it"
    assert embedding_text("") == ""
