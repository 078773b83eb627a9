"""The query builder and CJK segmentation (``harnessmem.backends._fts``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessmem.backends.fulltext import (
    MAX_QUERY_CHARS,
    NEIGHBOUR_CHARS,
    QueryTerm,
    fts5_expression,
    neighbour_texts,
    parse_query,
    segment_cjk,
    select_terms,
)
from harnessmem.backends.sqlite import TOKENIZER
from harnessmem.testing.index_suite import NASTY_QUERIES


def _texts(text: str, **kwargs: bool) -> list[str]:
    return [term.text for term in parse_query(text, **kwargs)]


def test_words_are_lowered_and_stop_words_dropped() -> None:
    assert _texts("When did Caroline's group MEET?") == ["caroline", "group", "meet"]
    assert _texts("what is it") == ["what", "is", "it"], "only stop words: keep them"
    assert _texts("what is it", keep_stop_words=True) == ["what", "is", "it"]
    assert _texts("the cat and the hat") == ["cat", "hat"], "duplicates once"


def test_joined_tokens_become_phrases() -> None:
    terms = parse_query("gpt-4o on 2026-11-30 via node.js, mail a@b.io")
    assert [t.tokens for t in terms] == [
        ("gpt", "4o"),
        ("2026", "11", "30"),
        ("via",),
        ("node", "js"),
        ("mail",),
        ("a", "b", "io"),
    ]


def test_cjk_runs_become_bigrams() -> None:
    assert [t.tokens for t in parse_query("寿司")] == [("寿司",)]
    assert [t.tokens for t in parse_query("東京都")] == [("東京", "京都")], "a word: one phrase"
    assert [t.tokens for t in parse_query("東京タワー")] == [
        ("東京",),
        ("京タ",),
        ("タワ",),
        ("ワー",),
    ]
    long_run = parse_query("我想吃好吃的寿司")  # a sentence: each bigram is its own term
    assert all(len(t.tokens) == 1 for t in long_run)
    assert len(long_run) == 7
    (single,) = parse_query("司")
    assert single.prefix
    assert fts5_expression([single]) == '"司" *'
    mixed = parse_query("Kyoto京都trip")
    assert [t.tokens for t in mixed] == [("kyoto",), ("京都",), ("trip",)]


def test_normalisation_and_length_cap() -> None:
    full_width = "\uff21\uff22\uff23 \uff43\uff41\uff46\u00e9"  # "ABC café", full-width
    assert _texts(full_width) == ["abc", "café"], "full-width forms fold (NFKC)"
    assert _texts("tab\tworld\x00nul") == ["tab", "world", "nul"]
    many = parse_query("x" * (MAX_QUERY_CHARS * 3))
    assert len(many[0].text) == MAX_QUERY_CHARS


def test_expressions_by_mode() -> None:
    terms = parse_query("aisle seat gpt-4o")
    assert fts5_expression(terms) == '"aisle" OR "seat" OR "gpt 4o"'
    assert fts5_expression(terms, "all") == '"aisle" AND "seat" AND "gpt 4o"'
    assert fts5_expression(terms, "phrase") == '"aisle seat gpt 4o"'
    assert fts5_expression([]) is None
    with pytest.raises(ValueError, match="unknown search mode"):
        fts5_expression(terms, "fuzzy")  # type: ignore[arg-type]


def test_select_terms_keeps_the_rarest_in_query_order() -> None:
    terms = [QueryTerm((w,)) for w in ("common", "rare", "usual", "unique")]
    frequency = {"common": 900, "rare": 3, "usual": 400, "unique": 1}
    chosen = select_terms(terms, 2, lambda t: frequency[t.text])
    assert [t.text for t in chosen] == ["rare", "unique"]
    assert select_terms(terms, 10, lambda t: 0) == terms
    by_length = select_terms(terms, 2)
    assert [t.text for t in by_length] == ["common", "unique"]


def test_segment_cjk() -> None:
    assert segment_cjk("plain text stays") == "plain text stays"
    assert segment_cjk("我喜欢寿司").split() == ["我喜", "喜欢", "欢寿", "寿司", "司"]
    assert segment_cjk("a東b").split() == ["a", "東", "東", "b"]


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    db.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, context, tokenize='{TOKENIZER}')")
    db.execute("INSERT INTO t VALUES ('some words and 寿司 here', '')")
    yield db
    db.close()


@pytest.mark.parametrize("query", NASTY_QUERIES, ids=range(len(NASTY_QUERIES)))
def test_nasty_queries_make_valid_fts5(fts: sqlite3.Connection, query: str) -> None:
    for mode in ("any", "all", "phrase"):
        expression = fts5_expression(parse_query(query, keep_stop_words=mode == "phrase"), mode)  # type: ignore[arg-type]
        if expression is not None:
            fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


@given(text=st.text(max_size=300))
@settings(max_examples=400, deadline=None)
def test_any_text_makes_a_valid_fts5_expression(fts: sqlite3.Connection, text: str) -> None:
    """The property behind "no FTS5 syntax error ever reaches a caller"."""
    for mode in ("any", "all", "phrase"):
        terms = parse_query(text, keep_stop_words=mode == "phrase")
        expression = fts5_expression(terms, mode)  # type: ignore[arg-type]
        if expression is None:
            assert not terms
            continue
        fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()


_CJK_CHARS = st.one_of(
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),  # Han
    st.characters(min_codepoint=0x3041, max_codepoint=0x3096),  # hiragana
    st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),  # Hangul syllables
)


@given(
    before=st.text(alphabet=st.one_of(_CJK_CHARS, st.sampled_from(" ,.ab")), max_size=10),
    word=st.text(alphabet=_CJK_CHARS, min_size=1, max_size=8),
    after=st.text(alphabet=st.one_of(_CJK_CHARS, st.sampled_from(" ,.ab")), max_size=10),
)
@settings(max_examples=300, deadline=None)
def test_a_cjk_word_is_found_inside_any_cjk_text(
    fts: sqlite3.Connection, before: str, word: str, after: str
) -> None:
    """Index and query segment CJK alike: any CJK substring finds its text (all terms)."""
    fts.execute("DELETE FROM t WHERE rowid > 1")
    fts.execute(
        "INSERT INTO t(rowid, content, context) VALUES (2, ?, '')",
        (segment_cjk(before + word + after),),
    )
    expression = fts5_expression(parse_query(word, keep_stop_words=True), "all")
    assert expression is not None
    found = fts.execute("SELECT rowid FROM t WHERE t MATCH ?", (expression,)).fetchall()
    assert (2,) in found


@given(
    rows=st.lists(
        st.tuples(st.text(max_size=3).map(lambda s: s * 400), st.integers(0, 3)), max_size=12
    ),
    ordered=st.booleans(),
)
def test_neighbour_texts_is_the_entry_before_in_its_section(
    rows: list[tuple[str, int]], ordered: bool
) -> None:
    """The text of the entry before in the same section, cut at NEIGHBOUR_CHARS ("" for a
    section's first entry), whether sections run in order or not, texts long or short."""
    if ordered:
        rows = sorted(rows, key=lambda row: row[1])
    contents, sections = [text for text, _ in rows], [section for _, section in rows]
    expected = [
        contents[i - 1][:NEIGHBOUR_CHARS] if i and sections[i] == sections[i - 1] else ""
        for i in range(len(rows))
    ]
    assert neighbour_texts(contents, sections) == expected
    assert (
        neighbour_texts(contents, [0] * len(rows))
        == [
            "",
            *(text[:NEIGHBOUR_CHARS] for text in contents[:-1]),
        ][: len(rows)]
    )
