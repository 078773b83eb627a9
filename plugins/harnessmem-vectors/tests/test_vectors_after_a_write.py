"""A search after a write reads the changed files alone, and still sees every change.

The API embedder against ``FakeOpenAIServer`` (hashed words), so these run without the
weights package.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harnessmem.backends.base import IndexEntry
from harnessmem.testing import FakeOpenAIServer
from harnessmem_vectors import VectorIndex, _store
from harnessmem_vectors._store import Matrix

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer([]) as fake:
        yield fake


def _options(server: FakeOpenAIServer, **more: Any) -> dict[str, Any]:
    return {
        "embedder": "api",
        "model": "openai/text-embedding-3-small",
        "api_base": server.base_url,
        "api_key": "sk-test",
        "dimensions": 512,
        **more,
    }


def _entries(path: str, *texts: str) -> list[IndexEntry]:
    return [IndexEntry(path, n + 1, n + 1, f"- {t}") for n, t in enumerate(texts)]


def _texts(index: VectorIndex, query: str) -> list[str]:
    return [hit.content for hit in index.search(query, limit=50)]


def _fill(index: VectorIndex, files: int = 4, per_file: int = 20) -> None:
    for f in range(files):
        path = f"memory/2026-01-0{f + 1}.md"
        texts = [f"note {f}-{n} about harbour boats and tides" for n in range(per_file)]
        index.sync_file(path, f"h{f}", _entries(path, *texts))


def test_a_write_reads_the_changed_file_alone(
    tmp_path: Path, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 80 entries, so the query's common words are counted (word shares kept).
    index = VectorIndex.create(_options(server), index_path=tmp_path / "i.db")
    try:
        _fill(index)
        assert _texts(index, "harbour walrus")
        assert index.store.loaded_files == 4
        counted: Counter[str] = Counter()
        words = _store._words

        def counting(text: str) -> set[str]:
            counted[text] += 1
            return words(text)

        monkeypatch.setattr(_store, "_words", counting)
        path = "memory/2026-01-01.md"
        texts = [f"note 0-{n} about harbour boats and tides" for n in range(20)]
        index.sync_file(path, "h0b", _entries(path, *texts, "the walrus sleeps on the pier"))
        assert "- the walrus sleeps on the pier" in _texts(index, "walrus harbour")
        assert index.store.loaded_files == 5, "only the changed file was read again"
        assert list(counted) == ["- the walrus sleeps on the pier"], "no word share recounted"
        matrix = index.store.matrix(index.workspace_id, "memory", index._identity)
        assert matrix is not None
        assert matrix.entries == 81
        assert matrix.size == 81
        assert index.store.loaded_files == 5, "no write, nothing read"
    finally:
        index.close()


def test_another_instances_writes_are_seen(tmp_path: Path, server: FakeOpenAIServer) -> None:
    # A second instance on the same files stands for another process: its own connections.
    ours = VectorIndex.create(_options(server, ranking="dense"), index_path=tmp_path / "i.db")
    theirs = VectorIndex.create(_options(server, ranking="dense"), index_path=tmp_path / "i.db")
    try:
        _fill(ours)
        assert not any("walrus" in t for t in _texts(ours, "walrus"))
        loaded = ours.store.loaded_files
        path = "memory/2026-01-02.md"
        theirs.sync_file(path, "other", _entries(path, "the walrus sleeps on the pier"))
        found = _texts(ours, "walrus")
        assert found[0] == "- the walrus sleeps on the pier"
        assert not any(t.startswith("- note 1-") for t in found), "their rewrite's old rows"
        assert ours.store.loaded_files == loaded + 1
        theirs.remove(path)
        assert not any("walrus" in t for t in _texts(ours, "walrus"))
        theirs.clear()
        assert ours.search("harbour") == []
    finally:
        theirs.close()
        ours.close()


def test_rewritten_and_removed_files_lose_their_old_vectors(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    # Dense ranking returns every entry with a vector: an old row left over would show.
    index = VectorIndex.create(_options(server, ranking="dense"), index_path=tmp_path / "i.db")
    try:
        a, b = "memory/a.md", "memory/b.md"
        index.sync_file(a, "a1", _entries(a, "the walrus naps", "a gull screams"))
        index.sync_file(b, "b1", _entries(b, "tides turn"))
        assert len(_texts(index, "walrus")) == 3
        index.sync_file(a, "a2", _entries(a, "a gull screams"))  # line 1 now the gull
        assert sorted(_texts(index, "walrus")) == ["- a gull screams", "- tides turn"]
        index.remove(b)
        assert _texts(index, "walrus") == ["- a gull screams"]
        # Cleared and written again with the same hash but other entries (a reindex
        # under other settings): the hash alone would hide it.
        index.clear()
        index.sync_file(a, "a2", _entries(a, "harbour lights"))
        assert _texts(index, "walrus") == ["- harbour lights"]
    finally:
        index.close()


def _rows(path: str, texts: list[str], first: int = 1, dims: int = 8) -> list[Any]:
    out = []
    for n, text in enumerate(texts):
        rng = np.random.default_rng(abs(hash((path, text))) % 2**32)
        vector = rng.normal(size=dims).astype(np.float32)
        vector /= np.linalg.norm(vector)
        line = first + n
        out.append((path, line, line, text, "", None, text.encode(), vector.tobytes()))
    return out


def _same(one: Matrix, other: Matrix) -> None:
    """Same live entries, same vectors, same word shares."""
    places = sorted(one.places[r] for r in np.flatnonzero(one.live).tolist())
    assert places == sorted(other.places[r] for r in np.flatnonzero(other.live).tolist())
    for place in places:
        mine, theirs = one.row(*place[:3]), other.row(*place[:3])
        assert mine is not None
        assert theirs is not None
        assert np.array_equal(one.vectors[mine], other.vectors[theirs])
    for word in ("alpha", "beta", "gamma", "delta"):
        assert one.word_share(word) == pytest.approx(other.word_share(word))


def test_matrix_updates_match_a_fresh_read() -> None:
    a = _rows("a", [f"alpha {n} beta" for n in range(1_500)])
    b = _rows("b", [f"gamma {n}" for n in range(10)])
    first = Matrix().updated({"a": "1", "b": "1"}, {"a": a, "b": b})
    assert first.word_share("alpha") == pytest.approx(1_500 / 1_510)  # counted from here on
    b2 = [*b, *_rows("b", ["delta alpha"], first=11)]
    appended = first.updated({"b": "2"}, {"b": b2})
    assert (appended.size, appended.entries) == (1_511, 1_511), "old rows kept, one added"
    assert appended._buffer is first._buffer, "appended past the old end"
    assert (first.size, first.entries) == (1_510, 1_510), "a matrix handed out never changes"
    _same(appended, Matrix().updated({"a": "1", "b": "2"}, {"a": a, "b": b2}))
    # Rewriting every row of "a" leaves 1,500 dead rows: past the bar, they are dropped.
    a2 = _rows("a", [f"alpha {n}" for n in range(3)])
    rewritten = appended.updated({"a": "2"}, {"a": a2})
    assert rewritten.size == rewritten.entries == 14
    _same(rewritten, Matrix().updated({"a": "2", "b": "2"}, {"a": a2, "b": b2}))
    # A few dead rows stay (masked) until more pile up.
    gone = rewritten.updated({"b": None}, {})
    assert (gone.size, gone.entries) == (14, 3)
    assert gone.row("b", 1, 1) is None
    _same(gone, Matrix().updated({"a": "2"}, {"a": a2}))
    similarity = gone.similarity(np.ones(8, dtype=np.float32))
    assert np.isneginf(similarity).sum() == 11
    assert gone.word_share("gamma") == 0.0
