"""The optimizer's ranking: BM25 over tool names, descriptions and parameters, optionally blended with
embeddings.

BM25 is `bm25s` (sparse term-score matrices in numpy): a query over 10,000 tools takes about 0.2 ms,
where SQLite FTS5's `bm25()` took 27 ms on the same catalogue because it scores every row matching
any query word (docs/benchmarks.md). Identifiers are split before indexing (`get_current_time`,
`getCurrentTime` -> `get current time`), words are Snowball-stemmed (PyStemmer), and a tool's name
words count `NAME_WEIGHT` times, its parameter names and descriptions once, like its description.

An index is immutable once built: the gateway builds a new one when the advertised tools change and
swaps it in, so a search never sees a half-built index. Tokenized documents are cached by content,
so a rebuild after one backend's list changed re-tokenizes only that backend's new tools.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

# How many times the words of a tool's name count against its description's (BM25 term frequency).
NAME_WEIGHT = 3
# Common English words carry no signal for picking a tool and make every query match every tool.
STOPWORDS = frozenset(
    """a an and are as at be by can could do does for from given how i in is it its me my of on or
    please should some that the their them then there these this to us want we what when which
    will with would you your""".split()
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# Bounds on what one tool contributes (a schema can be large; the first properties carry the meaning).
MAX_PARAMS = 64
MAX_FIELD_CHARS = 8192


def words(text: str) -> list[str]:
    """Lower-case words of `text`, identifiers split at `_`, `-`, `.` and camelCase boundaries."""
    return [w.lower() for w in _WORD.findall(_CAMEL.sub(" ", text))]


def _param_text(schema: Any, depth: int = 0) -> list[str]:
    """Names, titles, descriptions and enum values of a JSON Schema's properties (one nested level)."""
    out: list[str] = []
    if not isinstance(schema, dict) or depth > 1:
        return out
    props = schema.get("properties")
    if not isinstance(props, dict):
        return out
    for name, prop in list(props.items())[:MAX_PARAMS]:
        out.append(str(name))
        if isinstance(prop, dict):
            for key in ("title", "description"):
                if isinstance(prop.get(key), str):
                    out.append(prop[key])
            enum = prop.get("enum")
            if isinstance(enum, list):
                out.extend(str(e) for e in enum[:20])
            out.extend(_param_text(prop, depth + 1))
            out.extend(_param_text(prop.get("items"), depth + 1))
    return out


def document(tool: dict[str, Any]) -> tuple[str, str, str]:
    """The (name, description, parameters) text of one tool as indexed."""
    annotations = tool.get("annotations")
    title = tool.get("title") or (annotations.get("title") if isinstance(annotations, dict) else None)
    desc = f"{title or ''} {tool.get('description') or ''}"
    return (
        str(tool.get("name", "")),
        desc[:MAX_FIELD_CHARS],
        " ".join(_param_text(tool.get("inputSchema")))[:MAX_FIELD_CHARS],
    )


def embedding_text(text: str) -> str:
    """What is embedded of a tool's document or a query: its words, identifiers split, stopwords
    dropped (all kept if only stopwords).

    The bundled model's vector is the mean of its tokens' rows, so every "the" and "of" pulls a text
    towards all others; dropping them raised hybrid recall@1 on both benchmark sets
    (docs/bench-optimizer.md).
    """
    ws = words(text)
    return " ".join([w for w in ws if w not in STOPWORDS] or ws)


def query_terms(description: str, keywords: Iterable[str] = ()) -> list[str]:
    """Search words of a find_tool request, stopwords dropped (all kept if only stopwords).

    Repeated words stay repeated: BM25 then weighs a word the caller stressed (e.g. also given as a
    keyword) more.
    """
    ws = words(description) + [w for k in keywords for w in words(k)]
    terms = [w for w in ws if w not in STOPWORDS]
    return terms or ws


def fingerprint(tool: dict[str, Any]) -> bytes:
    """A cheap key of what a tool's indexed text derives from (its name, description, title, schema)."""
    import orjson

    return orjson.dumps(
        [
            tool.get("name"),
            tool.get("title"),
            tool.get("description"),
            tool.get("annotations"),
            tool.get("inputSchema"),
        ],
        option=orjson.OPT_SORT_KEYS,
    )


class Tokenizer:
    """Words -> stemmed term ids, with a cache of tool documents keyed by their `fingerprint`.

    The vocabulary is shared by every index built with this tokenizer, so a rebuild reuses the
    term ids of unchanged tools and only tokenizes new ones; `retain` bounds both to the catalogue.
    """

    def __init__(self) -> None:
        import Stemmer  # PyStemmer: imported only when an optimizer is configured

        self._stem = Stemmer.Stemmer("english").stemWords
        self.vocab: dict[str, int] = {}
        self._docs: dict[bytes, list[int]] = {}

    def terms(self, ws: list[str]) -> list[str]:
        return list(self._stem(ws))

    def ids(self, tool: dict[str, Any], key: bytes | None = None) -> list[int]:
        """The term ids of one tool's document (name words `NAME_WEIGHT` times, description, parameters)."""
        key = key if key is not None else fingerprint(tool)
        cached = self._docs.get(key)
        if cached is None:
            name, desc, params = document(tool)
            terms = self.terms(words(name) * NAME_WEIGHT + words(desc) + words(params))
            vocab = self.vocab
            cached = [vocab.setdefault(t, len(vocab)) for t in terms]
            self._docs[key] = cached
        return cached

    def retain(self, keys: set[bytes]) -> None:
        """Forget documents no longer in the catalogue; start the vocabulary afresh when most of it is
        stale (a backend renaming tools in a loop must not grow it without bound)."""
        self._docs = {k: v for k, v in self._docs.items() if k in keys}
        live = {i for v in self._docs.values() for i in v}
        if len(self.vocab) > 2 * len(live) + 10_000:
            self.vocab = {}
            self._docs = {}


@dataclass(frozen=True)
class Hit:
    name: str
    score: float
    """Relevance: the BM25 score, or the blended score in hybrid mode (higher is better)."""


class ToolIndex:
    """BM25 index of one tool list, plus optional embedding vectors of the same tools."""

    def __init__(self, tools: Sequence[dict[str, Any]], tokenizer: Tokenizer | None = None) -> None:
        import bm25s
        import numpy

        self._np = numpy
        self.tokenizer = tokenizer or Tokenizer()
        self.tools = list(tools)
        self.names = [str(t.get("name", "")) for t in self.tools]
        self.tools_by_name = dict(zip(self.names, self.tools, strict=True))
        self.keys = [fingerprint(t) for t in self.tools]
        ids = [self.tokenizer.ids(t, k) for t, k in zip(self.tools, self.keys, strict=True)]
        # A snapshot: the tokenizer's vocabulary keeps growing for later indexes.
        self._vocab = dict(self.tokenizer.vocab)
        self._bm25 = bm25s.BM25()
        if self.tools:
            self._bm25.index(bm25s.tokenization.Tokenized(ids=ids, vocab=self._vocab), show_progress=False)
        self.vectors: NDArray[np.float32] | None = None
        """Unit-length embedding of each tool (row i is tool i), once computed."""

    def __len__(self) -> int:
        return len(self.names)

    def bm25(self, terms: Sequence[str]) -> NDArray[np.float32]:
        """The BM25 score of every tool for `terms` (already words, not yet stemmed)."""
        xp = self._np
        qids = [self._vocab[t] for t in self.tokenizer.terms(list(terms)) if t in self._vocab]
        scores: NDArray[np.float32]
        if not qids or not self.tools:
            scores = xp.zeros(len(self.tools), dtype=xp.float32)
        else:
            scores = xp.asarray(self._bm25.get_scores(qids), dtype=xp.float32)
        return scores

    def search(
        self,
        terms: Sequence[str],
        limit: int,
        visible: Callable[[str], bool] | None = None,
        query_vector: NDArray[np.float32] | None = None,
        semantic_ratio: float = 0.5,
        max_distance: float = 1.0,
    ) -> list[Hit]:
        """The `limit` best tools for which `visible` is true.

        Keyword only, or — with `query_vector` and the tools' `vectors` — a blend: each score is
        scaled to [0, 1] by the best of its kind (BM25 by the best BM25 score, cosine similarity,
        clipped at 0, by the best cosine) and mixed `(1 - semantic_ratio) * bm25 + semantic_ratio *
        cosine`; a tool farther than `max_distance` (cosine distance) gets no semantic part.
        """
        np = self._np
        scores = self.bm25(terms)
        if query_vector is not None and self.vectors is not None and len(self.vectors) == len(self.tools):
            top = float(scores.max()) if len(scores) else 0.0
            lexical = scores / top if top > 0 else scores
            # einsum, not `@`: a matrix-vector product through BLAS starts its thread pool, which on a
            # busy machine costs 10-20 ms at 10,000 tools where one core takes 1-2 ms.
            cosine = np.einsum("ij,j->i", self.vectors, query_vector)
            semantic = np.where(1.0 - cosine <= max_distance, np.clip(cosine, 0.0, 1.0), 0.0)
            # Scaled like BM25: a static model's cosines crowd into a narrow band (0.3-0.7), so unscaled
            # they weigh less than the ratio says (tuned on BFCL: docs/bench-optimizer.md).
            best = float(semantic.max()) if len(semantic) else 0.0
            if best > 0:
                semantic = semantic / best
            scores = (1.0 - semantic_ratio) * lexical + semantic_ratio * semantic
        candidates = np.flatnonzero(scores > 0)
        # Blended, nearly every tool scores: sort only the best few, unless `visible` hides too many.
        head = 4 * limit + 64
        if len(candidates) > head:
            best = candidates[np.argpartition(-scores[candidates], head)[:head]]
            hits = self._visible(best[np.argsort(-scores[best], kind="stable")], scores, limit, visible)
            if len(hits) >= limit:
                return hits
        order = candidates[np.argsort(-scores[candidates], kind="stable")]
        return self._visible(order, scores, limit, visible)

    def _visible(
        self, order: Any, scores: NDArray[np.float32], limit: int, visible: Callable[[str], bool] | None
    ) -> list[Hit]:
        hits: list[Hit] = []
        for i in order:
            name = self.names[int(i)]
            if visible is None or visible(name):
                hits.append(Hit(name, float(scores[int(i)])))
                if len(hits) >= limit:
                    break
        return hits
