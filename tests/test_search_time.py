"""A time in the query: the days it names rank first, the time words need not match."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from harnessmem import MemoryHarness
from harnessmem.memory.timequery import query_time
from harnessmem.settings import HarnessSettings
from harnessmem.testing import FakeClock

NOW = datetime(2023, 5, 10, 12, tzinfo=UTC)  # a Wednesday


@pytest.mark.parametrize(
    ("query", "since", "until", "rest"),
    [
        ("what did I do last week", date(2023, 5, 1), date(2023, 5, 7), "what did I do"),
        (
            "what did we discuss yesterday",
            date(2023, 5, 9),
            date(2023, 5, 9),
            "what did we discuss",
        ),
        ("On May 4th, what did I eat?", date(2023, 5, 4), date(2023, 5, 4), "what did I eat?"),
        ("what did I eat on the 4th of May", date(2023, 5, 4), date(2023, 5, 4), "what did I eat"),
        ("what happened on Thursday", date(2023, 5, 4), date(2023, 5, 4), "what happened"),
        ("in May 2023 what did I buy", date(2023, 5, 1), date(2023, 5, 31), "what did I buy"),
        ("since last month, any news?", date(2023, 4, 1), None, "any news?"),
        ("news since March", date(2023, 3, 1), None, "news"),
        # A year-less day after today is last year's.
        (
            "what did I plan on December 24th",
            date(2022, 12, 24),
            date(2022, 12, 24),
            "what did I plan",
        ),
        # A day named outright anchors the relative words that come with it.
        (
            "What was Tim's issue last week, as mentioned on November 6, 2023?",
            date(2023, 11, 6),
            date(2023, 11, 6),
            "What was Tim's issue last week, as mentioned?",
        ),
        (
            "Where was the picture taken on December 1,2023?",
            date(2023, 12, 1),
            date(2023, 12, 1),
            "Where was the picture taken?",
        ),
    ],
)
def test_the_days_a_query_names(query: str, since: date, until: date | None, rest: str) -> None:
    found = query_time(query, NOW)
    assert found is not None
    assert (found.since, found.until, found.query) == (since, until, rest)


@pytest.mark.parametrize(
    "query",
    [
        "May I ask about the ferry?",
        "we met Sunny at the march",
        "staging database port",
        "a second opinion",
    ],
)
def test_words_that_only_look_like_time_name_none(query: str) -> None:
    assert query_time(query, NOW) is None


LOGS = {
    "2023-05-04": "## Memory Flush — 2023-05-04T19:00:00Z · session s\n"
    "- The user had ramen with Ana at Menya.\n- The user's knee hurt after the run.\n",
    "2023-04-20": "## Memory Flush — 2023-04-20T19:00:00Z · session s\n"
    "- The user ate pizza and talked about the knee doctor.\n",
}


@pytest.fixture
def harness(tmp_path: Path) -> MemoryHarness:
    settings = HarnessSettings.load(
        workspace={"url": str(tmp_path / "ws")}, maintenance={"enabled": False}
    )
    clock = FakeClock(NOW.timestamp())
    opened = MemoryHarness(settings, clock=clock)
    for day, text in LOGS.items():
        opened.workspace.write_text(f"memory/{day}.md", text)
    opened.workspace.write_text("MEMORY.md", "## Facts\n- The user's favourite dish is ramen.\n")
    return opened


def test_the_named_day_ranks_first_and_its_facts_fill_in(harness: MemoryHarness) -> None:
    with harness:
        hits = harness.search("On May 4th, what about my knee?", limit=5)
        assert [h.path for h in hits[:2]] == ["memory/2023-05-04.md"] * 2
        # The rest of the ranking follows: nothing is left out for want of a date.
        assert {h.path for h in hits} >= {"memory/2023-04-20.md"}
        knee = harness.search("what about my knee yesterday", limit=5)
        assert knee[0].path == "memory/2023-04-20.md", "no entry of that day: the whole ranking"


def test_explicit_since_until_win_and_the_setting_turns_it_off(
    harness: MemoryHarness, tmp_path: Path
) -> None:
    with harness:
        hits = harness.search("On May 4th, knee", since="2023-04-01", until="2023-04-30")
        assert [h.path for h in hits] == ["memory/2023-04-20.md"]
    settings = HarnessSettings.load(
        workspace={"url": str(tmp_path / "ws")},
        maintenance={"enabled": False},
        index={"time_in_query": False},
    )
    with MemoryHarness(settings, clock=FakeClock(NOW.timestamp())) as plain:
        hits = plain.search("On May 4th, what did I eat?", limit=5)
        assert all(h.path != "memory/2023-05-04.md" or "ramen" in h.content for h in hits)
        assert len(hits) < 3, "without it the day's other facts are not added"


def test_the_agent_tool_searches_by_the_time_it_names(harness: MemoryHarness) -> None:
    with harness:
        out = harness.session("chat").call_tool(
            "memory_search", {"query": "what did I eat on May 4th"}
        )
        assert "ramen with Ana" in out
        first = out.split("\n\n")[1]
        assert first.startswith("[1] memory/2023-05-04.md:2 · 2023-05-04"), out
        assert "pizza" not in out, "that day's facts come before other days' looser matches"


SESSION_LOG = [
    {"said": "2023-04-20T10:00:00Z", "message": {"role": "user", "content": "My knee hurt."}},
    {"said": "2023-04-20T10:01:00Z", "message": {"role": "assistant", "content": "Rest it."}},
    {"said": "2023-05-04T10:00:00Z", "message": {"role": "user", "content": "Knee is fine."}},
]


def test_session_search_reads_the_day_too(harness: MemoryHarness) -> None:
    log = "".join(json.dumps(record) + "\n" for record in SESSION_LOG)
    harness.workspace.write_text("sessions/chat.log.jsonl", log)
    with harness:
        out = harness.session("chat").call_tool("session_search", {"query": "knee on May 4th"})
        assert out.index("Knee is fine") < out.index("My knee hurt"), out
        plain = harness.search("knee", source="sessions")
        assert plain[0].content == "user: My knee hurt.", "without a day: the ranking as it was"


def test_recall_finds_the_day_the_user_names(tmp_path: Path) -> None:
    settings = HarnessSettings.load(
        workspace={"url": str(tmp_path / "ws")},
        maintenance={"enabled": False},
        context={"inject": "manual", "recall": True},
    )
    with MemoryHarness(settings, clock=FakeClock(NOW.timestamp())) as opened:
        for day, text in LOGS.items():
            opened.workspace.write_text(f"memory/{day}.md", text)
        question = [{"role": "user", "content": "How was my knee on Thursday?"}]
        system = str(opened.session("s").before_reasoning(question)[0]["content"])
        assert "knee hurt after the run" in system, system
        if "knee doctor" in system:
            assert system.index("knee hurt after the run") < system.index("knee doctor")
