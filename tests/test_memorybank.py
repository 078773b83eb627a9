"""Our answer key to the MemoryBank probing questions (``tests/data/memorybank-answers``):
well formed, covering every question, and every reference resolving in the shared data; and
the pieces of ``bench/bench_memorybank.py`` that the figures depend on."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest
from tests.conftest import TEST_DATA

KEY = TEST_DATA / "memorybank-answers" / "answers.jsonl"


@pytest.fixture(scope="module")
def bank() -> Iterator[ModuleType]:
    """``bench/_memorybank.py``, imported from the checkout (bench/ is not installed)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(TEST_DATA.parents[1]))
        yield importlib.import_module("bench._memorybank")


@pytest.fixture(scope="module")
def bench_module(bank: ModuleType) -> ModuleType:
    return importlib.import_module("bench.bench_memorybank")


@pytest.fixture(scope="module")
def dialogues(bank: ModuleType, shared_file: Callable[[str], Any]) -> Any:
    shared_file(bank.BANK)
    shared_file(bank.QUESTIONS)
    return bank.read_dialogues()


def test_every_record_is_well_formed(bank: ModuleType) -> None:
    """Each line has the README's fields; an answerable one has an answer, match strings and
    evidence references of the form ``{"date": "YYYY-MM-DD", "turn": "<n>q|r"}``."""
    records = bank.read_key(KEY)
    assert len(records) == 100
    seen = set()
    for record in records:
        where = f"{record.get('user')} {record.get('question')}"
        assert (record["user"], record["question"]) not in seen, f"{where} twice"
        seen.add((record["user"], record["question"]))
        assert re.fullmatch(r"[0-9a-f]{8}", record["sha"]), where
        if not record["answerable"]:
            assert record["reason"], where
            continue
        assert record["answer"], where
        assert record["match"], where
        assert record["evidence"], where
        assert all(m.strip() == m and m for m in record["match"]), where
        for ref in record["evidence"]:
            assert re.fullmatch(r"\d{4}-\d\d-\d\d", ref["date"]), where
            assert re.fullmatch(r"\d+[qr]", ref["turn"]), where
    unanswerable = [r for r in records if not r["answerable"]]
    assert [(r["user"], r["question"]) for r in unanswerable] == [("John Zhang", 4)]


def test_the_key_covers_every_probing_question(bank: ModuleType, dialogues: Any) -> None:
    """One record per question of ``probing_questions_en.jsonl`` and no other; when this
    fails the shared file gained or lost questions: label the new ones by the README's rule."""
    asked = {
        (user, i) for user, questions in dialogues.questions.items() for i in range(len(questions))
    }
    keyed = {(r["user"], r["question"]) for r in bank.read_key(KEY)}
    assert len(asked) == 100
    assert keyed == asked


def test_every_reference_resolves(bank: ModuleType, dialogues: Any) -> None:
    """Each question still has its text (its ``sha``) and each evidence turn exists; when
    not, the shared files changed: relabel the questions listed."""
    key = bank.load(dialogues, KEY)
    assert key.missing == []
    assert key.changed == []
    assert len(key.answers) == 100
    assert len(key.answerable) == 99


def test_match_strings_come_from_the_evidence(bank: ModuleType, dialogues: Any) -> None:
    """Every match string is in an evidence turn (the answer is the dialogue's, not ours),
    is not in the question (a hit repeating the question would count), unless the record
    ties the hit to a day, and that day is one of the evidence's."""
    for answer in bank.load(dialogues, KEY).answerable:
        where = f"{answer.user} {answer.index}"
        for needle in answer.match:
            assert any(bank.contains(text, needle) for text in answer.evidence_text), (
                f"{where}: {needle!r} is in no evidence turn"
            )
            if answer.hit_date is None:
                assert not bank.contains(answer.question, needle), f"{where}: {needle!r}"
        if answer.hit_date is not None:
            assert answer.hit_date in {date for date, _ in answer.evidence}, where


def test_a_match_is_whole_words_in_any_case(bank: ModuleType) -> None:
    assert bank.contains("It was really HOT today", "hot")
    assert not bank.contains("I like photography", "hot")
    assert bank.contains("bands like AC/DC and Guns N' Roses.", "guns n' roses")
    assert bank.contains("One Hundred\nYears of  Solitude", "One Hundred Years of Solitude")
    assert not bank.contains("functions", "function")
    assert bank.contains("- Friend, today is the user's birthday.", "is my birthday")
    assert bank.contains("- The user told me about it", "told me")
    assert not bank.contains("- Other birthday activities include gifts", "is my birthday")


def test_a_hit_holds_the_answer_by_the_rule(bank: ModuleType) -> None:
    answer = bank.Answer("Jack", 0, "?", True, "x", ["Taylor Swift"], hit_date="2023-04-27")
    assert bank.hit_holds(answer, "- songs by Taylor Swift", {"2023-04-27"})
    assert not bank.hit_holds(answer, "- songs by Taylor Swift", {"2023-05-05"})
    assert not bank.hit_holds(answer, "- songs by Ed Sheeran", {"2023-04-27"})
    undated = bank.Answer("Emily", 0, "?", True, "x", ["Wandering Earth", "x y"])
    assert bank.hit_holds(undated, "Emily likes The Wandering Earth", set())


def test_the_replay_gets_the_days_in_order_with_their_dates(bench_module: ModuleType) -> None:
    """Each turn is a query then its response, the days sorted, each message stamped on
    its own day (the daily logs are named by these dates)."""
    days = {
        "2023-04-28": [{"query": "q2", "response": "r2"}],
        "2023-04-27": [{"query": "q0", "response": "r0"}, {"query": "q1", "response": "r1"}],
    }
    messages = bench_module.conversation(days)
    assert [(m["role"], m["content"]) for m in messages] == [
        ("user", "q0"),
        ("assistant", "r0"),
        ("user", "q1"),
        ("assistant", "r1"),
        ("user", "q2"),
        ("assistant", "r2"),
    ]
    stamps = [m["timestamp"] for m in messages]
    assert stamps == sorted(stamps)
    assert [s[:10] for s in stamps] == ["2023-04-27"] * 4 + ["2023-04-28"] * 2


def test_a_hit_is_dated_by_itself_and_the_places_it_stands_for(bench_module: ModuleType) -> None:
    from harnessmem import SearchHit

    hit = SearchHit("MEMORY.md", 3, 3, "- x", 1.0, also=("memory/2023-04-27.md:5-5",))
    assert bench_module._dates_of(hit) == {"2023-04-27"}
    daily = SearchHit("memory/2023-05-02.md", 4, 4, "- y", 1.0, date="2023-05-02")
    assert bench_module._dates_of(daily) == {"2023-05-02"}


def test_one_user_replayed_and_asked(
    bank: ModuleType, bench_module: ModuleType, dialogues: Any
) -> None:
    """The benchmark's path end to end on the first user: every answerable question of that
    user is asked on both sides; what is found is also in memory (search reads nothing else)."""
    key = bank.load(dialogues, KEY)
    results = bench_module.evaluate(dialogues, key, users=1)
    first = sorted({a.user for a in key.answerable})[0]
    ours, plain = results.ours, results.plain
    assert results.users == 1
    assert ours["all"].asked == plain["all"].asked == results.kept.asked
    assert ours["all"].asked == sum(1 for a in key.answerable if a.user == first)
    named = [
        a for a in key.answerable if a.user == first and re.search(r"(April|May) \d", a.question)
    ]
    assert ours["named"].asked == ours["within"].asked == plain["within"].asked == len(named)
    assert results.facts > 0
    assert ours["all"].answered <= results.kept.answered
    assert len(results.misses) == ours["all"].asked - ours["all"].answered


def test_the_day_a_question_names(bench_module: ModuleType) -> None:
    assert bench_module.named_day("On May 4th, I shared some books.", 2023) == "2023-05-04"
    assert bench_module.named_day("What did I do on April 30th?", 2023) == "2023-04-30"
    assert bench_module.named_day("I mentioned on May 2nd that I went", 2023) == "2023-05-02"
    assert bench_module.named_day("What may I have said?", 2023) is None
