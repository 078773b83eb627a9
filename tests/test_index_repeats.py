"""Search results without repeats (:mod:`harnessmem.index.repeats`)."""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harnessmem import MemoryHarness
from harnessmem.backends.base import SearchHit
from harnessmem.examples import example_path
from harnessmem.index.repeats import collapse_repeats, fact_words, same_text
from harnessmem.replay import ReplayClock, load_transcript, replay


def _hit(path: str, line: int, content: str, score: float) -> SearchHit:
    return SearchHit(path, line, line, content, score)


def test_a_repeat_is_folded_into_the_better_hit() -> None:
    hits = [
        _hit("MEMORY.md", 3, "- Maya prefers small pull requests.", 9.0),
        _hit("memory/2026-05-01.md", 4, "- Jonas reviews every migration.", 8.0),
        _hit("memory/2026-05-01.md", 7, "- Maya prefers small pull requests.", 7.0),
        _hit("memory/2026-05-02.md", 2, "* Maya prefers small pull requests", 6.0),
    ]
    out = collapse_repeats(hits)
    assert [hit.content for hit in out] == [hits[0].content, hits[1].content]
    assert out[0].also == ("memory/2026-05-01.md:7-7", "memory/2026-05-02.md:2-2")
    assert out[0].score == 9.0
    assert out[1].also == ()


def test_different_numbers_and_more_facts_are_not_repeats() -> None:
    room = fact_words("- The meeting is in room 101 on the second floor.")
    assert not same_text(fact_words("- The meeting is in room 102 on the second floor."), room)
    chunk = fact_words("- Maya prefers small PRs.\n- Releases ship on Thursdays at 14:00.")
    line = fact_words("- Maya prefers small PRs.")
    assert not same_text(chunk, line), "a hit that says more stays"
    assert not same_text(fact_words("- Ship it"), fact_words("- Ship it now, please, today"))


@pytest.mark.parametrize(
    ("one", "other"),
    [
        # A newcomer's search hid reservation AQLBTL under OI5L9G (85% of the words alike).
        (
            "- The user's reservation AQLBTL is a round trip from JFK to SFO in economy.",
            "- The user's reservation OI5L9G is a round trip from JFK to SFO in economy.",
        ),
        # Words split on "_": the ids differ in their parts only.
        (
            "- The user's user id is omar_rossi_1241 and they prefer aisle seats.",
            "- The user's user id is omar_davis_3817 and they prefer aisle seats.",
        ),
        ("- We ship v0.9.0 on Thursday with Jonas.", "- We ship v0.9.1 on Thursday with Jonas."),
    ],
)
def test_facts_that_differ_in_an_identifier_are_kept_apart(one: str, other: str) -> None:
    assert not same_text(fact_words(one), fact_words(other))
    assert not same_text(fact_words(other), fact_words(one))
    hits = [_hit("memory/2026-05-01.md", 1, one, 9.0), _hit("memory/2026-05-01.md", 2, other, 8.0)]
    assert len(collapse_repeats(hits)) == 2
    assert same_text(fact_words(one), fact_words(one.replace("- ", "* "))), "the same fact folds"


def test_limit_counts_distinct_hits() -> None:
    hits = [
        _hit(f"memory/2026-05-0{n}.md", 1, "- Maya maintains tidewater.", 9 - n)
        for n in range(1, 4)
    ]
    hits.append(_hit("MEMORY.md", 9, "- Jonas is the release manager.", 1.0))
    assert [hit.path for hit in collapse_repeats(hits, 2)] == ["memory/2026-05-01.md", "MEMORY.md"]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryHarness]:
    root = tmp_path_factory.mktemp("example")
    clock = ReplayClock()
    with MemoryHarness.open(root / "ws", clock=clock, maintenance={"enabled": False}) as harness:
        replay(harness, load_transcript(example_path()), session_id="tidewater-week", clock=clock)
        yield harness


@pytest.mark.parametrize(
    "query",
    [
        "staging database",
        "Jonas",
        "release",
        "migration index",
        "Brest timeout",
        "PyPI token",
        "fixtures epoch",
        "Maya",
        "tests",
        "deploy",
    ],
)
def test_no_top_5_on_the_example_holds_a_fact_twice(example: MemoryHarness, query: str) -> None:
    """The example consolidates its logs into MEMORY.md: without the collapse, every fact
    would come back twice. No two of the top 5 may say the same."""
    hits = example.search(query, limit=5)
    assert hits
    words = [fact_words(hit.content) for hit in hits]
    for i, a in enumerate(words):
        for j, b in enumerate(words):
            assert i == j or not same_text(a, b), (hits[i].content, hits[j].content)


def test_the_example_lists_where_else_a_fact_is(example: MemoryHarness) -> None:
    (hit, *_) = example.search("staging database PostgreSQL port", limit=5)
    assert "5433" in hit.content
    places = {hit.path, *(where.split(":")[0] for where in hit.also)}
    assert "MEMORY.md" in places
    assert any(place.startswith("memory/") for place in places)


def _same_text_as_it_was(repeat: frozenset[str], kept: frozenset[str]) -> bool:
    """The rule as first written: the numbers and codes of ``repeat`` found per pair."""
    if not repeat:
        return not kept
    exact = {w for w in repeat if w.startswith("#") or any(c.isdigit() for c in w)}
    if not exact <= kept:
        return False
    if len(repeat) < 4:
        return repeat == kept
    return len(repeat & kept) / len(repeat) >= 0.85


_WORDS = st.frozensets(
    st.sampled_from(
        ["ship", "thursday", "v0.9.0", "#kx81pq", "port", "5433", "6432", "½", "ⅻ", "三", "a1"]
        + [f"w{n}" for n in range(6)]
    ),
    max_size=9,
)


@given(_WORDS, _WORDS)
def test_the_repeat_rule_is_the_rule_as_first_written(
    repeat: frozenset[str], kept: frozenset[str]
) -> None:
    """``same_text`` finds each hit's numbers once (collapse_repeats compares every pair):
    the verdicts are those of the rule as it was written, whatever the words."""
    assert same_text(repeat, kept) == _same_text_as_it_was(repeat, kept)


def _fact_words_as_it_was(text: str) -> frozenset[str]:
    """fact_words before its shortcut for plain ASCII: NFKC and the code search on every text."""
    text = unicodedata.normalize("NFKC", re.sub(_MARKER_PATTERN, "", text, flags=re.MULTILINE))
    codes = {"#" + code.casefold() for code in _CODE_FORMS.findall(text)}
    words = frozenset(re.findall(r"[^\W_]+", text.casefold()))
    return (
        words - {"the", "a", "an", "and", "of", "to", "is", "in", "on", "user", "user's"}
    ) | codes


_MARKER_PATTERN = r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?"
_CODE_FORMS = re.compile(
    r"(?<![\w.-])(?:[A-Z][A-Z0-9]{4,}|[A-Za-z0-9]*\d[A-Za-z0-9]*|\w+_[\w.]+|v?\d+(?:\.\d+)+)(?![\w-])"
)
_PIECES = [
    "Ship", "it", "on", "Thursday", "v0.9.0", "AQLBTL", "OI5L9G", "omar_rossi_1241", "port",
    "5433", "½", "Ⅻ", "三", "café", "\uff21\uff22\uff23\uff24\uff25", "room", "101", "the",
    "user's", "-", "1.", "a_b",
    "ABCDE", "ABCD", "x2", "²", "\n- ", "[x]", ".",
    "\t", "\r", "\x1c", "\x0c*", "AbCDEFg", "it's", "e-mail", "ab\x7fcd", "",
]  # fmt: skip


@given(st.lists(st.sampled_from(_PIECES), max_size=14))
def test_fact_words_are_the_words_as_first_found(pieces: list[str]) -> None:
    """The shortcut for plain ASCII (no NFKC, no code search without a digit, an underscore
    or five capitals) finds the words the full treatment finds, and the same numbers."""
    text = "- " + " ".join(pieces)
    assert fact_words(text) == _fact_words_as_it_was(text)
    assert fact_words(text.lstrip("- ")) == _fact_words_as_it_was(text.lstrip("- "))


def _collapse_as_it_was(hits: list[SearchHit], limit: int | None = None) -> list[SearchHit]:
    """collapse_repeats as first written: each hit compared with every kept hit in turn."""
    kept: list[tuple[SearchHit, frozenset[str], list[str]]] = []
    for hit in hits:
        words = fact_words(hit.content)
        home = next((entry for entry in kept if same_text(words, entry[1])), None)
        if home is not None:
            home[2].append(f"{hit.path}:{hit.start_line}-{hit.end_line}")
            home[2].extend(hit.also)
            continue
        kept.append((hit, words, list(hit.also)))
    out = [
        dataclasses.replace(hit, also=tuple(dict.fromkeys(also))) if also else hit
        for hit, _, also in kept
    ]
    return out if limit is None else out[:limit]


_FACT = st.lists(st.sampled_from(["maya", "ships", "v0.9.0", "port", "5433", "w1", "w2", "w3"]
                                 + [f"x{n}" for n in range(4)] + ["on", "Friday", "AQLBTL"]),
                 max_size=12)  # fmt: skip


@given(st.lists(_FACT, max_size=30), st.one_of(st.none(), st.integers(1, 12)))
def test_collapse_finds_the_repeats_comparing_every_pair_finds(
    facts: list[list[str]], limit: int | None
) -> None:
    """collapse_repeats looks up only the kept hits a hit can repeat (those holding one of
    its rarest words): the result is the one of comparing it with every kept hit."""
    hits = [
        _hit(f"memory/2026-05-{n % 28 + 1:02d}.md", n, "- " + " ".join(words), 30.0 - n)
        for n, words in enumerate(facts)
    ]
    assert collapse_repeats(hits, limit) == _collapse_as_it_was(hits, limit)
