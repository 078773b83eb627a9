"""What the flush sends and when (issue 18): batching, the related reference, the lean
transcript, one call at compaction, fewer consolidations; and what that costs next to the
agent's own model calls on real runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.memory.flush import render_transcript
from harnessmem.prompts import read_blocks
from harnessmem.testing import ScriptedModel

if TYPE_CHECKING:
    from conftest import HarnessFactory

ROOT = Path(__file__).resolve().parents[1]
TODAY = "memory/2027-01-15.md"
BATCH = {"batch_tokens": 200}


def turn(i: int, fact: str = "") -> list[dict[str, Any]]:
    said = fact or f"question {i} about the flight to Porto"
    return [{"role": "user", "content": said}, {"role": "assistant", "content": f"answer {i}"}]


def facts_of(harness: MemoryHarness) -> list[str]:
    try:
        text = harness.workspace.read_text(TODAY)
    except FileNotFoundError:
        return []
    return [line[2:] for line in text.splitlines() if line.startswith("- ")]


def echo_users(messages: list[dict[str, Any]], purpose: str) -> str:
    """One fact per user line the request shows (flush or combined summary)."""
    import re

    request = str(messages[-1]["content"])
    conversation = request.split("<conversation>")[-1]
    said = re.findall(r"^\[user\]: (.+)$", conversation, flags=re.MULTILINE | re.IGNORECASE)
    facts = "\n".join(f"- {line}" for line in said) or "NO_REPLY"
    if purpose == "flush":
        return facts
    summary = "## SESSION INTENT\nfly\n## SUMMARY\nflights\n## NEXT STEPS\nbook"
    if "## NEW FACTS" in str(messages[0]["content"]):
        return f"{summary}\n## NEW FACTS\n{facts}"
    return summary


# ---------------------------------------------------------------- batching


def test_small_turns_are_held_back_until_the_batch_is_due(open_harness: HarnessFactory) -> None:
    model = ScriptedModel(echo_users)
    harness = open_harness(model, flush=BATCH)
    session = harness.session("b")
    messages: list[dict[str, Any]] = []
    statuses = []
    for i in range(12):
        messages += turn(i)
        statuses.append(session.after_call(messages).outcomes["flush"].status)
    assert statuses[0] == "batched"
    assert "written" in statuses
    first = statuses.index("written")
    assert first > 2  # several turns went in one call
    assert not model.calls_for("flush")[0:0]
    written = facts_of(harness)
    # Every turn up to the due one, in one entry, each once.
    assert written[: first + 1] == [
        f"question {i} about the flight to Porto" for i in range(first + 1)
    ]
    assert len(model.calls_for("flush")) < len(statuses) / 2


def test_close_flushes_what_was_held_back(open_harness: HarnessFactory) -> None:
    model = ScriptedModel(echo_users)
    harness = open_harness(model, flush={"batch_tokens": 10_000})
    session = harness.session("c")
    messages = turn(0, "Ana lives in Porto") + turn(1, "Bo prefers aisle seats")
    assert session.after_call(messages).outcomes["flush"].status == "batched"
    assert facts_of(harness) == []
    result = session.close().outcomes["flush"]
    assert result.status == "written"
    assert facts_of(harness) == ["Ana lives in Porto", "Bo prefers aisle seats"]
    assert session.close().outcomes.get("flush") is None  # nothing held any more


def test_closing_the_harness_flushes_every_session_held_back(tmp_path: Path) -> None:
    model = ScriptedModel(echo_users)
    clock = 1_800_000_000.0
    with MemoryHarness.open(
        tmp_path / "ws", model=model, clock=lambda: clock, flush={"batch_tokens": 10_000}
    ) as harness:
        for name in ("x", "y"):
            harness.session(name).after_call(turn(0, f"{name} likes tea"))
        assert not model.calls_for("flush")
    logs = "".join(p.read_text() for p in (tmp_path / "ws" / "memory").glob("*.md"))
    assert "- x likes tea" in logs
    assert "- y likes tea" in logs


def test_a_process_killed_while_a_batch_is_held_loses_nothing(tmp_path: Path) -> None:
    """The held messages are not on file when the process dies: the mark never moved, so
    the next process's flush of the same conversation writes them."""
    ws = tmp_path / "ws"
    messages = turn(0, "Ana lives in Porto") + turn(1, "Bo prefers aisle seats")
    script = textwrap.dedent(
        f"""
        import json, os, signal
        from harnessmem import MemoryHarness
        harness = MemoryHarness.open({str(ws)!r}, flush={{"batch_tokens": 10_000}},
                                     maintenance={{"enabled": False}})
        ctx = harness.session("k").after_call(json.loads({json.dumps(json.dumps(messages))}))
        print(ctx.outcomes["flush"].status, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSMEM_")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert done.stdout.strip() == "batched"
    assert not list((ws / "memory").glob("*.md")) if (ws / "memory").exists() else True
    model = ScriptedModel(echo_users)
    with MemoryHarness.open(ws, model=model, maintenance={"enabled": False}) as harness:
        harness.session("k").close(messages)
    logs = "".join(p.read_text() for p in (ws / "memory").glob("*.md"))
    assert logs.count("- Ana lives in Porto") == 1
    assert logs.count("- Bo prefers aisle seats") == 1


# ---------------------------------------------------------------- what is sent


def test_the_reference_is_the_related_entries_within_the_bound(
    open_harness: HarnessFactory,
) -> None:
    memory = "\n".join(
        ["## Facts", "- Ana lives in Porto", "- The staging db is on port 5433"]
        + [f"- Unrelated fact number {i} about gardening" for i in range(50)]
    )

    def reference(said: str, bound: int) -> dict[str, str]:
        """The blocks of the flush request for ``said``, with ``flush.reference_chars``."""
        model = ScriptedModel("NO_REPLY")
        harness = open_harness(model, flush={"reference_chars": bound})
        harness.workspace.write_text("MEMORY.md", memory)
        harness.flush([{"role": "user", "content": said}], session_id=f"r{bound}")
        return read_blocks(model.calls_for("flush")[0].messages)

    shown = reference("Is Ana still in Porto?", 200)
    assert shown["memory_md"] == "- Ana lives in Porto"
    assert "[51 other entries not shown" in shown["todays_log"]
    # A word half the entries hold relates nothing: no reference at all.
    assert "memory_md" not in reference("gardening", 500)
    # A rare one does, within the bound.
    shown = reference("number 7 or 12 or 30 or staging", 70)
    assert 0 < len(shown["memory_md"]) <= 70
    shown = reference("number 7 or 12 or 30 or staging", 300)
    lines = shown["memory_md"].splitlines()
    assert lines[0] == "- The staging db is on port 5433"  # in file order
    assert len(lines) == 4
    assert "[48 other entries not shown" in shown["todays_log"]


def test_the_flush_request_holds_only_related_entries(open_harness: HarnessFactory) -> None:
    model = ScriptedModel("NO_REPLY")
    harness = open_harness(model)
    unrelated = "".join(f"- Unrelated fact {i} about gardening and tomatoes\n" for i in range(400))
    harness.workspace.write_text("MEMORY.md", "## Facts\n- Ana lives in Porto\n" + unrelated)
    harness.flush([{"role": "user", "content": "Does Ana still live in Porto?"}], session_id="r")
    request = model.calls_for("flush")[0].messages[-1]["content"]
    assert "- Ana lives in Porto" in request
    assert "tomatoes" not in request
    assert "400 other entries not shown" in request
    assert len(request) < 2_000


def test_the_lean_transcript_compacts_json_and_cuts_long_results() -> None:
    payload = json.dumps({"rows": [{"id": i, "name": f"row {i}"} for i in range(200)]}, indent=2)
    messages = [
        {"role": "user", "content": "list the rows " + "please " * 10},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "function": {"name": "rows", "arguments": '{ "limit" : 200 }'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": payload},
    ]
    lean = render_transcript(messages, lean=True)
    full = render_transcript(messages)
    assert '[tool_call: rows({"limit":200})]' in lean
    assert '{"rows":[{"id":0,"name":"row 0"}' in lean
    assert "chars cut" in lean
    assert len(lean) < len(full) / 2
    assert "list the rows " + "please " * 9 in lean  # user text kept whole


# ---------------------------------------------------------------- one call at compaction


def test_compaction_asks_for_the_summary_and_the_facts_in_one_call(
    open_harness: HarnessFactory,
) -> None:
    model = ScriptedModel(echo_users)
    harness = open_harness(
        model, compaction={"trigger_messages": 10, "keep_messages": 4, "trigger_tokens": 0}
    )
    messages = [{"role": "system", "content": "You help."}]
    for i in range(6):
        messages += turn(i, f"fact number {i} is true")
    sent = harness.session("one").before_reasoning(messages)
    assert len(sent) < 10
    assert [c.purpose for c in model.calls] == ["summary"]
    assert "## NEW FACTS" in model.calls[0].messages[0]["content"]
    dropped = [m["content"] for m in messages[1:] if m["role"] == "user"][: len(facts_of(harness))]
    assert facts_of(harness) == dropped
    assert len(dropped) >= 3


def test_junk_in_the_facts_part_is_asked_again_of_the_flush_model(
    open_harness: HarnessFactory,
) -> None:
    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        if purpose == "summary":
            return "## SESSION INTENT\nfly\n## SUMMARY\nx\n## NEXT STEPS\ny\n## NEW FACTS\n???"
        return echo_users(messages, purpose)

    model = ScriptedModel(reply)
    harness = open_harness(
        model, compaction={"trigger_messages": 10, "keep_messages": 4, "trigger_tokens": 0}
    )
    messages = [{"role": "system", "content": "You help."}]
    for i in range(6):
        messages += turn(i, f"fact number {i} is true")
    harness.session("junk").before_reasoning(messages)
    assert [c.purpose for c in model.calls] == ["summary", "flush"]
    assert "fact number 0 is true" in facts_of(harness)


@pytest.mark.parametrize(
    ("flush_model", "calls"),
    [
        # Another route (other options): another backend, asked for the facts on its own.
        ({"backend": "extractive", "options": {"max_facts": 5}}, {"summary": 1, "flush": 1}),
        # The same route as the summary's: one backend, one call for both.
        ({"backend": "extractive"}, {"summary": 1}),
    ],
)
def test_separate_models_for_summary_and_flush_keep_two_calls(
    tmp_path: Path, flush_model: dict[str, Any], calls: dict[str, int]
) -> None:
    with MemoryHarness.open(
        tmp_path / "ws",
        model={"flush": flush_model},
        compaction={"trigger_messages": 10, "keep_messages": 4, "trigger_tokens": 0},
        maintenance={"enabled": False},
    ) as harness:
        messages = [{"role": "system", "content": "You help."}]
        for i in range(6):
            messages += turn(i, f"My flight number {i} to Porto is HX{i}00 on Monday.")
        harness.session("s").before_reasoning(messages)
        usage = harness.usage().by_purpose()
    assert {purpose: totals.calls for purpose, totals in usage.items()} == calls
    logs = "".join(p.read_text() for p in (tmp_path / "ws" / "memory").glob("*.md"))
    assert "HX000" in logs, "the facts were written either way"


# ---------------------------------------------------------------- consolidation requests


def test_consolidation_is_asked_for_once_enough_new_facts_wait(
    open_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = open_harness(
        ScriptedModel(echo_users), consolidation={"min_new_tokens": 40}, flush={"batch_tokens": 0}
    )
    asked: list[bool] = []
    monkeypatch.setattr(harness.kernel, "request_maintenance", lambda: asked.append(True) or True)
    session = harness.session("c")
    messages: list[dict[str, Any]] = []
    for i in range(8):
        messages += turn(i, f"Fact {i}: the customer flies to Porto on the {i + 1}th")
        session.after_call(messages)
    assert 1 <= len(asked) <= 3  # not once per flush


# ---------------------------------------------------------------- the scenario of issue 18


def test_upkeep_is_a_tenth_of_the_agent_spend_on_real_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """10 tau-bench runs through the bench's scenario: upkeep characters and tokens at most
    0.10x of what the agent model is sent, and the batched design keeps >= 90% of the facts
    the per-call design writes."""
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delenv("HARNESSMEM_FLUSH__BATCH_TOKENS")
    from bench import bench_upkeep

    if not bench_upkeep.TAU.is_file():
        pytest.skip(f"tau-bench data missing at {bench_upkeep.TAU} (see README: ../shared)")
    runs = bench_upkeep._runs(10)
    names = list(bench_upkeep.VARIANTS)
    before = bench_upkeep.day(runs, bench_upkeep.VARIANTS[names[0]])
    now = bench_upkeep.day(runs, bench_upkeep.VARIANTS[names[-1]])
    upkeep_chars = sum(u[0] for u in now["upkeep"].values())
    upkeep_tokens = sum(u[1] for u in now["upkeep"].values())
    assert upkeep_chars <= 0.10 * now["agent_chars"]
    assert upkeep_tokens <= 0.10 * now["agent_tokens"]
    assert sum(u[0] for u in before["upkeep"].values()) > 0.5 * before["agent_chars"]
    assert len(now["facts"] & before["facts"]) >= 0.9 * len(before["facts"])
    assert now["unlogged"] == 0  # every message removed from a context is in a session log
