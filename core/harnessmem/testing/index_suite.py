"""Conformance suite for :class:`harnessmem.backends.base.IndexBackend` implementations.

Subclass :class:`IndexBackendSuite` in a test module (its name must start with ``Test``)
and override one fixture, ``index``, which must yield an empty backend and close it
afterwards::

    class TestMyIndex(IndexBackendSuite):
        @pytest.fixture
        def index(self, tmp_path):
            backend = MyIndex.create({"dsn": ...}, index_path=tmp_path / "index.db")
            yield backend
            backend.close()

Entries are cut by the harness's own chunker (:func:`harnessmem.index.chunk_markdown`),
so the backend sees exactly what it sees in production. Tests of what a backend does
not declare in ``capabilities`` skip with the reason; a second instance on the same
store (for ``persistent``) is built by :meth:`IndexBackendSuite.reopen`, which a subclass
may override.

Isolation: a second workspace on the same store is ``index.scoped(OTHER_WORKSPACE)``
(:meth:`IndexBackendSuite.other_workspace`); the isolation tests sync both and check that
no search, ``files``, ``stats``, ``remove``, ``clear`` or self-rebuild of one reaches the
other's entries. A backend that can damage its own store (the SQLite file, say) overrides
:meth:`IndexBackendSuite.damage` so that the self-rebuild test runs; otherwise it skips.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessmem.backends.base import (
    FileUpdate,
    IndexBackend,
    SearchHit,
    SearchMode,
    SearchTimeout,
)
from harnessmem.index import chunk_markdown, chunk_session_log, content_hash
from harnessmem.index.repeats import search_distinct
from harnessmem.testing._suite import ConformanceSuite

__all__ = ["ISOLATION_TESTS", "NASTY_QUERIES", "OTHER_WORKSPACE", "IndexBackendSuite", "sync_text"]

#: Queries that break naive FTS query builders; none may raise.
NASTY_QUERIES = [
    "",
    "   ",
    '"',
    '""',
    '"unbalanced',
    "'single'",
    "a AND",
    "OR",
    "NOT",
    "AND OR NOT",
    "NEAR(a b, 3)",
    "content:word",
    "col:",
    "*",
    "prefix*",
    "^start",
    "(",
    ")",
    "((a OR b)",
    "a) OR (b",
    "-minus +plus",
    "a:b:c",
    "\x00",
    "nul\x00inside",
    "\u200b\u200d",
    "🧠🔥 emoji only",
    "emoji🧠glued",
    "\\backslash\\",
    "%_like%",
    "; DROP TABLE entries; --",
    "x" * 5_000,
    "word " * 1_000,
    " ".join(f"w{i}" for i in range(600)),
    "寿司" * 2_500,
    "\ud800",  # a lone surrogate
]

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


def sync_text(
    index: IndexBackend,
    path: str,
    text: str,
    *,
    source: str = "memory",
    token: str | None = None,
) -> bool:
    """Index ``text`` as the content of ``path``, cut as the harness cuts it."""
    chunk = chunk_session_log if source == "sessions" else chunk_markdown
    return index.sync_file(
        path,
        content_hash(text.encode("utf-8", "surrogatepass")),
        chunk(path, text),
        source=source,
        change_token=token,
    )


_SCORED_MODES: tuple[SearchMode, ...] = ("any", "all")

#: The id of the second workspace the isolation tests put on the store of ``index``.
OTHER_WORKSPACE = "suite://other-workspace"

#: The names of the isolation tests (a test that a leaky backend fails runs each).
ISOLATION_TESTS = (
    "test_workspaces_search_only_their_own_entries",
    "test_workspaces_keep_their_own_files_at_the_same_path_and_hash",
    "test_remove_in_one_workspace_leaves_the_other",
    "test_clear_of_one_workspace_leaves_the_other",
    "test_stats_count_one_workspace",
    "test_a_self_rebuild_keeps_workspaces_apart",
)

ALICE = """# Memory

- Alice parks the bicycle behind the bakery.
- The staging password hint is a lighthouse.
"""
BOB = """# Memory

- Bob parks the van near the harbour.
- Bob's staging password hint is a lemon.
"""


def _paths(hits: list[SearchHit]) -> list[str]:
    return [hit.path for hit in hits]


MEMORY = """# Memory

## Travel
- Prefers aisle seats on long flights.
- Booked the Kyoto ryokan for March 3-5.
  It has an onsen and serves kaiseki dinners.

## People
- Alice is the CTO of Acme; she reviews every architecture decision.
- Bob runs the Berlin office.

A paragraph about the quarterly roadmap
that spans two lines.
"""


class IndexBackendSuite(ConformanceSuite):
    """The contract every index backend meets; override the ``index`` fixture."""

    __harnessmem_suite__: ClassVar[bool] = True

    @pytest.fixture
    def index(self) -> Iterator[IndexBackend]:
        """Override: yield an empty backend, close it after the test."""
        raise NotImplementedError("override the index fixture of IndexBackendSuite")

    def reopen(self, index: IndexBackend) -> IndexBackend:
        """A second instance on the same store, as another process would open it."""
        return type(index).create(index.options, **index.context)

    def other_workspace(self, index: IndexBackend) -> IndexBackend:
        """A second workspace on the store of ``index`` (closed by the test)."""
        return index.scoped(OTHER_WORKSPACE)

    def damage(self, index: IndexBackend) -> None:
        """Override: damage the store of ``index`` so that the backend rebuilds it itself.

        The default skips the self-rebuild test (a backend without a store to damage).
        """
        pytest.skip(f"{type(self).__name__} does not override damage()")

    @staticmethod
    def require(index: IndexBackend, capability: str) -> None:
        if capability not in index.capabilities:
            pytest.skip(f"{type(index).__name__} does not declare the {capability!r} capability")

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
        assert _paths(index.search("flights long aisle")) == ["MEMORY.md"]
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
        assert _paths(index.search("Москве")) == ["memory/notizen-ü.md"]
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
        assert _paths(index.search("wifi")) == ["MEMORY.md"]
        assert sorted(_paths(index.search("wifi", source="sessions"))) == [
            "sessions/a.log.jsonl",
            "sessions/b.log.jsonl",
        ]
        only_b = index.search("wifi", source="sessions", path_prefix="sessions/b.")
        assert _paths(only_b) == ["sessions/b.log.jsonl"]
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

        If this fails, the backend overrides ``search`` (implement ``_search`` instead: the
        base class's ``search`` checks the arguments) or ``sync_files`` does not call
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

    # keeping in step ------------------------------------------------------------------------

    def test_sync_is_skipped_at_the_same_hash(self, index: IndexBackend) -> None:
        """The same content hash is a no-op (False) and never duplicates entries.

        If this fails, compare the stored content hash before replacing entries.
        """
        assert sync_text(index, "MEMORY.md", MEMORY, token="t1") is True
        assert sync_text(index, "MEMORY.md", MEMORY, token="t2") is False
        assert len(index.search("Alice")) == 1
        assert index.stats().entries == len(chunk_markdown("MEMORY.md", MEMORY))
        assert index.files()["MEMORY.md"].change_token == "t2", "the token must be updated"

    def test_changed_file_replaces_its_entries(self, index: IndexBackend) -> None:
        """New content replaces the old: old words vanish, new ones appear, lines move.

        If this fails, check that sync_file deletes the entries it no longer receives
        and updates line numbers of the ones that moved.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        changed = MEMORY.replace("- Bob runs the Berlin office.", "- Carol runs the Lisbon office.")
        changed = "Intro line one.\n\n" + changed
        sync_text(index, "MEMORY.md", changed)
        assert index.search("Berlin") == []
        (hit,) = index.search("Lisbon")
        assert changed.splitlines()[hit.start_line - 1] == "- Carol runs the Lisbon office."
        (moved,) = index.search("kaiseki")
        assert (moved.start_line, moved.end_line) == (7, 8)
        assert index.stats().entries == len(chunk_markdown("MEMORY.md", changed))

    def test_append_keeps_earlier_entries(self, index: IndexBackend) -> None:
        """Appending bullets to a log adds them and keeps the earlier ones found.

        If this fails, check the replacement of a file's entries when most are unchanged.
        """
        text = "## Memory Flush\n- first fact about otters\n"
        sync_text(index, "memory/2026-03-01.md", text)
        text += "- second fact about beavers\n"
        sync_text(index, "memory/2026-03-01.md", text)
        assert [h.start_line for h in index.search("otters")] == [2]
        assert [h.start_line for h in index.search("beavers")] == [3]
        assert index.stats().entries == 2

    def test_other_files_are_left_alone(self, index: IndexBackend) -> None:
        """Syncing or removing one file never touches another's entries.

        If this fails, deletes are not restricted to the path being synced.
        """
        sync_text(index, "memory/2026-01-01.md", "- walrus in January\n")
        sync_text(index, "memory/2026-01-02.md", "- walrus in February\n")
        sync_text(index, "memory/2026-01-02.md", "- no more marine mammals\n")
        assert _paths(index.search("walrus")) == ["memory/2026-01-01.md"]
        index.remove("memory/2026-01-02.md")
        assert _paths(index.search("walrus")) == ["memory/2026-01-01.md"]

    def test_remove_forgets_a_file(self, index: IndexBackend) -> None:
        """remove drops a file's entries and its record; a second remove returns False.

        If this fails, check that remove deletes entries, full-text rows and the file row.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        assert index.remove("MEMORY.md") is True
        assert index.search("Alice") == []
        assert "MEMORY.md" not in index.files()
        assert index.remove("MEMORY.md") is False
        assert index.stats().entries == 0

    def test_files_and_stats_describe_the_index(self, index: IndexBackend) -> None:
        """files() gives source, hash, token and entry count; stats() counts it all.

        If this fails, check what sync_file records per file.
        """
        sync_text(index, "MEMORY.md", MEMORY, token="tok")
        sync_text(
            index, "sessions/s.log.jsonl", '{"role": "user", "content": "hi"}\n', source="sessions"
        )
        files = index.files()
        assert set(files) == {"MEMORY.md", "sessions/s.log.jsonl"}
        memory = files["MEMORY.md"]
        assert memory.source == "memory"
        assert memory.content_hash == content_hash(MEMORY.encode())
        assert memory.change_token == "tok"
        assert memory.entries == len(chunk_markdown("MEMORY.md", MEMORY))
        assert files["sessions/s.log.jsonl"].source == "sessions"
        stats = index.stats()
        assert stats.files == 2
        assert stats.entries == memory.entries + 1

    def test_clear_empties_the_index(self, index: IndexBackend) -> None:
        """clear() forgets every file.

        If this fails, check that clear removes entries and file records of every source.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        sync_text(
            index, "sessions/s.log.jsonl", '{"role": "user", "content": "hi"}\n', source="sessions"
        )
        index.clear()
        assert index.files() == {}
        assert index.stats().entries == 0
        assert index.search("Alice") == []

    # isolation ------------------------------------------------------------------------------

    def _two_workspaces(self, index: IndexBackend) -> IndexBackend:
        other = self.other_workspace(index)
        assert other.workspace_id == OTHER_WORKSPACE
        assert other.workspace_id != index.workspace_id
        sync_text(index, "MEMORY.md", ALICE, token="a")
        sync_text(other, "MEMORY.md", BOB, token="b")
        log = '{"role": "user", "content": "where is the staging server"}\n'
        sync_text(index, "sessions/alice.log.jsonl", log, source="sessions")
        sync_text(index, "memory/2026-01-01.md", "- Alice only: the zebra code\n")
        sync_text(other, "memory/2026-01-02.md", "- Bob only: the walrus code\n")
        return other

    def test_workspaces_search_only_their_own_entries(self, index: IndexBackend) -> None:
        """Two workspaces on one store: each search finds only its own workspace's entries.

        If this fails, every row must carry the workspace (``self.workspace_id``) and
        every search must filter on it, the path-prefix and session searches too.
        """
        other = self._two_workspaces(index)
        try:
            for query in ("staging password hint", "parks", "code", "zebra walrus"):
                for mode in _SCORED_MODES:
                    mine = index.search(query, limit=50, mode=mode)
                    theirs = other.search(query, limit=50, mode=mode)
                    assert all("Bob" not in hit.content for hit in mine), (query, mode)
                    assert all("Alice" not in hit.content for hit in theirs), (query, mode)
            assert [h.content for h in index.search("walrus")] == []
            assert [h.content for h in other.search("zebra")] == []
            assert len(index.search("lighthouse")) == 1
            assert other.search("lighthouse") == []
            assert other.search("staging", source="sessions") == []
            prefix = "sessions/alice."
            assert other.search("staging", source="sessions", path_prefix=prefix) == []
            assert len(index.search("staging", source="sessions", path_prefix=prefix)) == 1
            assert other.search("code", path_prefix="memory/") != []
            assert all("Bob" in h.content for h in other.search("code", path_prefix="memory/"))
        finally:
            other.close()

    def test_workspaces_keep_their_own_files_at_the_same_path_and_hash(
        self, index: IndexBackend
    ) -> None:
        """The same path (even at the same content hash) is a separate file in each workspace.

        If this fails, files are keyed by path alone: key them by (workspace, path), and
        compare a stored hash only with the same workspace's.
        """
        other = self._two_workspaces(index)
        try:
            assert set(index.files()) == {
                "MEMORY.md",
                "memory/2026-01-01.md",
                "sessions/alice.log.jsonl",
            }
            assert set(other.files()) == {"MEMORY.md", "memory/2026-01-02.md"}
            assert index.files()["MEMORY.md"].change_token == "a"
            assert other.files()["MEMORY.md"].change_token == "b"
            shared = "- A fact both workspaces hold: the moon is far.\n"
            assert sync_text(index, "memory/shared.md", shared) is True
            assert sync_text(other, "memory/shared.md", shared) is True, (
                "the other workspace does not hold the file yet"
            )
            assert _paths(other.search("moon")) == ["memory/shared.md"]
            index.remove("memory/shared.md")
            assert _paths(other.search("moon")) == ["memory/shared.md"]
            assert index.search("moon") == []
        finally:
            other.close()

    def test_remove_in_one_workspace_leaves_the_other(self, index: IndexBackend) -> None:
        """remove() of a path drops it from its workspace only.

        If this fails, deletes are keyed by path alone: add the workspace to the WHERE.
        """
        other = self._two_workspaces(index)
        try:
            assert index.remove("MEMORY.md") is True
            assert index.remove("memory/2026-01-02.md") is False, "a path of the other one"
            assert _paths(other.search("harbour")) == ["MEMORY.md"]
            assert "memory/2026-01-02.md" in other.files()
            assert other.remove("MEMORY.md") is True
            assert index.remove("MEMORY.md") is False
            assert _paths(index.search("zebra")) == ["memory/2026-01-01.md"]
        finally:
            other.close()

    def test_clear_of_one_workspace_leaves_the_other(self, index: IndexBackend) -> None:
        """clear() (the start of a full reindex) forgets one workspace's files, no more.

        If this fails, clear() empties the whole store: delete only this workspace's rows.
        """
        other = self._two_workspaces(index)
        try:
            before = other.files()
            other_entries = other.stats().entries
            index.clear()
            assert index.files() == {}
            assert index.search("lighthouse") == []
            assert other.files() == before
            assert other.stats().entries == other_entries
            assert _paths(other.search("walrus")) == ["memory/2026-01-02.md"]
            sync_text(index, "MEMORY.md", ALICE)
            other.clear()
            assert _paths(index.search("lighthouse")) == ["MEMORY.md"]
        finally:
            other.close()

    def test_stats_count_one_workspace(self, index: IndexBackend) -> None:
        """stats() counts the files and entries of its own workspace only.

        If this fails, the counts are of the whole store: filter them by workspace.
        """
        other = self._two_workspaces(index)
        try:
            mine, theirs = index.stats(), other.stats()
            assert mine.files == 3
            assert theirs.files == 2
            assert mine.entries == sum(f.entries for f in index.files().values())
            assert theirs.entries == sum(f.entries for f in other.files().values())
        finally:
            other.close()

    def test_a_self_rebuild_keeps_workspaces_apart(self, index: IndexBackend) -> None:
        """After the store rebuilt itself, every workspace learns it and none sees another's.

        A rebuild may lose every workspace's rows (they are derived data), but then each
        workspace's ``resets`` grows, so its harness hands every file again. If this fails,
        make the rebuild count a reset on every instance of the store, and check that the
        rebuilt store keys its rows by workspace as the first one did.
        """
        other = self._two_workspaces(index)
        try:
            resets = index.resets, other.resets
            self.damage(index)
            index.search("lighthouse")  # finds the damage and rebuilds
            assert index.resets > resets[0]
            found = _paths(other.search("walrus"))
            if other.resets == resets[1]:  # no reset counted: its rows must still be there
                assert found == ["memory/2026-01-02.md"]
            sync_text(index, "MEMORY.md", ALICE)
            sync_text(other, "MEMORY.md", BOB)
            assert all("Bob" not in h.content for h in index.search("parks staging", limit=50))
            assert all("Alice" not in h.content for h in other.search("parks staging", limit=50))
        finally:
            other.close()

    def test_a_scoped_instance_closes_alone(self, index: IndexBackend) -> None:
        """Closing a scoped instance leaves the store open for the others.

        If this fails, scoped() instances close the shared connections: only the
        instance the others came from may close them.
        """
        other = self._two_workspaces(index)
        other.close()
        other.close()
        assert _paths(index.search("zebra")) == ["memory/2026-01-01.md"]
        again = self.other_workspace(index)
        try:
            assert _paths(again.search("walrus")) == ["memory/2026-01-02.md"]
        finally:
            again.close()

    # concurrency, persistence, limits -------------------------------------------------------

    def test_threads_sync_and_search_at_once(self, index: IndexBackend) -> None:
        """Threads syncing different files while others search: no errors, nothing lost.

        If this fails, check connection handling per thread and write locking.
        """
        self.require(index, "concurrent")
        errors: list[BaseException] = []

        def writer(n: int) -> None:
            try:
                for round_ in range(3):
                    text = "\n".join(f"- thread{n} round{round_} item {i}" for i in range(20))
                    sync_text(index, f"memory/t{n}.md", text)
            except BaseException as exc:
                errors.append(exc)

        def reader() -> None:
            try:
                for _ in range(20):
                    index.search("item round2", limit=5)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        threads += [threading.Thread(target=reader) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        for n in range(4):
            hits = index.search(f"thread{n} round2", limit=50, mode="all")
            assert len(hits) == 20, n
        assert index.stats().entries == 80

    def test_a_second_instance_sees_the_data(self, index: IndexBackend) -> None:
        """Another instance on the same store (another process) finds what one synced.

        If this fails, check that writes are committed, and reopen() in your suite.
        """
        self.require(index, "persistent")
        sync_text(index, "MEMORY.md", MEMORY)
        other = self.reopen(index)
        try:
            assert _paths(other.search("Alice")) == ["MEMORY.md"]
            sync_text(other, "memory/2026-04-01.md", "- narwhal sighting\n")
            assert _paths(index.search("narwhal")) == ["memory/2026-04-01.md"]
            elsewhere = other.scoped(OTHER_WORKSPACE)
            try:
                assert elsewhere.search("narwhal") == [], "another workspace on a new instance"
                sync_text(elsewhere, "MEMORY.md", BOB)
                assert index.search("harbour") == []
            finally:
                elsewhere.close()
        finally:
            other.close()

    def test_search_stops_at_the_timeout(self, index: IndexBackend) -> None:
        """A search that runs past ``timeout`` raises SearchTimeout; a normal one finishes.

        If this fails, install an interrupt (SQLite: a progress handler) for the query.
        """
        self.require(index, "timeout")
        text = "\n".join(f"- common word number {i} of many" for i in range(3_000))
        sync_text(index, "memory/2026-05-01.md", text)
        assert len(index.search("common word", limit=3, timeout=30.0)) == 3
        with pytest.raises(SearchTimeout):
            index.search("common word many", limit=3, timeout=1e-9)
        assert len(index.search("common", limit=3, timeout=30.0)) == 3, "usable afterwards"

    def test_close_is_idempotent(self, index: IndexBackend) -> None:
        """close() may be called twice.

        If this fails, guard close() against a second call.
        """
        sync_text(index, "MEMORY.md", MEMORY)
        index.close()
        index.close()
