"""When a logged message was said: noted as the session first sees it, recorded in the
session log as ``said``, and the date the index (and ``search --sessions``) gives it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from harnessmem import MemoryHarness
from harnessmem.cli import main
from harnessmem.compaction import MessageTimes, build_anchor
from harnessmem.index import chunk_session_log
from harnessmem.testing import FakeClock

Message = dict[str, Any]
DAY = 86_400.0
MONDAY = 1_795_424_400.0  # 2026-11-23T09:00:00Z


def _said(text: str) -> list[Message]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": f"noted: {text}"}]


# -- the notes ------------------------------------------------------------------------------------


def test_a_message_keeps_the_time_it_was_first_seen() -> None:
    times = MessageTimes()
    conversation = _said("one")
    times.note(conversation, 100.0)
    conversation += _said("two")
    times.note(conversation, 200.0)
    times.note(conversation, 300.0)  # seen again: no new time
    assert times.said([1, 2, 3, 4], conversation) == [100.0, 100.0, 200.0, 200.0]


def test_positions_continue_below_a_summary_message() -> None:
    times = MessageTimes()
    anchor = build_anchor(
        covers=10, body="## SUMMARY\nearlier", log_path="sessions/s.log.jsonl", first_request="hi"
    )
    tail = _said("eleven")
    times.note([anchor, *tail], 50.0)
    assert times.said([11, 12], tail) == [50.0, 50.0]
    assert times.said([1], [anchor]) == [None]


def test_a_different_message_at_a_noted_position_gets_no_time() -> None:
    times = MessageTimes()
    times.note(_said("one"), 100.0)
    assert times.said([1], [{"role": "user", "content": "something else"}]) == [None]


def test_logged_positions_are_forgotten() -> None:
    times = MessageTimes()
    conversation = _said("one") + _said("two")
    times.note(conversation, 100.0)
    times.forget(2)
    assert len(times) == 2
    assert times.said([1, 3], [conversation[0], conversation[2]]) == [None, 100.0]
    times.note(conversation, 500.0)  # a caller resending its raw history
    assert times.said([1], [conversation[0]]) == [None], "a logged position is not noted again"


# -- the index dates a line by when it was said ---------------------------------------------------


def _line(message: Message, **record: Any) -> str:
    return json.dumps({"seq": 1, "ts": "2026-11-30T10:00:00Z", **record, "message": message})


def test_the_message_s_own_time_wins_then_said_then_the_offload_time() -> None:
    own = {"role": "user", "content": "a", "timestamp": "2026-11-20T08:00:00Z"}
    plain = {"role": "user", "content": "b"}
    text = "\n".join(
        [
            _line(own, said="2026-11-25T08:00:00.000000Z"),
            _line(plain, said="2026-11-25T08:00:00.000000Z"),
            _line(plain),
            _line({**plain, "created_at": 1_795_000_000}),
        ]
    )
    dates = [e.date for e in chunk_session_log("sessions/s.log.jsonl", text)]
    assert dates == ["2026-11-20", "2026-11-25", "2026-11-30", "2026-11-18"]


def test_dates_are_days_of_the_workspace_timezone() -> None:
    late = {"role": "user", "content": "late", "timestamp": "2026-11-29T23:30:00Z"}
    naive = {"role": "user", "content": "as written", "timestamp": "2026-11-29T23:30:00"}
    text = _line(late) + "\n" + _line(naive, said="2026-11-29T23:30:00.000000Z")
    assert [e.date for e in chunk_session_log("s.log.jsonl", text)] == ["2026-11-29"] * 2
    paris = [e.date for e in chunk_session_log("s.log.jsonl", text, "Europe/Paris")]
    assert paris == ["2026-11-30", "2026-11-29"], "an offset is converted, a naive time is kept"


# -- a live session, end to end -------------------------------------------------------------------


def test_search_sessions_labels_a_message_with_the_day_it_was_said(tmp_path: Path) -> None:
    """Said on Monday, compacted on Thursday: the log line and the search say Monday."""
    clock = FakeClock(MONDAY)
    ws = tmp_path / "ws"
    with MemoryHarness.open(
        ws, clock=clock, compaction={"trigger_messages": 8, "keep_messages": 2}
    ) as harness:
        session = harness.session("s1")
        context: list[Message] = []
        for turn, text in enumerate(
            ["the otter swims", "the heron waits", "the crab hides", "the gull cries"]
        ):
            if turn == 2:
                clock.advance(3 * DAY)  # Thursday
            context.append({"role": "user", "content": text})
            context = session.before_reasoning(context)
            context.append({"role": "assistant", "content": f"noted: {text}"})
            session.after_call(context)
        context.append({"role": "user", "content": "what do you remember?"})
        session.before_reasoning(context)
    lines = [
        json.loads(line) for line in (ws / "sessions" / "s1.log.jsonl").read_text().splitlines()
    ]
    otter = next(line for line in lines if line["message"]["content"] == "the otter swims")
    assert otter["ts"].startswith("2026-11-26"), "offloaded on Thursday"
    assert otter["said"] == "2026-11-23T09:00:00.000000Z", "said on Monday"
    crab = next(line for line in lines if line["message"]["content"] == "the crab hides")
    assert crab["said"].startswith("2026-11-26")
    result = CliRunner().invoke(main, ["search", "--sessions", "otter", "-w", str(ws)])
    assert result.exit_code == 0, result.output
    assert "sessions/s1.log.jsonl:1 · 2026-11-23" in result.output
