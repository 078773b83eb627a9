"""Consolidation into MEMORY.md: watermark, guards, history, concurrent memory_save, LoCoMo.

Every test that opens a harness runs on a local folder and on S3 (``workspace_target``),
except two that say why they are local only.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessmem import (
    LeaseError,
    MemoryHarness,
    ModelUnavailableError,
)
from harnessmem.layout import CONSOLIDATION_STATE as STATE_PATH
from harnessmem.layout import HISTORY_DIR, is_daily_log
from harnessmem.memory.consolidation import ConsolidationResult
from harnessmem.memory.files import normalise_fact, parse_facts, saved_facts
from harnessmem.memory.grounding import ground_facts
from harnessmem.testing import FakeClock, ScriptedModel
from harnessmem.tokens import TokenCounter

if TYPE_CHECKING:
    from conftest import EventLog, HarnessFactory

DAY1, DAY2 = "memory/2027-01-14.md", "memory/2027-01-15.md"
PRIOR = "## People\n" + "".join(
    f"- Ana's friend number {i} is called Person{i}\n" for i in range(8)
)


def entry(*facts: str, session: str = "s") -> str:
    bullets = "".join(f"- {fact}\n" for fact in facts)
    return f"\n## Memory Flush — 2027-01-15T07:00:00Z · session {session}\n{bullets}"


def sections_of(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """MEMORY.md and the new log text, as the consolidation prompt shows them."""
    user = messages[-1]["content"]
    memory = user.split("<memory_md>\n", 1)[1].split("\n</memory_md>", 1)[0]
    logs = (
        user.split("<daily_logs>\n", 1)[1].split("\n</daily_logs>", 1)[0]
        if "<daily_logs>" in user
        else ""
    )
    return memory, logs


def merging_reply(messages: list[dict[str, Any]], purpose: str) -> str:
    """A consolidator that really merges: prior bullets + new ones, deduplicated, trimmed
    (oldest first) to 90% of the character budget the prompt states."""
    memory, logs = sections_of(messages)
    budget = int(re.search(r"about (\d+) characters", messages[-1]["content"])[1])  # type: ignore[index]
    facts: dict[str, str] = {}
    for fact in [*parse_facts(memory), *parse_facts(logs)]:
        facts.setdefault(normalise_fact(fact), fact)
    kept = list(facts.values())
    while kept and len("\n".join(f"- {f}" for f in kept)) > budget * 0.9:
        kept.pop(0)
    return "## Facts\n" + "\n".join(f"- {f}" for f in kept)


def state(harness: MemoryHarness) -> dict[str, Any]:
    return dict(json.loads(harness.workspace.read_text(STATE_PATH)))


def test_consolidates_only_log_text_past_the_watermark(
    open_harness: HarnessFactory, clock: FakeClock
) -> None:
    model = ScriptedModel(merging_reply)
    harness = open_harness(model)
    harness.workspace.append_text(DAY1, entry("Ana lives in Lisbon"))
    first = harness.consolidate()
    assert (first.status, first.accepted, first.files) == ("consolidated", True, (DAY1,))
    # The model's answer lost the day the fact was learned: it is put back as a stamp.
    assert harness.workspace.read_text("MEMORY.md") == (
        "## Facts\n- Ana lives in Lisbon (2027-01-14)\n"
    )
    assert state(harness)["files"]["2027-01-14.md"]["bytes"] == len(
        entry("Ana lives in Lisbon").encode()
    )
    assert harness.consolidate().status == "nothing_new"
    assert len(model.calls) == 1, "nothing past the watermark: no model call"
    harness.workspace.append_text(DAY1, entry("Ana has a cat"))
    harness.workspace.append_text(DAY2, entry("Ana flies on Friday"))
    second = harness.consolidate()
    assert second.files == (DAY1, DAY2)
    _, logs = sections_of(model.calls[-1].messages)
    assert "Ana has a cat" in logs
    assert "Ana flies on Friday" in logs
    assert "Ana lives in Lisbon" not in logs, "consolidated entries are not sent again"
    assert harness.workspace.read_text("MEMORY.md").count("- ") == 3


def test_budget_is_told_in_tokens_and_characters(open_harness: HarnessFactory) -> None:
    model = ScriptedModel("## Facts\n- x y z")
    harness = open_harness(model, consolidation={"max_memory_tokens": 1_000})
    harness.workspace.append_text(DAY2, entry("fact"))
    harness.consolidate()
    system = model.calls[0].messages[0]["content"]
    assert "1000 tokens (about 4000 characters)" in system
    custom = ScriptedModel("## Facts\n- x y z")
    harness = open_harness(custom, consolidation={"prompt": "Merge the memory."})
    harness.workspace.append_text(DAY2, entry("fact two"))
    harness.consolidate()
    assert (
        custom.calls[0]
        .messages[0]["content"]
        .endswith("Stay within 4000 tokens (about 16000 characters).")
    )


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "empty answer"),
        ("```markdown\n\n```", "empty answer"),
        ("## Facts\n" + "- many words of filler text here\n" * 300, "over budget"),
        ("## People\n- Ana's friend number 0 is called Person0\n- Ana has a cat", "lossy"),
    ],
)
def test_guards_leave_memory_md_and_watermark_as_they_were(
    open_harness: HarnessFactory, events: EventLog, answer: str, reason: str
) -> None:
    harness = open_harness(ScriptedModel(answer), consolidation={"max_memory_tokens": 500})
    harness.workspace.write_text("MEMORY.md", PRIOR)
    harness.workspace.append_text(DAY2, entry("Ana has a cat"))
    harness.workspace.write_text(STATE_PATH, json.dumps({"version": 1, "files": {}}))
    before = harness.workspace.read_text(STATE_PATH)
    result = harness.consolidate()
    assert (result.status, result.accepted) == ("rejected", False)
    assert result.reason.startswith(reason)
    assert harness.workspace.read_text("MEMORY.md") == PRIOR
    assert (
        json.loads(harness.workspace.read_text(STATE_PATH))["files"] == json.loads(before)["files"]
    )
    assert not harness.workspace.list(HISTORY_DIR)
    [event] = events.consolidated
    assert (event.accepted, event.status) == (False, "rejected")
    assert event.reason == result.reason
    if reason == "lossy":
        assert (result.entries_before, result.entries_lost) == (8, 7)


def test_slack_and_over_budget_prior(open_harness: HarnessFactory) -> None:
    counter = TokenCounter()
    answer = "## Facts\n" + "".join(f"- fact number {i} about Ana\n" for i in range(60))
    budget = int(counter.count_text(answer) / 1.05)  # the answer is 5% over: tolerated
    harness = open_harness(ScriptedModel(answer), consolidation={"max_memory_tokens": budget})
    harness.workspace.append_text(DAY2, entry("Ana has a cat"))
    assert harness.consolidate().status == "consolidated"
    # A prior file over budget may lose entries: trimming it is the point.
    harness = open_harness(
        ScriptedModel("## Facts\n- Ana's friend number 1 is called Person1"),
        consolidation={"max_memory_tokens": 50},
    )
    harness.workspace.write_text("MEMORY.md", PRIOR)
    harness.workspace.append_text(DAY2, entry("Ana has a dog"))
    result = harness.consolidate()
    assert result.status == "consolidated"
    assert (result.entries_before, result.entries_lost) == (8, 7)


def test_over_budget_memory_md_is_trimmed_without_new_logs(open_harness: HarnessFactory) -> None:
    model = ScriptedModel("## Facts\n- the essentials")
    harness = open_harness(model, consolidation={"max_memory_tokens": 100})
    harness.workspace.write_text("MEMORY.md", PRIOR * 10)
    result = harness.consolidate()
    assert (result.status, result.files) == ("consolidated", ())
    assert "over budget: trim it" in model.calls[0].messages[-1]["content"]


def test_history_keeps_the_last_versions(open_harness: HarnessFactory, clock: FakeClock) -> None:
    harness = open_harness(ScriptedModel(merging_reply), consolidation={"history_keep": 2})
    versions = []
    for i in range(4):
        harness.workspace.append_text(DAY2, entry(f"fact {i} about Ana"))
        if harness.workspace.exists("MEMORY.md"):
            versions.append(harness.workspace.read_text("MEMORY.md"))
        result = harness.consolidate()
        clock.advance(1 if i != 1 else 0)  # two runs in one second get distinct names
        assert result.status == "consolidated"
    history = harness.workspace.list(HISTORY_DIR)
    assert len(history) == 2
    assert [harness.workspace.read_text(p) for p in history] == versions[-2:]
    assert result.history_path == history[-1]
    harness.workspace.write_text(f"{HISTORY_DIR}/notes.txt", "mine")
    harness.workspace.append_text(DAY2, entry("fact 5 about Ana"))
    harness.consolidate()
    assert harness.workspace.exists(f"{HISTORY_DIR}/notes.txt"), "only versions are pruned"


def test_memory_save_during_consolidation_survives(
    open_harness: HarnessFactory, events: EventLog
) -> None:
    saved = threading.Event()
    results: list[Any] = []

    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        # Another thread saves while "the model is thinking"; answer only once it is done.
        thread = threading.Thread(
            target=lambda: (results.append(harness.save("Ana's visa expires in May")), saved.set())
        )
        thread.start()
        assert saved.wait(30)
        return merging_reply(messages, purpose)

    harness = open_harness(ScriptedModel(reply))
    harness.workspace.write_text("MEMORY.md", "## Facts\n- Ana lives in Lisbon\n")
    harness.workspace.append_text(DAY2, entry("Ana has a cat"))
    result = harness.consolidate()
    assert results[0].saved
    assert result.status == "consolidated"
    assert result.preserved_appends == 1
    text = harness.workspace.read_text("MEMORY.md")
    assert text.startswith("## Facts\n- Ana lives in Lisbon\n- Ana has a cat (2027-01-15)\n")
    assert "- Ana's visa expires in May" in text
    assert events.consolidated[-1].preserved_appends == 1


def test_a_rewrite_by_another_writer_is_not_overwritten(open_harness: HarnessFactory) -> None:
    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        harness.workspace.write_text("MEMORY.md", "## Hand-edited\n- keep me\n")
        return "## Facts\n- Ana lives in Lisbon\n- Ana has a cat"

    harness = open_harness(ScriptedModel(reply))
    harness.workspace.write_text("MEMORY.md", "## Facts\n- Ana lives in Lisbon\n")
    harness.workspace.append_text(DAY2, entry("Ana has a cat"))
    result = harness.consolidate()
    assert result.status == "rejected"
    assert "rewritten by another writer" in result.reason
    assert harness.workspace.read_text("MEMORY.md") == "## Hand-edited\n- keep me\n"


# Local only: the seed's watermark is judged by modification times, which this test sets
# back with os.utime; an object store's LastModified is the upload time and cannot be set.
@pytest.mark.parametrize("workspace_target", ["local"], indirect=True)
def test_reads_the_seed_timestamp_watermark(open_harness: HarnessFactory, tmp_path: Path) -> None:
    model = ScriptedModel(merging_reply)
    harness = open_harness(model)
    harness.workspace.append_text(DAY1, entry("consolidated by the seed already"))
    harness.workspace.append_text(DAY2, entry("written after the seed ran"))
    harness.workspace.write_text(STATE_PATH, "2025-06-15T12:00:00Z")
    seed_run = datetime(2025, 6, 15, 12, tzinfo=UTC).timestamp()
    os.utime(tmp_path / "ws" / DAY1, (seed_run - 60, seed_run - 60))
    result = harness.consolidate()
    assert result.files == (DAY2,)
    _, logs = sections_of(model.calls[0].messages)
    assert "written after the seed ran" in logs
    assert "seed already" not in logs
    assert set(state(harness)["files"]) == {"2027-01-14.md", "2027-01-15.md"}
    assert harness.consolidate().status == "nothing_new"


def test_lost_memory_md_with_a_surviving_watermark_reconsolidates(
    open_harness: HarnessFactory,
) -> None:
    model = ScriptedModel(merging_reply)
    harness = open_harness(model)
    harness.workspace.append_text(DAY1, entry("Ana lives in Lisbon"))
    harness.consolidate()
    harness.workspace.delete("MEMORY.md")
    result = harness.consolidate()
    assert result.status == "consolidated"
    assert "Ana lives in Lisbon" in harness.workspace.read_text("MEMORY.md")


def test_no_reply_keeps_memory_md_and_advances(open_harness: HarnessFactory) -> None:
    model = ScriptedModel("NO_REPLY")
    harness = open_harness(model)
    harness.workspace.write_text("MEMORY.md", PRIOR)
    harness.workspace.append_text(DAY2, entry("small talk"))
    assert harness.consolidate().status == "unchanged"
    assert harness.workspace.read_text("MEMORY.md") == PRIOR
    assert harness.consolidate().status == "nothing_new"


def test_input_is_bounded_and_the_rest_waits(open_harness: HarnessFactory) -> None:
    model = ScriptedModel(merging_reply)
    harness = open_harness(model, consolidation={"max_input_tokens": 60})
    for day in range(1, 6):
        path = f"memory/2027-01-0{day}.md"
        harness.workspace.append_text(path, entry(f"day {day} fact alpha", f"day {day} beta"))
    runs = []
    while (result := harness.consolidate()).status != "nothing_new":
        runs.append(result)
    assert len(runs) > 1
    assert all(r.pending for r in runs[:-1])
    assert not runs[-1].pending
    sent = Counter(
        line for call in model.calls for line in sections_of(call.messages)[1].splitlines()
    )
    for day in range(1, 6):
        assert sent[f"- day {day} fact alpha"] == 1, "each entry is sent exactly once"


def test_lossy_rejection_halves_the_next_batch(open_harness: HarnessFactory) -> None:
    harness = open_harness(ScriptedModel("## Facts\n- nothing kept at all"))
    harness.workspace.write_text("MEMORY.md", PRIOR)
    harness.workspace.append_text(DAY2, entry("Ana has a cat"))
    assert "lossy" in harness.consolidate().reason
    assert state(harness)["input_limit"] == 16_000


def test_model_failure_raises_and_changes_nothing(
    open_harness: HarnessFactory, events: EventLog
) -> None:
    harness = open_harness(ScriptedModel([ModelUnavailableError("down")]))
    harness.workspace.write_text("MEMORY.md", PRIOR)
    harness.workspace.append_text(DAY2, entry("Ana has a cat"))
    with pytest.raises(ModelUnavailableError):
        harness.consolidate()
    assert harness.workspace.read_text("MEMORY.md") == PRIOR
    assert not harness.workspace.exists(STATE_PATH)
    assert events.consolidated[-1].status == "failed"


def test_a_failing_consolidation_model_is_backed_off_in_maintenance(
    open_harness: HarnessFactory,
) -> None:
    """Issue 16: errors and rejected rewrites back the model off (1, 2 ... runs skipped
    with ``deferred``); a direct call still asks; a success resets the count."""
    model = ScriptedModel([ModelUnavailableError("down"), "", PRIOR + "- Ana has a cat\n"])
    harness = open_harness(model)
    harness.workspace.write_text("MEMORY.md", PRIOR)
    harness.workspace.append_text(DAY2, entry("Ana has a cat"))
    with pytest.raises(ModelUnavailableError):
        harness.consolidate(backoff=True)
    deferred = harness.consolidate(backoff=True)
    assert deferred.status == "deferred"
    assert "backed off after 1 failure(s)" in deferred.reason
    assert harness.consolidate(backoff=True).reason == "empty answer"  # failure 2
    assert [harness.consolidate(backoff=True).status for _ in range(2)] == ["deferred"] * 2
    assert len(model.calls) == 2
    assert harness.consolidate(backoff=True).accepted
    consolidation = harness.usage().by_purpose()["consolidation"]
    assert (consolidation.calls, consolidation.failures, consolidation.rejected) == (3, 2, 1)


def test_a_slow_model_gets_the_lease_renewed_or_loses_it(
    open_harness: HarnessFactory, clock: FakeClock
) -> None:
    ttl = 600.0

    def slow(messages: list[dict[str, Any]], purpose: str) -> str:
        clock.advance(ttl * 0.6)
        return "## Facts\n- Ana has a cat"

    harness = open_harness(ScriptedModel(slow), consolidation={"lease_ttl": ttl})
    harness.workspace.append_text(DAY2, entry("Ana has a cat"))
    assert harness.consolidate().status == "consolidated"

    def stalled(messages: list[dict[str, Any]], purpose: str) -> str:
        clock.advance(ttl * 2)
        harness.workspace.lock("consolidation", ttl=ttl)  # another process takes over
        return "## Facts\n- Ana has a cat\n- Ana has a dog"

    harness = open_harness(ScriptedModel(stalled), consolidation={"lease_ttl": ttl})
    harness.workspace.append_text(DAY2, entry("Ana has a dog"))
    with pytest.raises(LeaseError, match="was lost"):
        harness.consolidate()
    assert "dog" not in harness.workspace.read_text("MEMORY.md")


def test_busy_and_disabled(open_harness: HarnessFactory) -> None:
    harness = open_harness(ScriptedModel("x"))
    harness.workspace.append_text(DAY2, entry("Ana has a cat"))
    with harness.workspace.lock("consolidation"):
        assert harness.consolidate().status == "busy"
    disabled = open_harness(ScriptedModel("x"), consolidation={"enabled": False})
    assert disabled.consolidate().status == "disabled"


def test_save_appends_a_dated_redacted_entry(open_harness: HarnessFactory) -> None:
    harness = open_harness(ScriptedModel("x"))
    harness.workspace.write_text("MEMORY.md", "## Facts\n- Ana lives in Lisbon")
    result = harness.save("- Ana lives in lisbon.\n- The VPN password: hunter2 (rotate monthly)")
    assert (result.saved, result.duplicates) == (True, 1)
    assert result.message == "Saved 1 memory to MEMORY.md (1 already there)"
    assert str(result) == "1 new entry, 1 already there"
    assert harness.workspace.read_text("MEMORY.md") == (
        "## Facts\n- Ana lives in Lisbon\n\n## Memory Save — 2027-01-15T08:00:00Z\n"
        "- The VPN password: [REDACTED] (rotate monthly)\n"
    )
    again = harness.save("The VPN password: hunter2 (rotate monthly)")
    assert not again.saved
    assert again.message.startswith("Already in MEMORY.md")
    with pytest.raises(ValueError, match="non-empty"):
        harness.save("   ")


def test_a_day_of_saves_goes_under_one_heading(
    open_harness: HarnessFactory, clock: FakeClock
) -> None:
    harness = open_harness(ScriptedModel("x"))
    harness.workspace.write_text("MEMORY.md", "## Facts\n- Ana lives in Lisbon\n")
    harness.save("Ana's visa expires in May")
    clock.advance(3600)
    harness.save("- Ana's flight is TP204\n- Ana prefers aisle seats")
    clock.advance(86_400)
    harness.save("Ana moved her flight to TP212")
    assert harness.workspace.read_text("MEMORY.md") == (
        "## Facts\n- Ana lives in Lisbon\n\n## Memory Save — 2027-01-15T08:00:00Z\n"
        "- Ana's visa expires in May\n- Ana's flight is TP204\n- Ana prefers aisle seats\n"
        "\n## Memory Save — 2027-01-16T09:00:00Z\n- Ana moved her flight to TP212\n"
    )


def test_a_save_under_the_day_s_heading_keeps_it_through_a_consolidation(
    open_harness: HarnessFactory,
) -> None:
    """A save that went on under the day's heading while the model ran keeps its heading
    after the new text (which may hold no such heading)."""

    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        harness.save("Ana's visa expires in May")
        return merging_reply(messages, purpose)

    harness = open_harness(ScriptedModel(reply))
    harness.save("Ana speaks Portuguese")
    harness.workspace.append_text(DAY2, entry("Ana has a cat"))
    assert harness.consolidate().preserved_appends == 1
    text = harness.workspace.read_text("MEMORY.md")
    assert text.endswith("\n## Memory Save — 2027-01-15T08:00:00Z\n- Ana's visa expires in May\n")


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "Ana lives in Porto\n- The prod db is on port 6543",
            ["Ana lives in Porto", "The prod db is on port 6543"],
        ),
        ("- B1\nB2 after list", ["B1", "B2 after list"]),
        (
            "- Deploys go through make ship\n```\nmake ship ENV=prod\n```\n"
            "Run it from the repo root",
            ["Deploys go through make ship", "make ship ENV=prod", "Run it from the repo root"],
        ),
        (
            "Facts:\n1. Ana's cat is Mia\n   (a tabby)\n2. Ana's dog is Rex\nThat is all.",
            ["Facts:", "Ana's cat is Mia (a tabby)", "Ana's dog is Rex", "That is all."],
        ),
        ("- [x] Renewed the TLS cert\n- [ ] Rotate the API key", None),
        ("No reply from Bob yet about the lease", None),
    ],
)
def test_save_keeps_every_line(
    open_harness: HarnessFactory, text: str, kept: list[str] | None
) -> None:
    """Prose around, between and after bullets, and text after a code fence, used to be
    dropped while the answer said 'Saved'."""
    harness = open_harness(ScriptedModel("x"))
    result = harness.save(text)
    expected = kept or [line.removeprefix("- ") for line in text.splitlines()]
    assert list(result.entries) == expected
    assert result.left_out == ()
    memory = harness.workspace.read_text("MEMORY.md")
    assert all(f"- {fact}\n" in memory for fact in expected), memory


def test_save_says_which_lines_it_left_out_and_why(open_harness: HarnessFactory) -> None:
    harness = open_harness(ScriptedModel("x"))
    result = harness.save("## Travel\n- Ana prefers aisle seats")
    assert result.entries == ("Ana prefers aisle seats",)
    assert result.left_out == ("'## Travel' (a heading, not a fact)",)
    assert result.message == (
        "Saved 1 memory to MEMORY.md. Not saved: '## Travel' (a heading, not a fact). Write "
        "each fact as its own line or bullet that makes sense without the heading."
    )
    assert "Travel" not in harness.workspace.read_text("MEMORY.md")
    only = harness.save("# Memory\n\n## People")
    assert not only.saved
    assert only.message.startswith(
        "Nothing saved to MEMORY.md: the text holds no fact. Not saved: '# Memory' (a heading, "
        "not a fact); '## People' (a heading, not a fact)."
    )


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyzÀé寿司0123456789", min_size=1, max_size=6)
_LINE = st.builds(
    lambda indent, marker, words: indent + marker + " ".join(words),
    st.sampled_from(["", "", "  ", "\t"]),
    st.sampled_from(["", "", "- ", "* ", "+ ", "1. ", "2) ", "• ", "# ", "## ", "- [x] "]),
    st.lists(_WORD, min_size=1, max_size=5),
)
_MARKUP = st.sampled_from(["", "   ", "```", "```python", "~~~", "---", "***"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_LINE, _MARKUP), min_size=1, max_size=12))
def test_every_word_saved_is_kept_or_reported(lines: list[str]) -> None:
    """What memory_save does with the text: each word ends up in a fact or in a line the
    answer names as not saved; the bullet markers and fences are all that may go."""
    facts, left_out = saved_facts("\n".join(lines))
    for line in lines:
        for word in line.split():
            if word in ("-", "*", "+", "•", "1.", "2)", "#", "##", "[x]", "```python") or (
                word in ("```", "~~~", "---", "***") and line.strip() == word
            ):
                continue
            assert any(word in fact.split() for fact in facts) or any(
                word in note for note in left_out
            ), (word, lines, facts, left_out)


def test_memory_save_tool_goes_through_save(open_harness: HarnessFactory) -> None:
    harness = open_harness(ScriptedModel("x"))
    answer = harness.session("s").call_tool("memory_save", {"text": "- Ana likes tea"})
    assert "1 new entry" in answer
    assert "- Ana likes tea" in harness.workspace.read_text("MEMORY.md")


# -- the LoCoMo replay ----------------------------------------------------------------------


def _locomo(shared_file: Callable[[str], Path]) -> list[dict[str, Any]]:
    return list(json.loads(shared_file("locomo-dev/locomo-dev.json").read_text()))


def _sessions(sample: dict[str, Any]) -> list[tuple[int, float, list[dict[str, Any]], list[str]]]:
    conv = sample["conversation"]
    found = []
    for key, turns in conv.items():
        match = re.fullmatch(r"session_(\d+)", key)
        observations = sample["observation"].get(f"{key}_observation")
        if not match or not isinstance(turns, list) or observations is None:
            continue
        when = datetime.strptime(conv[f"{key}_date_time"], "%I:%M %p on %d %B, %Y")
        roles = {conv["speaker_a"]: "user", conv["speaker_b"]: "assistant"}
        messages = [
            {"role": roles[t["speaker"]], "content": f"{t['speaker']}: {t['text']}"} for t in turns
        ]
        facts = [fact for per_speaker in observations.values() for fact, *_ in per_speaker]
        found.append((int(match[1]), when.replace(tzinfo=UTC).timestamp(), messages, facts))
    return sorted(found)


# Local only: a replay of ~300 sessions measures extraction and dedup, not storage (the
# other tests cover S3); on moto it would take minutes.
@pytest.mark.slow
@pytest.mark.parametrize("workspace_target", ["local"], indirect=True)
def test_locomo_replay_logs_every_fact_once_and_memory_md_stays_in_budget(
    open_harness: HarnessFactory, clock: FakeClock, shared_file: Callable[[str], Path]
) -> None:
    current: list[str] = []

    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        if purpose == "flush":
            return "\n".join(f"- {fact}" for fact in current)
        return merging_reply(messages, purpose)

    model = ScriptedModel(reply)
    harness = open_harness(model)
    budget = harness.settings.consolidation.max_memory_tokens
    zone = harness.settings.workspace.timezone
    expected: list[str] = []
    rejected = 0
    for sample in _locomo(shared_file):
        for number, when, messages, facts in _sessions(sample):
            clock.now = when
            current[:] = facts
            session = harness.session(f"{sample['sample_id']}-s{number}")
            assert session.after_call(messages).outcomes["flush"].ok
            assert session.after_call(messages).outcomes["flush"].status == "nothing_new"
            # The flush writes them with their relative times grounded.
            expected.extend(ground_facts(facts, messages, now=when, timezone=zone))
            if number % 2 == 0:  # maintenance runs now and then, not after every session
                result: ConsolidationResult = harness.consolidate()
                rejected += not result.accepted
    rejected += not harness.consolidate().accepted
    # The same conversation again, under another id on the last day: nothing new is logged.
    again = harness.flush(messages, session_id="replayed")
    assert (again.status, again.duplicates) == ("duplicates", len(current))
    logged = Counter(
        normalise_fact(fact)
        for path in harness.workspace.list("memory", recursive=False)
        if is_daily_log(path.rsplit("/", 1)[-1])
        for fact in parse_facts(harness.workspace.read_text(path))
    )
    wanted = Counter(normalise_fact(fact) for fact in expected)
    assert len(wanted) > 1_000
    assert logged == wanted, "every observation fact is in the daily logs exactly once"
    memory = harness.workspace.read_text("MEMORY.md")
    assert TokenCounter().count_text(memory) <= budget
    assert rejected == 0
    assert parse_facts(memory)[-1] == normalise_fact(expected[-1]) or expected[-1] in memory


# -- a MEMORY.md that is not UTF-8 (issue 17) ----------------------------------------------------

ODD_MEMORY = "# Memory\n- Ana lives in São Paulo\n"


@pytest.mark.parametrize(
    "original",
    [ODD_MEMORY.encode("latin-1"), ODD_MEMORY.encode("utf-16")],
    ids=["latin-1 byte", "utf-16 with BOM"],
)
def test_memory_md_that_is_not_utf8_disables_nothing(
    open_harness: HarnessFactory, original: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """One Latin-1 byte (an edit in another editor) or a UTF-16 file: the context, save,
    memory_save, the flush and consolidation all keep working; the path is warned about
    once; the user's bytes are kept in memory/.history/ before MEMORY.md is rewritten."""

    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        return merging_reply(messages, purpose) if purpose == "consolidation" else "- Ana has a cat"

    harness = open_harness(ScriptedModel(reply))
    workspace = harness.workspace
    workspace.write_bytes("MEMORY.md", original)
    session = harness.session("s")
    with caplog.at_level(logging.WARNING, logger="harnessmem.workspace"):
        block = session.system_context()
        assert re.search(r"- Ana lives in S(ã|\ufffd)o Paulo", block)
        assert harness.save("- Ana flies on Friday").saved
        assert session.call_tool("memory_save", {"text": "- Ana likes tea"}).startswith("Saved")
        flushed = harness.flush([{"role": "user", "content": "I have a cat"}], session_id="s")
        assert flushed.written
        result = harness.consolidate()
    assert result.status == "consolidated", result.reason
    memory = workspace.read_text("MEMORY.md")
    for fact in ("lives in S", "flies on Friday", "likes tea", "has a cat"):
        assert fact in memory
    warned = [
        r
        for r in caplog.records
        if "MEMORY.md" in r.getMessage() and "read anyway" in r.getMessage()
    ]
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]
    kept = [p for p in workspace.list(HISTORY_DIR) if workspace.read_bytes(p) == original]
    assert kept, workspace.list(HISTORY_DIR)


def test_a_daily_log_byte_that_is_not_utf8_is_consolidated_once(
    open_harness: HarnessFactory,
) -> None:
    """A Latin-1 byte in an old daily log (never written again): consolidated once, with
    the byte as U+FFFD, and the watermark lands on the real end of the file (a byte count
    off by the replacement's length would send the whole file again every run)."""
    model = ScriptedModel(merging_reply)
    harness = open_harness(model)
    data = entry("Ana has a cat").encode() + "- Ana lives in S\xe3o Paulo\n".encode("latin-1")
    harness.workspace.write_bytes(DAY1, data)
    first = harness.consolidate()
    assert first.status == "consolidated", first.reason
    assert "- Ana lives in S\ufffdo Paulo" in harness.workspace.read_text("MEMORY.md")
    assert state(harness)["files"]["2027-01-14.md"]["bytes"] == len(data)
    assert harness.consolidate().status == "nothing_new"
    assert len(model.calls) == 1
    assert harness.workspace.read_bytes(DAY1) == data, "the log itself is left alone"


def test_a_utf16_daily_log_is_consolidated_as_text(open_harness: HarnessFactory) -> None:
    """A daily log saved as UTF-16 by another editor reaches the model as its text (not as
    NUL-laden bytes), and is consumed to its real end."""
    model = ScriptedModel(merging_reply)
    harness = open_harness(model)
    data = entry("Ana lives in São Paulo", "Ana has a cat").encode("utf-16")
    harness.workspace.write_bytes(DAY1, data)
    assert harness.consolidate().status == "consolidated"
    _, logs = sections_of(model.calls[-1].messages)
    assert "- Ana lives in São Paulo\n- Ana has a cat" in logs
    assert "\x00" not in logs
    assert state(harness)["files"]["2027-01-14.md"]["bytes"] == len(data)
    assert harness.consolidate().status == "nothing_new"
