"""Replays: loading transcripts, the turn-by-turn loop, the bundled example, real tau-bench runs,
and ``harnessmem replay``."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from harnessmem import MemoryHarness
from harnessmem.cli import main
from harnessmem.errors import MessageFormatError
from harnessmem.examples import example_path
from harnessmem.messages import pair_tool_calls
from harnessmem.replay import (
    ReplayClock,
    load_transcript,
    message_time,
    read_transcript,
    replay,
)
from harnessmem.settings import HarnessSettings
from harnessmem.tokens import TokenCounter

TAU = "tau-bench/gpt-4o-airline-dev.json"
#: Two LoCoMo-shaped conversations written for these tests (three dated sessions, and two).
LOCOMO_CHAT = Path(__file__).resolve().parent / "data" / "locomo-chat.json"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def clock() -> ReplayClock:
    return ReplayClock()


@pytest.fixture
def harness(tmp_path: Path, clock: ReplayClock) -> Iterator[MemoryHarness]:
    settings = HarnessSettings.load(
        None, workspace={"url": str(tmp_path / "ws")}, maintenance={"enabled": False}
    )
    with MemoryHarness(settings, clock=clock) as harness:
        yield harness


# -- loading ------------------------------------------------------------------------------------

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a travel agent."},
    {"role": "user", "content": "I prefer aisle seats."},
    {"role": "assistant", "content": "Noted."},
]


def test_reads_a_json_list_and_json_lines(tmp_path: Path) -> None:
    listed = tmp_path / "a.json"
    listed.write_text(json.dumps(MESSAGES))
    lines = tmp_path / "a.jsonl"
    lines.write_text("\n".join(json.dumps(m) for m in MESSAGES) + "\n\n")
    assert load_transcript(listed) == MESSAGES
    assert load_transcript(lines) == MESSAGES


def test_reads_wrapped_runs_and_other_formats(tmp_path: Path) -> None:
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps([{"task_id": 1, "traj": MESSAGES}, {"messages": MESSAGES}]))
    assert load_transcript(runs) == MESSAGES + MESSAGES, "a list of runs is joined in order"
    anthropic = tmp_path / "anthropic.json"
    anthropic.write_text(
        json.dumps(
            {
                "system": "Be brief.",
                "messages": [
                    {"role": "user", "content": "Search it."},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "s", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}],
                    },
                ],
            }
        )
    )
    roles = [m["role"] for m in load_transcript(anthropic)]
    assert roles == ["system", "user", "assistant", "tool"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"role": "user", "content": "hi"}', "is not valid JSON: Expecting ',' delimiter"),
        ('{"role": "user", "content": "a"}\n{"role": oops}\n', "line 2 is not valid JSON"),
        ("", "is empty"),
        ("[]", "holds no messages"),
        ('[{"role": "robot", "content": "x"}]', "message 0: role 'robot'"),
        ('{"turns": []}', "cannot find messages"),
    ],
)
def test_bad_files_are_one_error_naming_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(MessageFormatError, match=message) as info:
        load_transcript(path)
    assert str(path) in info.value.message


def test_a_file_in_no_known_format_is_one_error_listing_the_formats(tmp_path: Path) -> None:
    """Items without a role: one line that says so (not "role None" once per item), what
    the file looks like, the formats that are read; and no workspace is made."""
    path = tmp_path / "turns.json"
    path.write_text(json.dumps([{"speaker": "Ana", "text": f"hi {n}"} for n in range(5)]))
    code, out, err = _run("replay", str(path), "-w", str(tmp_path / "ws"))
    assert code == 4
    assert out == ""
    error, hint = err.splitlines()
    assert error.endswith(
        "turns.json: none of its 5 items is a chat message (none has a 'role'); "
        "the file is a JSON list of 5 objects, the first with keys speaker, text"
    )
    assert "role None" not in err
    assert hint.startswith("hint: harnessmem replays OpenAI chat messages")
    for shape in ("OpenAI chat messages", "Anthropic", "SWE-agent", "tau-bench", "LoCoMo"):
        assert shape in err, shape
    assert not (tmp_path / "ws").exists()
    lines = tmp_path / "runs.jsonl"
    lines.write_text('{"task": 1, "turns": []}\n{"task": 2, "turns": []}\n')
    with pytest.raises(MessageFormatError) as info:
        load_transcript(lines)
    assert "the file is JSON Lines of 2 objects, the first with keys task, turns" in str(info.value)


def test_reads_a_locomo_file_one_conversation_at_a_time() -> None:
    first = read_transcript(LOCOMO_CHAT)
    assert (first.conversation, first.conversations) == ("chat-1", ("chat-1", "chat-2"))
    assert first.speakers == ("Ines", "Tomas")
    assert len(first.messages) == 11, "the session without turns adds nothing"
    assert {m["role"] for m in first.messages} == {"user"}
    assert first.messages[0] == {
        "role": "user",
        "name": "Ines",
        "content": "Hi Tomas! I finally moved to Porto last week, my new flat is right by the "
        "river.",
        "timestamp": "2024-03-03T09:15:00",
        "dia_id": "D1:1",
    }
    assert first.messages[6]["content"].endswith(
        "[shares a photo: a photo of a clay vase with a blue glaze]"
    )
    for pick in ("chat-2", 1, "1"):
        second = read_transcript(LOCOMO_CHAT, sample=pick)
        assert second.conversation == "chat-2"
        assert second.speakers == ("Ravi", "Mei")
    assert load_transcript(LOCOMO_CHAT, sample="chat-2") == second.messages
    with pytest.raises(MessageFormatError, match="no conversation 'chat-9'") as info:
        read_transcript(LOCOMO_CHAT, sample="chat-9")
    assert info.value.hint is not None
    assert "chat-1, chat-2" in info.value.hint
    with pytest.raises(MessageFormatError, match="no conversation 2"):
        read_transcript(LOCOMO_CHAT, sample=2)
    with pytest.raises(MessageFormatError, match="holds one conversation"):
        read_transcript(example_path(), sample=0)


def test_message_times() -> None:
    assert (
        message_time({"timestamp": "2026-03-09T09:00:00Z"})
        == datetime(2026, 3, 9, 9, tzinfo=UTC).timestamp()
    )
    assert message_time({"created_at": 1_700_000_000}) == 1_700_000_000.0
    assert message_time({"timestamp": "2026-03-09T10:00:00+01:00"}) == message_time(
        {"timestamp": "2026-03-09 09:00:00"}
    )
    tokyo = ZoneInfo("Asia/Tokyo")
    assert message_time({"timestamp": "2026-03-09 18:00:00"}, tokyo) == message_time(
        {"timestamp": "2026-03-09T09:00:00Z"}, tokyo
    ), "a time without an offset is read in the zone given"
    assert message_time({"timestamp": "yesterday"}) is None
    assert message_time({"timestamp": True}) is None


# -- the loop -----------------------------------------------------------------------------------


def _tool_turn(n: int, output: str) -> list[dict[str, Any]]:
    call = {"id": f"c{n}", "type": "function", "function": {"name": "run", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"Please run step {n}. Remember that step {n} needs root."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": output},
        {"role": "assistant", "content": f"Step {n} done."},
    ]


def test_replay_calls_the_lifecycle_points_like_an_agent_loop(harness: MemoryHarness) -> None:
    messages = [{"role": "system", "content": "Be helpful."}]
    for n in range(4):
        messages += _tool_turn(n, "x" * 90_000 if n == 1 else "ok")
    report = replay(harness, messages, session_id="s")
    assert report.agent_calls == 4, "every user message starts a call that ends with a flush"
    assert report.model_calls == 8
    assert report.tool_results == 4
    (eviction,) = report.of_kind("eviction")
    assert eviction.index == 8
    assert eviction.phase == "after_tool"
    flushes = report.of_kind("flush")
    assert [e.index for e in flushes] == [5, 9, 13, 17], "each at the call's last message"
    assert all(e.phase == "after_call" for e in flushes)
    assert report.facts >= 4
    (consolidation,) = report.of_kind("consolidation")
    assert consolidation.phase == "end"
    assert consolidation.data["status"] == "consolidated"
    assert report.memory_tokens > 0
    assert report.peak_context_tokens < report.transcript_tokens, "the evicted output is gone"
    data = json.loads(json.dumps(report.as_dict()))
    assert data["totals"]["evictions"] == 1


def test_timestamps_drive_the_clock_and_name_the_daily_logs(
    harness: MemoryHarness, clock: ReplayClock
) -> None:
    day1 = _tool_turn(1, "ok")
    day2 = _tool_turn(2, "ok")
    for i, message in enumerate(day1):
        message["timestamp"] = f"2025-06-02T10:0{i}:00Z"
    for i, message in enumerate(day2):
        message["timestamp"] = f"2025-06-03T09:0{i}:00Z"
    kept = replay(harness, day1 + day2, session_id="s", clock=clock, keep_dates=True)
    assert kept.daily_logs == ["memory/2025-06-02.md", "memory/2025-06-03.md"]
    overnight, final = kept.of_kind("consolidation")
    assert (overnight.phase, overnight.index) == ("day end", 4)
    assert final.phase == "end"
    assert clock() == pytest.approx(datetime.now(UTC).timestamp(), abs=60), "clock released"


def test_dates_are_shifted_by_whole_days_to_end_recently(tmp_path: Path) -> None:
    messages = _tool_turn(1, "ok")
    for message in messages:
        message["timestamp"] = "2020-01-01T12:34:00Z"
    now = datetime(2031, 6, 15, 9, 0, tzinfo=UTC).timestamp()  # before 12:34 of its day
    clock = ReplayClock(now=lambda: now)
    with MemoryHarness.open(tmp_path / "ws", clock=clock, maintenance={"enabled": False}) as h:
        report = replay(h, messages, session_id="s", clock=clock)
    assert report.shifted_by % 86_400 == 0
    assert report.last_time is not None
    age = now - report.last_time
    assert 0 <= age < 86_400
    moment = datetime.fromtimestamp(report.last_time, UTC)
    assert (moment.hour, moment.minute) == (12, 34), "the time of day stays as written"
    assert moment.date().isoformat() == "2031-06-14", "the last 24 hours of the clock's now"


def test_facts_held_by_batching_land_on_the_day_they_were_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the default batching, the day's conversation is flushed before the day
    changes (it used to wait for 4,000 tokens and land in a later day's log)."""
    monkeypatch.setenv("HARNESSMEM_FLUSH__BATCH_TOKENS", "4000")
    messages = []
    for day, (fact, reply) in enumerate(
        [("I prefer aisle seats on every flight.", "Noted."), ("My badge number is 4471.", "OK.")]
    ):
        for minute, message in enumerate(
            [{"role": "user", "content": fact}, {"role": "assistant", "content": reply}]
        ):
            messages.append({**message, "timestamp": f"2025-06-0{day + 2}T10:0{minute}:00Z"})
    clock = ReplayClock()
    settings = HarnessSettings.load(
        None, workspace={"url": str(tmp_path / "ws")}, maintenance={"enabled": False}
    )
    with MemoryHarness(settings, clock=clock) as harness:
        report = replay(harness, messages, session_id="s", clock=clock, keep_dates=True)
    assert report.daily_logs == ["memory/2025-06-02.md", "memory/2025-06-03.md"]
    first, second = report.of_kind("flush")
    assert (first.phase, first.index) == ("day end", 2)
    assert datetime.fromtimestamp(first.time, UTC).isoformat() == "2025-06-02T10:01:00+00:00"
    assert "aisle" in " ".join(first.data["entries"])
    assert "4471" in " ".join(second.data["entries"])


# -- LoCoMo conversations -----------------------------------------------------------------------


def test_a_locomo_conversation_replays_on_its_dates_with_each_fact_by_its_speaker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The written conversation, as ``harnessmem replay`` runs it with the defaults (batching
    on), its dates kept, in a workspace east of UTC: one daily log per session, on the
    session's date as written (23:40 stays on the 17th), and the facts name who said them."""
    monkeypatch.setenv("HARNESSMEM_FLUSH__BATCH_TOKENS", "4000")
    monkeypatch.setenv("HARNESSMEM_WORKSPACE__TIMEZONE", "Asia/Tokyo")
    workspace = tmp_path / "ws"
    code, out, err = _run("replay", str(LOCOMO_CHAT), "-w", str(workspace), "--keep-dates")
    assert code == 0, err
    assert "conversation chat-1 (1 of 2 in the file; --sample picks another)" in out
    assert "Ines and Tomas, each a user with a name" in out
    assert "as session 'chat-1'" in out
    logs = {path.name: path.read_text() for path in (workspace / "memory").glob("*.md")}
    assert sorted(logs) == ["2024-03-03.md", "2024-03-17.md", "2024-04-02.md"]
    assert "## Memory Flush — 2024-03-17T14:40:00Z · session chat-1" in logs["2024-03-17.md"]
    bullets = [line for text in logs.values() for line in text.splitlines() if line[:2] == "- "]
    # "last week" grounded on the day it was said (Sunday 3 March: the week of Monday 19
    # February, not the week of the 3rd).
    assert (
        "- Ines finally moved to Porto in the week of 2024-02-19, their new flat is right by "
        "the river." in bullets
    )
    assert any(b.startswith("- Tomas started a pottery class") for b in bullets)
    assert any(b.startswith("- Tomas decided to leave their job at the bank") for b in bullets)
    assert not [b for b in bullets if "the user" in b.lower()]
    code, out, err = _run(
        "replay",
        str(LOCOMO_CHAT),
        "-w",
        str(tmp_path / "ws2"),
        "--sample",
        "1",
        "--report",
        "json",
        "--no-consolidate",
    )
    assert code == 0, err
    report = json.loads(out)
    assert (report["conversation"], report["session_id"]) == ("chat-2", "chat-2")
    assert report["conversations"] == ["chat-1", "chat-2"]
    assert report["messages"] == report["model_calls"] == report["agent_calls"] == 4, (
        "no assistant in the chat: the agent reads along, one model call per message"
    )
    assert report["totals"]["consolidations"] == 0, "--no-consolidate holds overnight too"
    assert not (tmp_path / "ws2" / "MEMORY.md").exists()


def test_a_real_locomo_conversation_compacts_and_keeps_its_dates(
    shared_file: Callable[[str], Path], tmp_path: Path
) -> None:
    """conv-30 of the LoCoMo dev file (369 turns, 19 dated sessions), as a user would pick
    it from the file of five: every session's facts in the log of its date, both people
    named, the context kept bounded by compaction, every turn in the session log."""
    path = shared_file("locomo-dev/locomo-dev.json")
    sample = json.loads(path.read_text(encoding="utf-8"))[1]
    talk = sample["conversation"]
    sessions = [k for k, v in talk.items() if re.fullmatch(r"session_\d+", k) and v]
    dates = {
        datetime.strptime(talk[f"{key}_date_time"], "%I:%M %p on %d %B, %Y").date().isoformat()
        for key in sessions
    }
    workspace = tmp_path / "ws"
    code, out, err = _run(
        "replay",
        str(path),
        "-w",
        str(workspace),
        "--sample",
        "conv-30",
        "--keep-dates",
        "--report",
        "json",
    )
    assert code == 0, err
    report = json.loads(out)
    turns = sum(len(talk[key]) for key in sessions)
    assert report["messages"] == turns == 369
    totals = report["totals"]
    assert totals["flush_failures"] == 0
    assert totals["compactions"] >= 5
    # The context holds the memory block too (context.inject = "system"); MEMORY.md grows
    # over the replay, and its final block stands in for the one at the peak.
    with MemoryHarness.open(workspace, maintenance={"enabled": False}) as harness:
        block = TokenCounter().count_text(harness.session("check").system_context())
    assert block < harness.settings.context.max_tokens
    assert report["peak_context_tokens"] < report["transcript_tokens"] / 3 + block
    assert {log[len("memory/") : -3] for log in totals["daily_logs"]} == dates
    text = "\n".join(p.read_text() for p in (workspace / "memory").glob("*.md"))
    for name in (talk["speaker_a"], talk["speaker_b"]):
        assert text.count(f"- {name} ") >= 20, name
    logged = [
        json.loads(line)["message"]
        for line in (workspace / "sessions" / "conv-30.log.jsonl").read_text().splitlines()
    ]
    assert [m["dia_id"] for m in logged] == [t["dia_id"] for k in sessions for t in talk[k]][
        : len(logged)
    ], "the session log holds the turns in order, with LoCoMo's ids"


# -- the bundled example ------------------------------------------------------------------------


def test_the_example_is_a_valid_multi_day_conversation_with_huge_outputs() -> None:
    messages = load_transcript(example_path())
    assert len(messages) > 2 * 50, "long enough to compact more than once by default"
    assert not pair_tool_calls(messages).orphans
    assert not pair_tool_calls(messages).unanswered
    days = {datetime.fromtimestamp(message_time(m) or 0, UTC).date() for m in messages}
    assert len(days) == 3
    huge = [m for m in messages if m["role"] == "tool" and len(m["content"]) > 80_000]
    assert len(huge) == 2, "over eviction.max_result_chars by default"


def test_replaying_the_example_with_defaults(tmp_path: Path) -> None:
    workspace = str(tmp_path / "demo" / "workspace")
    code, out, err = _run("replay", "--example", "-w", workspace)
    assert code == 0, err
    assert out.startswith("Replaying tidewater-week.jsonl: 133 messages")
    for word in ("compacted", "flushed", "evicted", "consolidated", "(overnight)"):
        assert word in out, word
    assert "Done in" in out
    assert "3 compactions" in out
    assert "2 tool results evicted" in out
    assert f'harnessmem search "staging database" -w {workspace}' in out
    logs = sorted((tmp_path / "demo" / "workspace" / "memory").glob("*.md"))
    assert len(logs) == 3
    code, out, _ = _run("search", "staging database", "-w", workspace)
    assert code == 0
    assert "db-staging.tidewater.internal, port 5433" in out
    # Replayed again: nothing is flushed twice, and the output says why.
    code, out, _ = _run("replay", "--example", "-w", workspace)
    assert code == 0
    assert "0 facts in 0 daily logs" in out
    assert "No new facts" in out


def test_replay_report_json_and_progress(tmp_path: Path) -> None:
    workspace = str(tmp_path / "ws")
    code, out, _ = _run(
        "replay", "--example", "-w", workspace, "--report", "json", "--session", "demo"
    )
    assert code == 0
    data = json.loads(out)
    assert data["session_id"] == "demo"
    assert data["totals"]["compactions"] == 3
    assert data["totals"]["evictions"] == 2
    assert len(data["totals"]["daily_logs"]) == 3
    kinds = {event["kind"] for event in data["events"]}
    assert kinds == {"compaction", "flush", "eviction", "consolidation"}
    code, out, err = _run(
        "replay", "--example", "-w", str(tmp_path / "ws2"), "--progress", "--facts", "0"
    )
    assert code == 0, err
    assert "- Our staging database" not in out, "--facts 0 shows counts only"


def test_replay_usage_errors(tmp_path: Path) -> None:
    code, _, err = _run("replay")
    assert code == 2
    assert "--example" in err
    path = tmp_path / "t.json"
    path.write_text(json.dumps(MESSAGES))
    code, _, err = _run("replay", str(path), "--example")
    assert code == 2


# -- real data ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tau_transcript(
    tmp_path_factory: pytest.TempPathFactory, shared_file: Callable[[str], Path]
) -> Path:
    runs = json.loads(shared_file(TAU).read_text(encoding="utf-8"))[:12]
    messages = [message for run in runs for message in run["traj"]]
    path = tmp_path_factory.mktemp("tau") / "tau-12-runs.json"
    path.write_text(json.dumps(messages), encoding="utf-8")
    return path


def test_a_300_message_real_transcript_compacts_flushes_and_writes_memory(
    tau_transcript: Path, tmp_path: Path
) -> None:
    """Twelve real tau-bench runs joined into one list, replayed with no configuration."""
    messages = json.loads(tau_transcript.read_text())
    assert len(messages) >= 300
    workspace = tmp_path / "ws"
    code, out, err = _run("replay", str(tau_transcript), "-w", str(workspace), "--report", "json")
    assert code == 0, err
    report = json.loads(out)
    totals = report["totals"]
    assert report["messages"] == len(messages)
    assert totals["compactions"] >= 5
    assert totals["degraded_compactions"] == 0
    assert totals["facts"] >= 20
    assert totals["flush_failures"] == 0
    assert totals["consolidations"] == 1
    (log,) = (workspace / "memory").glob("*.md")
    assert "## Memory Flush" in log.read_text()
    assert (workspace / "MEMORY.md").read_text().strip()
    assert (workspace / "sessions" / "tau-12-runs.log.jsonl").is_file()
    code, out, _ = _run("search", "reservation", "-w", str(workspace))
    assert code == 0
    assert "memory/" in out


# -- docs/replay.md shows real output ------------------------------------------------------------

REPLAY_DOC = Path(__file__).resolve().parents[1] / "docs" / "replay.md"


def _console(command: str) -> list[str]:
    """The lines a ``console`` block of docs/replay.md shows after ``$ command``."""
    text = REPLAY_DOC.read_text(encoding="utf-8")
    block = text.split(f"```console\n$ {command}\n", 1)[1].split("\n```", 1)[0]
    return block.splitlines()


def test_the_replay_docs_show_the_error_of_a_rejected_file(tmp_path: Path) -> None:
    (tmp_path / "turns.json").write_text(
        json.dumps([{"speaker": "Ana", "text": "hi"}, {"speaker": "Bo", "text": "hello"}])
    )
    code, _, err = _run("replay", "turns.json", "-w", str(tmp_path / "ws"))
    assert code == 4
    assert err.splitlines() == _console("harnessmem replay turns.json")


def test_the_replay_docs_show_the_locomo_timeline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESSMEM_FLUSH__BATCH_TOKENS", "4000")  # the default
    shown = _console("harnessmem replay tests/data/locomo-chat.json --keep-dates")
    code, out, err = _run("replay", str(LOCOMO_CHAT), "--keep-dates", "-w", str(tmp_path / "ws"))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[: len(shown)][3:] == shown[3:], "the timeline as printed"
    assert lines[:2] == shown[:2]
    assert lines[2].startswith("  into workspace ")
    assert shown[2].startswith("  into workspace ")


# -- a file of runs: each run a session of its own ------------------------------------------------


def _customer(name: str, fact: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": f"Hi, I'm {name}. {fact}"},
        {"role": "assistant", "content": f"Thanks {name}, noted."},
    ]


@pytest.fixture
def runs_file(tmp_path: Path) -> Path:
    runs = [
        {"task_id": 0, "traj": _customer("Ana", "My home airport is Lisbon.")},
        {"task_id": 1, "traj": _customer("Bruno", "I always book an aisle seat.")},
        {"task_id": 2, "messages": _customer("Carla", "My dog Nico flies with me in the cabin.")},
    ]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(runs))
    return path


@pytest.mark.parametrize(
    ("sample", "chosen"),
    [(None, ["run-0", "run-1", "run-2"]), ("1", ["run-1"]), ("1-2", ["run-1", "run-2"]),
     (" 0..1 ", ["run-0", "run-1"]), (2, ["run-2"])],
)  # fmt: skip
def test_runs_are_picked_by_index_or_range(
    runs_file: Path, sample: str | int | None, chosen: list[str]
) -> None:
    loaded = read_transcript(runs_file, sample=sample)
    assert [name for name, _ in loaded.parts] == chosen
    assert loaded.runs == 3
    assert loaded.messages == [m for _, part in loaded.parts for m in part]


@pytest.mark.parametrize(
    ("sample", "message"),
    [("3", "no run 3 in the file: it holds 3 runs"), ("2-1", "the range runs backwards"),
     ("conv-26", "'conv-26' is not a run number or a range")],
)  # fmt: skip
def test_a_run_that_is_not_there_is_one_clear_error(
    runs_file: Path, sample: str, message: str
) -> None:
    with pytest.raises(MessageFormatError, match=re.escape(message)) as caught:
        read_transcript(runs_file, sample=sample)
    assert "0 to 2" in (caught.value.hint or "")


def test_replaying_runs_gives_each_its_own_session(runs_file: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    code, out, err = _run("replay", str(runs_file), "--sample", "1-2", "-w", str(workspace))
    assert code == 0, err
    assert "run-1 to run-2 of the 3 runs in the file, each a session of its own" in out
    logs = "".join(p.read_text() for p in (workspace / "memory").glob("*.md"))
    assert "session runs-run-1" in logs
    assert "session runs-run-2" in logs
    assert "run-0" not in logs
    assert "aisle seat" in logs
    assert "Nico" in logs
    assert "Lisbon" not in logs
    states = sorted(p.stem for p in (workspace / "memory" / ".flush_state").glob("*.json"))
    assert states == ["runs-run-1", "runs-run-2"]
    code, out, err = _run("replay", str(runs_file), "-w", str(tmp_path / "all"), "--report", "json")
    assert code == 0, err
    report = json.loads(out)
    assert report["messages"] == 9
    assert report["session_id"] == "runs-run-0, runs-run-1, runs-run-2"
    assert [e["index"] for e in report["events"] if e["kind"] == "flush"] == [3, 6, 9]


def test_one_real_tau_bench_run(shared_file: Callable[[str], Path], tmp_path: Path) -> None:
    path = shared_file(TAU)
    runs = json.loads(path.read_text(encoding="utf-8"))
    code, out, err = _run("replay", str(path), "--sample", "3", "-w", str(tmp_path / "ws"))
    assert code == 0, err
    assert f"run-3 of the {len(runs)} runs in the file" in out
    (state,) = (tmp_path / "ws" / "memory" / ".flush_state").glob("*.json")
    assert state.stem.endswith("-run-3")
