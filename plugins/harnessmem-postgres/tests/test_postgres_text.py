"""Text preparation and row logic of the postgres backend: pure, no server needed."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from harnessmem.backends import IndexEntry
from harnessmem.backends.fulltext import parse_query
from harnessmem.testing.index_suite import NASTY_QUERIES
from harnessmem_postgres._rows import StoredEntry, diff_entries, neighbour_scores
from harnessmem_postgres._text import clean, document_text, fold, term_tsquery, tsquery_text

# What tsquery_text may produce: quoted lexemes of letters and digits, operators, groups.
_LEXEME = r"'[^\W_]+'(?::\*)?"
_SAFE = re.compile(rf"^(?:{_LEXEME}|<->|[|&()]|\s)+$")


def test_fold_removes_latin_greek_cyrillic_accents_only() -> None:
    assert fold("café naïve Ångström") == "cafe naive Angstrom"
    assert fold("Αθήνα") == "Αθηνα"
    assert fold("\u0451") == "\u0435", "Cyrillic yo folds to ie"
    assert fold("ガッコウ") == "ガッコウ", "the kana voicing mark changes the letter: kept"
    assert fold("서울") == "서울", "Hangul syllables survive decomposition"
    assert fold("\uff21\uff22\uff11") == "AB1", "full-width forms as users type them"


def test_document_text_matches_how_queries_are_cut() -> None:
    assert document_text("- switched to gpt-4o on 2026-11-30!") == (
        "switched to gpt 4o on 2026 11 30"
    )
    assert document_text("我喜欢寿司") == " 我喜 喜欢 欢寿 寿司 司 "
    assert document_text("Kyoto京都trip") == "Kyoto 京都 都 trip"


def test_clean_makes_text_storable() -> None:
    assert clean("plain") == "plain"
    assert clean("nul\x00") == "nul\ufffd"
    assert clean("lone \ud800 surrogate é") == "lone ? surrogate é"


def test_terms_become_quoted_lexemes() -> None:
    terms = parse_query("gpt-4o 寿司 司 Kyoto")
    assert [term_tsquery(t) for t in terms] == ["'gpt' <-> '4o'", "'寿司'", "'司':*", "'kyoto'"]
    assert (
        tsquery_text(terms, "any") == "( 'gpt' <-> '4o' ) | ( '寿司' ) | ( '司':* ) | ( 'kyoto' )"
    )
    assert (
        tsquery_text(terms, "all") == "( 'gpt' <-> '4o' ) & ( '寿司' ) & ( '司':* ) & ( 'kyoto' )"
    )
    assert tsquery_text(terms, "phrase") == "'gpt' <-> '4o' <-> '寿司' <-> '司' <-> 'kyoto'"
    assert tsquery_text([], "any") is None


@given(st.one_of(st.text(max_size=80), st.sampled_from(NASTY_QUERIES)))
def test_no_user_text_becomes_tsquery_syntax(text: str) -> None:
    """Whatever the text, the tsquery holds only quoted letters/digits and our operators."""
    for mode in ("any", "all", "phrase"):
        terms = parse_query(text, keep_stop_words=mode == "phrase")
        expression = tsquery_text(terms, mode)  # type: ignore[arg-type]
        if expression is not None:
            assert _SAFE.match(expression), expression


def _stored(n: int, content: str, seq: int, start: int) -> StoredEntry:
    return StoredEntry(n, content, "", seq, 0, start, start, None)


def test_diff_keeps_unchanged_rows_and_moves_lines() -> None:
    stored = [_stored(1, "- a", 0, 1), _stored(2, "- b", 1, 2), _stored(3, "- gone", 2, 3)]
    entries = [
        IndexEntry("f.md", 1, 1, "- new"),
        IndexEntry("f.md", 2, 2, "- a"),
        IndexEntry("f.md", 3, 3, "- b"),
    ]
    diff = diff_entries(stored, entries)
    assert diff.gone == [3]
    assert diff.moved == [(1, 1, 0, 2, 2, None), (2, 2, 0, 3, 3, None)]
    assert diff.added == [(0, entries[0])]


def test_diff_of_duplicated_text_matches_one_row_each() -> None:
    stored = [_stored(1, "- same", 0, 1)]
    entries = [IndexEntry("f.md", 1, 1, "- same"), IndexEntry("f.md", 2, 2, "- same")]
    diff = diff_entries(stored, entries)
    assert (diff.gone, diff.moved) == ([], [])
    assert diff.added == [(1, entries[1])]


def test_neighbours_lend_only_within_a_section() -> None:
    scores = {1: 1.0, 2: 1.0, 3: 1.0}
    places = [(1, "f.md", 0, 1), (2, "f.md", 1, 1), (3, "f.md", 2, 2)]
    neighbour_scores(places, scores, 0.5)
    assert scores == {1: 1.5, 2: 1.5, 3: 1.0}
