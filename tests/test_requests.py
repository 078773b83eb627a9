"""Production sends the requests ``harnessmem.prompts`` builds.

``ModelBackendSuite`` and the benchmarks build their requests with ``prompts.flush_request``
and ``prompts.consolidation_request``; these tests capture what a real flush and a real
consolidation send a ScriptedModel and compare it with what those functions build for the
same input, so that the conformance suite tests the requests production sends.
"""

from __future__ import annotations

from typing import Any

from tests.conftest import HarnessFactory

from harnessmem import layout
from harnessmem.prompts import (
    consolidation_request,
    flush_conversation,
    flush_reference,
    flush_request,
    read_blocks,
)
from harnessmem.testing import FakeClock, ScriptedModel
from harnessmem.tokens import TokenCounter

MEMORY = "## People\n- Ana lives in Porto.\n- Ana's staging database is db-stg-2.\n"
LOG = "## Memory Flush — 2026-01-01T09:00:00Z · session earlier\n- Ana booked a flight.\n"


def _today(clock: FakeClock) -> tuple[str, str]:
    return layout.local_date(clock(), "UTC"), layout.daily_path(clock(), "UTC")


def test_a_flush_sends_what_flush_request_builds(
    open_harness: HarnessFactory, clock: FakeClock, airline_run: list[dict[str, Any]]
) -> None:
    """Default settings, nothing in memory yet: the request is the one the suite sends."""
    model = ScriptedModel("NO_REPLY")
    harness = open_harness(model)
    harness.flush(airline_run, session_id="air")
    today, path = _today(clock)
    [call] = model.calls_for("flush")
    expected = flush_request(airline_run, today=today, log_path=path)
    assert call.messages == expected
    assert "<conversation>" in expected[-1]["content"]


def test_a_flush_with_memory_sends_what_flush_request_builds(
    open_harness: HarnessFactory, clock: FakeClock, airline_run: list[dict[str, Any]]
) -> None:
    """The whole of MEMORY.md and today's log as the reference (``flush.reference =
    "full"`` with room for both), in both transcript forms."""
    for transcript in ("lean", "full"):
        model = ScriptedModel("NO_REPLY")
        flush = {"reference": "full", "reference_chars": 100_000, "transcript": transcript}
        harness = open_harness(model, flush=flush)
        today, path = _today(clock)
        harness.workspace.write_text(layout.MEMORY_FILE, MEMORY)
        harness.workspace.write_text(path, LOG)
        harness.flush(airline_run, session_id=f"air-{transcript}")
        [call] = model.calls_for("flush")
        expected = flush_request(
            airline_run,
            memory=MEMORY,
            todays_log=LOG,
            today=today,
            log_path=path,
            lean=transcript == "lean",
        )
        assert call.messages == expected, transcript
        blocks = read_blocks(call.messages)
        assert blocks["memory_md"] == MEMORY.strip()
        assert blocks["todays_log"] == LOG.strip()


def test_the_related_reference_is_a_flush_reference(
    open_harness: HarnessFactory, clock: FakeClock
) -> None:
    """The default reference (related entries) is built by ``prompts.flush_reference`` too."""
    model = ScriptedModel("NO_REPLY")
    harness = open_harness(model)
    harness.workspace.write_text(layout.MEMORY_FILE, MEMORY)
    messages = [{"role": "user", "content": "Is Ana's staging database still db-stg-2?"}]
    harness.flush(messages, session_id="s")
    today, path = _today(clock)
    [call] = model.calls_for("flush")
    related = "- Ana's staging database is db-stg-2."  # not "Ana lives in Porto"
    reference = flush_reference(related, "", log_path=path, unrelated=1)
    assert call.messages == flush_request(messages, today=today, log_path=path, reference=reference)
    assert call.messages[-1]["content"].startswith(reference)
    assert flush_conversation(messages) in call.messages[-1]["content"]


def test_a_consolidation_sends_what_consolidation_request_builds(
    open_harness: HarnessFactory, clock: FakeClock
) -> None:
    model = ScriptedModel("## People\n- Ana lives in Porto.\n- Ana booked a flight.\n")
    harness = open_harness(model)
    _, path = _today(clock)
    harness.workspace.write_text(path, LOG)
    result = harness.consolidate()
    assert result.accepted, result
    [call] = model.calls_for("consolidation")
    budget = harness.settings.consolidation.max_memory_tokens
    assert call.messages == consolidation_request("", {path: LOG}, max_tokens=budget)
    assert read_blocks(call.messages)["daily_logs"] == f"### {path}\n{LOG.strip()}"


def test_a_consolidation_of_a_memory_over_budget_says_so(
    open_harness: HarnessFactory, clock: FakeClock
) -> None:
    model = ScriptedModel("## People\n- Ana lives in Porto.\n")
    harness = open_harness(model, consolidation={"max_memory_tokens": 200})
    _, path = _today(clock)
    long_memory = "## People\n" + "".join(f"- Ana visited city number {i}.\n" for i in range(60))
    harness.workspace.write_text(layout.MEMORY_FILE, long_memory)
    harness.workspace.write_text(path, LOG)
    harness.consolidate()
    [call] = model.calls_for("consolidation")
    tokens = TokenCounter().count_text(long_memory.strip())
    assert tokens > 200
    expected = consolidation_request(long_memory, {path: LOG}, max_tokens=200, memory_tokens=tokens)
    assert call.messages == expected
    assert f"({tokens} tokens, over budget: trim it;" in expected[-1]["content"]
