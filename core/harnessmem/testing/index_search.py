"""The finding tests of the index suite: what a search finds and how it ranks, the query
modes, dates and sources, and the bad input no backend may choke on."""

from __future__ import annotations

from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessmem.backends.base import FileUpdate, IndexBackend
from harnessmem.index.repeats import search_distinct
from harnessmem.testing._index_base import IndexSuiteBase
from harnessmem.testing.index_texts import MEMORY, NASTY_QUERIES, hit_paths, sync_text

__all__ = ["IndexSearchTests"]

_FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.differing_executors],
)
_QUERY_TEXT = st.one_of(
    st.text(max_size=60),
    st.text(alphabet='"()*:^+-~ ANDORNEABCxyz0123\x00🧠寿司', max_size=60),
    st.lists(st.sampled_from(NASTY_QUERIES[:30]), max_size=6).map(" ".join),
    st.text(min_size=4_000, max_size=5_000),
)


class IndexSearchTests(IndexSuiteBase):
    """Searching a synced index: the hits, their ranking, and bad queries."""

    __harnessmem_suite__: ClassVar[bool] = True

    # finding --------------------------------------------------------------------------------

    def test_finds_an_entry_with_its_line_range(self, index: IndexBackend) -> None:
        """A word of a bullet finds that bullet, with its path, 1-based lines and text.

        If this fails, check that sync_file stores each entry's start_line/end_line and
        that search returns them unchanged, with path relative to the workspace.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        hits = index.search("kaiseki")
        assert len(hits) == 1
        hit = hits[0]
        assert (hit.path, hit.start_line, hit.end_line) == ("MEMORY.md", 5, 6)
        assert "kaiseki" in hit.content
        assert hit.content.startswith("- Booked the Kyoto ryokan")
        assert isinstance(hit.score, float)

    def test_repeats_collapse_into_one_hit(self, index: IndexBackend) -> None:
        """The shared search path (:func:`harnessmem.index.repeats.search_distinct`) gives
        one hit per memory: a fact in MEMORY.md and in the daily logs of two days is one
        hit listing the other places; the top 5 are five different facts.

        If this fails with repeats in the top 5, check that search returns each entry's
        content as stored (the collapse compares words); if with fewer than 5 hits, check
        that search honours a ``limit`` larger than asked for by the caller.
        """
        fact = "- The staging database is PostgreSQL 16 on db-staging, port 5433."
        others = [f"- Database note {n}: replica {n} of the staging cluster." for n in range(6)]
        sync_text(index, "MEMORY.md", "## Facts\n" + "\n".join([fact, *others[:3]]) + "\n")
        day = "## Memory Flush — 2026-05-0{d}T09:00:00Z · session s\n{body}\n"
        sync_text(index, "memory/2026-05-01.md", day.format(d=1, body=fact))
        sync_text(
            index,
            "memory/2026-05-02.md",
            day.format(d=2, body="\n".join([fact[:-1] + " (checked).", *others[3:]])),
        )
        # "port" is the fact's alone, so any ranking puts it in the top 5 (without it every
        # entry holds both words, and where it lands is the ranking's choice).
        hits = search_distinct(index, "staging database port", 5)
        assert len(hits) == 5
        texts = [hit.content for hit in hits]
        assert len({" ".join(t.split()) for t in texts}) == 5, texts
        (merged,) = [hit for hit in hits if "5433" in hit.content]
        assert len(merged.also) == 2, merged
        assert {where.split(":")[0] for where in merged.also} | {merged.path} == {
            "MEMORY.md",
            "memory/2026-05-01.md",
            "memory/2026-05-02.md",
        }

    def test_line_ranges_match_the_file(self, index: IndexBackend) -> None:
        """Every hit's lines, read back from the text, are the hit's content.

        If this fails, check off-by-one errors: lines are 1-based and end_line inclusive.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        lines = MEMORY.splitlines()
        for query in ("aisle", "Alice", "Berlin", "roadmap", "onsen"):
            (hit,) = index.search(query, limit=1)
            text = "\n".join(lines[hit.start_line - 1 : hit.end_line]).strip()
            assert text == hit.content, query

    def test_words_match_in_any_order(self, index: IndexBackend) -> None:
        """A multi-word query finds entries holding its words in another order.

        If this fails, the query is being matched as a phrase or substring (the defect
        of the Java reference): join terms with OR and rank by relevance.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        assert hit_paths(index.search("flights long aisle")) == ["MEMORY.md"]
        hits = index.search("Berlin office Bob")
        assert hits
        assert hits[0].content == "- Bob runs the Berlin office."

    def test_more_and_rarer_terms_rank_first(self, index: IndexBackend) -> None:
        """Entries with more of the query's words come first; scores never increase.

        If this fails, check the ranking function (bm25 or similar) and its sign: a
        higher score must be a better match.
        """
        text = "\n".join(
            ["- tea with lemon"]
            + [f"- tea number {i}" for i in range(20)]
            + ["- lemon tart and tea", "- a bakery sells lemon tart"]
        )
        sync_text(index, "memory/2026-01-02.md", text)
        hits = index.search("lemon tart tea", limit=5)
        assert hits[0].content == "- lemon tart and tea"
        assert hits[1].content in {"- a bakery sells lemon tart", "- tea with lemon"}
        scores = [hit.score for hit in hits]
        assert scores == sorted(scores, reverse=True)

    def test_limit_caps_the_results(self, index: IndexBackend) -> None:
        """At most ``limit`` hits come back; a limit of 0 gives none.

        If this fails, pass the limit down to the query (LIMIT) instead of slicing late.
        """
        sync_text(index, "memory/2026-01-03.md", "\n".join(f"- pebble {i}" for i in range(40)))
        assert len(index.search("pebble", limit=7)) == 7
        assert len(index.search("pebble", limit=100)) == 40
        assert index.search("pebble", limit=0) == []

    def test_unicode_text_and_paths(self, index: IndexBackend) -> None:
        """Non-Latin scripts, emoji next to words and non-ASCII paths are searchable.

        If this fails, check the tokenizer (it must treat letters of every script as
        word characters) and that paths are stored as text, not bytes.
        """
        text = (
            "- Встреча в Москве в пятницу 🧠\n"
            "- Η συνάντηση είναι στην Αθήνα\n"  # noqa: RUF001 (Greek on purpose)
            "- Die Straße heißt Müllerweg🚲\n"
        )
        sync_text(index, "memory/notizen-ü.md", text)
        assert hit_paths(index.search("Москве")) == ["memory/notizen-ü.md"]
        assert index.search("Αθήνα")[0].start_line == 2
        assert index.search("Müllerweg")[0].start_line == 3

    def test_diacritics_fold(self, index: IndexBackend) -> None:
        """``cafe`` finds ``café`` and ``naïve`` finds ``naive``.

        If this fails, enable diacritic folding in the tokenizer (remove_diacritics).
        """
        self.require(index, "diacritics")
        sync_text(index, "MEMORY.md", "- Meet at the café on Friday\n- A naive plan\n")
        assert index.search("cafe")[0].start_line == 1
        assert index.search("naïve")[0].start_line == 2

    def test_stemming(self, index: IndexBackend) -> None:
        """``running`` finds ``runs`` and ``flights`` finds ``flight``.

        If this fails, enable a stemmer (porter) for indexing and queries alike.
        """
        self.require(index, "stemming")
        sync_text(index, "MEMORY.md", "- She runs every morning\n- Booked one flight\n")
        assert index.search("running")[0].start_line == 1
        assert index.search("flights")[0].start_line == 2

    def test_cjk_query_finds_cjk_line(self, index: IndexBackend) -> None:
        """Chinese, Japanese and Korean words are found inside unspaced sentences.

        If this fails, CJK runs are indexed as single tokens: segment them (bigrams)
        at index and query time alike.
        """
        self.require(index, "cjk")
        text = (
            "- 我喜欢寿司和拉面\n"
            "- 東京タワーに行きました\n"
            "- 서울에서 회의가 있어요\n"
            "- Kyoto trip planned\n"
        )
        sync_text(index, "memory/2026-02-01.md", text)
        assert [h.start_line for h in index.search("寿司")][:1] == [1]
        assert [h.start_line for h in index.search("拉面")][:1] == [1]
        assert [h.start_line for h in index.search("東京")][:1] == [2]
        assert [h.start_line for h in index.search("タワー")][:1] == [2]
        assert [h.start_line for h in index.search("서울")][:1] == [3]
        assert [h.start_line for h in index.search("寿司 Kyoto", limit=5)] != []
        assert index.search("京都") == []

    def test_phrase_and_all_modes(self, index: IndexBackend) -> None:
        """``phrase`` needs the words in order; ``all`` needs every word; ``any`` ranks.

        If this fails, check how the mode changes the query: AND for ``all``, one
        quoted phrase for ``phrase``.
        """
        self.require(index, "phrase")
        sync_text(index, "MEMORY.md", "- aisle seat please\n- a seat by the aisle\n")
        assert [h.start_line for h in index.search("aisle seat", mode="phrase")] == [1]
        assert [h.start_line for h in index.search("seat aisle", mode="phrase")] == []
        assert len(index.search("aisle seat", mode="all")) == 2
        assert index.search("aisle window", mode="all") == []
        assert len(index.search("aisle window", mode="any")) == 2

    def test_search_between_dates_keeps_entries_dated_within(self, index: IndexBackend) -> None:
        """``since`` / ``until`` keep entries dated within them (inclusive); undated ones go.

        If this fails, check which date an entry carries (a daily log's day, the date of
        the nearest heading that has one) and that both bounds are inclusive.
        """
        self.require(index, "dates")
        sync_text(index, "memory/2026-11-01.md", "- the otter crossed the weir\n")
        sync_text(index, "memory/2026-11-15.md", "- the otter slept by the mill\n")
        sync_text(index, "memory/2026-12-01.md", "- the otter came back in December\n")
        memory = "# Memory\n\n- the otter is a regular visitor\n\n## 2026-11-20\n- otter tracks\n"
        sync_text(index, "MEMORY.md", memory)

        def paths(since: str | None = None, until: str | None = None) -> list[tuple[str, int]]:
            hits = index.search("otter", 10, since=since, until=until)
            return sorted((h.path, h.start_line) for h in hits)

        assert len(paths()) == 5
        november = paths(since="2026-11-10", until="2026-11-30")
        assert november == [("MEMORY.md", 6), ("memory/2026-11-15.md", 1)]
        assert paths(since="2026-11-15", until="2026-11-15") == [("memory/2026-11-15.md", 1)]
        assert [p for p, _ in paths(since="2026-11-30")] == ["memory/2026-12-01.md"]
        assert [p for p, _ in paths(until="2026-11-01")] == ["memory/2026-11-01.md"]
        assert paths(since="2027-01-01") == []
        with pytest.raises(ValueError, match="since"):
            index.search("otter", since="last week")
        with pytest.raises(ValueError, match="after until"):
            index.search("otter", since="2026-12-01", until="2026-11-01")

    def test_a_search_between_dates_finds_a_match_ranked_below_many_others(
        self, index: IndexBackend
    ) -> None:
        """The best ``limit`` hits among the dated ones, however many better ones lie outside.

        If this fails, the backend probably filters the top of an unfiltered ranking: filter
        before ranking, or grow the pool until ``limit`` dated hits are found.
        """
        self.require(index, "dates")
        strong = "".join(f"- heron heron heron sighting {i}\n" for i in range(400))
        sync_text(index, "memory/2026-11-30.md", strong)
        sync_text(index, "memory/2026-03-02.md", "- a single heron at the harbour, far back\n")
        sync_text(index, "memory/2026-06-01.md", "- unrelated line about the tide\n")
        hits = index.search("heron", 3, since="2026-01-01", until="2026-10-31")
        assert [(h.path, h.date) for h in hits] == [("memory/2026-03-02.md", "2026-03-02")]

    def test_sources_are_separate(self, index: IndexBackend) -> None:
        """Memory and session entries are searched apart; path_prefix narrows a search.

        If this fails, check that sync_file records ``source`` and search filters on it.
        """
        sync_text(index, "MEMORY.md", "- The wifi password is on the fridge\n")
        log = '{"role": "user", "content": "what is the wifi password"}\n'
        sync_text(index, "sessions/a.log.jsonl", log, source="sessions")
        sync_text(index, "sessions/b.log.jsonl", log, source="sessions")
        assert hit_paths(index.search("wifi")) == ["MEMORY.md"]
        assert sorted(hit_paths(index.search("wifi", source="sessions"))) == [
            "sessions/a.log.jsonl",
            "sessions/b.log.jsonl",
        ]
        only_b = index.search("wifi", source="sessions", path_prefix="sessions/b.")
        assert hit_paths(only_b) == ["sessions/b.log.jsonl"]
        assert index.search("wifi", source="sessions", path_prefix="sessions/c") == []

    # bad input ------------------------------------------------------------------------------

    @pytest.mark.parametrize("query", NASTY_QUERIES, ids=range(len(NASTY_QUERIES)))
    def test_nasty_queries_never_raise(self, index: IndexBackend, query: str) -> None:
        """Quotes, operators, parentheses, NUL, emoji, huge queries: a list, never an error.

        If this fails, the query text reaches the engine's syntax: quote every term.
        """
        sync_text(index, "MEMORY.md", MEMORY + "\n- word x w1 寿司\n")
        for mode in ("any", "all", "phrase"):
            hits = index.search(query, limit=5, mode=mode)
            assert isinstance(hits, list)

    @given(query=_QUERY_TEXT)
    @_FUZZ
    def test_generated_queries_never_raise(self, index: IndexBackend, query: str) -> None:
        """Any text at all is a valid query.

        If this fails, hypothesis prints the query that broke the query builder.
        """
        if not index.files():
            sync_text(index, "MEMORY.md", MEMORY)
        assert isinstance(index.search(query, limit=3), list)

    def test_blank_query_finds_nothing(self, index: IndexBackend) -> None:
        """A query without a single word gives no hits (not every entry).

        If this fails, an empty query is being turned into a match-all.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        for query in ("", "  ", "?!", "🧠", '""'):
            assert index.search(query) == []

    def test_bad_arguments_get_the_errors_every_backend_gives(self, index: IndexBackend) -> None:
        """An unknown source or mode is a ValueError, a non-str query a TypeError, a limit
        under 1 no hits; an unknown source in sync_files is a ValueError too.

        If this fails, the backend overrides ``search`` or ``sync_files`` (implement
        ``_search`` and ``_sync_files`` instead: the base class's methods check the
        arguments), or, written against an earlier release, its ``sync_file`` does not call
        ``self._check_source``.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        with pytest.raises(ValueError, match="source"):
            index.search("staging", source="elsewhere")
        with pytest.raises(ValueError, match="mode"):
            index.search("staging", mode="fuzzy")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            index.search(b"staging")  # type: ignore[arg-type]
        assert index.search("staging", limit=0) == []
        assert index.search("staging", limit=-3) == []
        with pytest.raises(ValueError, match="source"):
            index.sync_files([FileUpdate("x.md", "h", [], source="elsewhere")])
