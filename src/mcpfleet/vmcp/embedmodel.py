"""The embedding models `mcpfleet embeddings serve` can run: models shipped inside a PyPI package.

No model hub is reached at run time: the weights and the tokenizer are files of an installed wheel.
The one model today is WordLlama `l2_supercat` (PyPI `wordllama`: a static token-embedding table of
32,000 x 256 float16 values distilled from Llama 2's, 16 MB, plus its tokenizer): a text's vector is
the mean of its tokens' rows, L2-normalized. It runs on numpy and `tokenizers` only, loads in about
0.15 s and embeds a tool description in tens of microseconds (docs/vmcp.md says why it was chosen).

Inputs are cut to `MAX_TOKENS` tokens and embedded `BATCH` at a time, so one request's memory is
bounded (`BATCH * MAX_TOKENS * dimensions` floats) whatever it holds. The package's own
`WordLlama.load` is not used: it looks for the tokenizer in a folder its wheel does not have and then
downloads it, and its inference class neither truncates inputs nor leaves the root logger alone; what
remains (a table lookup and a mean) is the three lines of `Embedder.embed`.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

MAX_TOKENS = 512
BATCH = 16


@dataclass(frozen=True)
class BundledModel:
    """A model whose files ship in an installed package."""

    model_id: str
    """The name /info reports (the upstream model's id)."""
    package: str
    weights: str
    tokenizer: str
    tensor: str
    dimensions: int


WORDLLAMA = BundledModel(
    model_id="dleemiller/word-llama-l2-supercat",
    package="wordllama",
    weights="weights/l2_supercat_256.safetensors",
    tokenizer="tokenizers/l2_supercat_tokenizer_config.json",
    tensor="embedding.weight",
    dimensions=256,
)
DEFAULT_MODEL = WORDLLAMA.model_id
MODELS: dict[str, BundledModel] = {WORDLLAMA.model_id: WORDLLAMA, "wordllama": WORDLLAMA}
"""Accepted `--model` names (ids and short aliases)."""


class UnknownModel(ValueError):
    """A `--model` name that no installed package ships."""


class Embedder:
    """A loaded model: `embed` turns texts into unit-length float32 rows."""

    def __init__(self, model: BundledModel) -> None:
        import numpy
        from safetensors import safe_open
        from tokenizers import Tokenizer

        root = package_dir(model.package)
        tokenizer = Tokenizer.from_file(str(root / model.tokenizer))
        with safe_open(str(root / model.weights), framework="np", device="cpu") as f:
            table: Any = f.get_tensor(model.tensor)
        self.model = model
        self.dimensions = int(table.shape[1])
        self._table = numpy.ascontiguousarray(table, dtype=numpy.float32)
        # Padding to the longest input of a batch, truncation to MAX_TOKENS: the bound on one batch.
        tokenizer.enable_padding()
        tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer = tokenizer
        self._np = numpy

    def count_tokens(self, texts: list[str]) -> int:
        """Tokens the model reads of `texts` (after truncation): OpenAI's `usage`."""
        return sum(
            sum(e.attention_mask) for e in self._tokenizer.encode_batch(texts, add_special_tokens=False)
        )

    def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """One unit-length row per text (all zeros for a text without tokens)."""
        xp = self._np
        out: NDArray[np.float32] = xp.zeros((len(texts), self.dimensions), dtype=xp.float32)
        for start in range(0, len(texts), BATCH):
            encoded = self._tokenizer.encode_batch(texts[start : start + BATCH], add_special_tokens=False)
            ids = xp.array([e.ids for e in encoded], dtype=xp.int64).reshape(len(encoded), -1)
            mask = xp.array([e.attention_mask for e in encoded], dtype=xp.float32).reshape(len(encoded), -1)
            xp.clip(ids, 0, len(self._table) - 1, out=ids)
            summed = (self._table[ids] * mask[:, :, None]).sum(axis=1)
            norms = xp.linalg.norm(summed, axis=1, keepdims=True)
            out[start : start + len(encoded)] = summed / xp.where(norms == 0, 1.0, norms)
        return out


def package_dir(package: str) -> Path:
    """Where an installed package's files are, without importing it (importing `wordllama` configures
    the root logger at INFO)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UnknownModel(f"package {package!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def load(name: str = DEFAULT_MODEL) -> Embedder:
    """The model named `name`, loaded from its package; UnknownModel naming the choices otherwise."""
    model = MODELS.get(name)
    if model is None:
        raise UnknownModel(f"unknown model {name!r}: one of {', '.join(sorted(MODELS))}")
    return Embedder(model)
