"""The memory flush: high-water mark, NO_REPLY, write-time dedup, redaction, modes.

Every test that opens a harness runs on a local folder and on S3 (``workspace_target``).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harnessmem import (
    HarnessMemError,
    MemoryHarness,
    ModelResponseError,
    ModelUnavailableError,
)
from harnessmem.memory.files import is_no_reply, normalise_fact, parse_facts
from harnessmem.memory.flush import FlushResult, render_transcript
from harnessmem.testing import FakeClock, ScriptedModel

if TYPE_CHECKING:
    from conftest import EventLog, HarnessFactory, WorkspaceTarget

TODAY = "memory/2027-01-15.md"
SECRET = "sk-proj-Zq8Xw7Vt6Us5Rr4Qp3On2Ml1"


def conversation(*texts: str) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": text} for i, text in enumerate(texts)]


def log_text(harness: MemoryHarness, path: str = TODAY) -> str:
    return harness.workspace.read_text(path)


def test_entry_format_and_memory_md_untouched(
    open_harness: HarnessFactory, events: EventLog
) -> None:
    harness = open_harness(ScriptedModel("- Ana lives in Lisbon\n- Ana prefers aisle seats"))
    harness.workspace.write_text("MEMORY.md", "## People\n- Ana is a pilot\n")
    before = harness.workspace.info("MEMORY.md")
    ctx = harness.session("chat-42").after_call(conversation("I live in Lisbon", "Noted"))
    result = ctx.outcomes["flush"]
    assert result.written
    assert result.path == TODAY
    assert result.entries == ("Ana lives in Lisbon", "Ana prefers aisle seats")
    assert log_text(harness) == (
        "\n## Memory Flush — 2027-01-15T08:00:00Z · session chat-42\n"
        "- Ana lives in Lisbon\n- Ana prefers aisle seats\n"
    )
    assert harness.workspace.info("MEMORY.md") == before, "the flush never writes MEMORY.md"
    assert harness.workspace.read_text("MEMORY.md") == "## People\n- Ana is a pilot\n"
    [event] = events.flushed
    assert (event.session_id, event.path, event.messages) == ("chat-42", TODAY, 2)


def test_same_conversation_twice_writes_each_fact_once(open_harness: HarnessFactory) -> None:
    model = ScriptedModel("- Ana lives in Lisbon\n- The trip is on 2027-02-01")
    harness = open_harness(model)
    messages = conversation("I live in Lisbon; trip on Feb 1st", "Great")
    assert harness.session("a").after_call(messages).outcomes["flush"].written
    second = harness.session("a").after_call(messages).outcomes["flush"]
    assert second.status == "nothing_new"
    assert len(model.calls) == 1, "the high-water mark keeps flushed messages from the model"
    # Another session (or a lost mark) with the same conversation: dedup at write time.
    third = harness.flush(messages, session_id="b")
    assert third.status == "duplicates"
    assert third.duplicates == 2
    text = log_text(harness)
    assert text.count("Ana lives in Lisbon") == 1
    assert text.count("The trip is on 2027-02-01") == 1


def test_only_unflushed_messages_reach_the_model(open_harness: HarnessFactory) -> None:
    model = ScriptedModel("NO_REPLY")
    harness = open_harness(model)
    session = harness.session("s")
    first = conversation("alpha question", "alpha answer")
    session.after_call(first)
    session.after_call([*first, *conversation("beta question", "beta answer")])
    sent = model.calls[1].messages[-1]["content"]
    assert "beta question" in sent
    assert "beta answer" in sent
    assert "alpha question" not in sent


def test_mark_finds_new_messages_after_compaction_rewrote_the_list(
    open_harness: HarnessFactory,
) -> None:
    model = ScriptedModel("NO_REPLY")
    harness = open_harness(model)
    session = harness.session("s")
    history = conversation(*(f"turn {i}" for i in range(10)))
    session.after_call(history)
    summary = {"role": "user", "name": "__compaction_summary__", "content": "SUMMARY ..."}
    compacted = [{"role": "system", "content": "be nice"}, summary, *history[-4:]]
    assert session.after_call(compacted).outcomes["flush"].status == "nothing_new"
    [state] = harness.workspace.list("memory/.flush_state")
    mark = json.loads(harness.workspace.read_text(state))["mark"]
    assert mark["count"] == len(compacted), "fast path next"
    compacted.append({"role": "user", "content": "turn 10"})
    session.after_call(compacted)
    sent = model.calls[-1].messages[-1]["content"]
    assert "turn 10" in sent
    assert "turn 9" not in sent
    assert "SUMMARY" not in sent
    assert "be nice" not in sent
    # The compactor's own flush of the prefix: all of it was flushed already.
    assert harness.flush(history[:6], session_id="s").status == "nothing_new"
    assert len(model.calls) == 2


def test_mark_is_persisted_in_the_workspace(open_harness: HarnessFactory) -> None:
    model = ScriptedModel("- Ana lives in Lisbon")
    messages = conversation("I live in Lisbon")
    harness = open_harness(model)
    harness.flush(messages, session_id="chat/1")
    workspace = harness.workspace
    [path] = workspace.list("memory/.flush_state")
    state = json.loads(workspace.read_text(path))
    assert state["session"] == "chat/1"
    assert state["pending"]["mark"]["count"] == 1, "adopted once the entry is found in the log"
    assert state["pending"]["entry"] in workspace.read_text(TODAY)
    again = open_harness(model)  # a new process, as far as the files are concerned
    assert again.flush(messages, session_id="chat/1").status == "nothing_new"
    assert len(model.calls) == 1


@pytest.mark.parametrize(
    "answer",
    [
        "NO_REPLY",
        "  NO_REPLY\n",
        "`NO_REPLY`",
        '"NO_REPLY."',
        "```\nNO_REPLY\n```",
        "no reply",
        "**NO-REPLY** - nothing new worth remembering",
    ],
)
def test_no_reply_in_any_dress_writes_nothing(open_harness: HarnessFactory, answer: str) -> None:
    model = ScriptedModel(answer)
    harness = open_harness(model)
    messages = conversation("hello", "hi")
    assert harness.flush(messages, session_id="s").status == "no_reply"
    assert not harness.workspace.exists(TODAY)
    assert harness.flush(messages, session_id="s").status == "nothing_new", "mark advanced"


def test_an_answer_without_facts_writes_nothing(open_harness: HarnessFactory) -> None:
    harness = open_harness(ScriptedModel("Here is what I found:\n\n# Facts\n"))
    result = harness.flush(conversation("hello"), session_id="s")
    assert (result.status, result.warnings) == (
        "no_reply",
        ("the answer held no facts; taken as NO_REPLY",),
    )
    assert not harness.workspace.exists(TODAY)


def test_empty_answer_is_a_failure_that_keeps_the_mark(open_harness: HarnessFactory) -> None:
    model = ScriptedModel(["", "- Ana lives in Lisbon"])
    harness = open_harness(model)
    messages = conversation("I live in Lisbon")
    with pytest.raises(ModelResponseError, match="empty answer"):
        harness.flush(messages, session_id="s")
    assert harness.flush(messages, session_id="s").written, "the messages were sent again"


def test_facts_are_parsed_from_lists_and_prose() -> None:
    answer = (
        "Here are the new facts:\n\n"
        "```markdown\n"
        "- Ana lives in Lisbon\n"
        "* Ana's flight is\n  on 2027-02-01\n"
        "1. Budget is 300 EUR\n"
        "- [ ] Book the hotel\n"
        "```\n"
        "Let me know if you need more."
    )
    assert parse_facts(answer) == [
        "Ana lives in Lisbon",
        "Ana's flight is on 2027-02-01",
        "Budget is 300 EUR",
        "Book the hotel",
    ]
    assert parse_facts("# Facts\nAna lives in Lisbon\nNew facts:\nNO_REPLY") == [
        "Ana lives in Lisbon"
    ]
    assert not is_no_reply("- NO_REPLY is not a fact but this list is")
    assert normalise_fact("* The user lives in **Lisbon**.") == normalise_fact(
        "- the user   lives in Lisbon"
    )
    assert normalise_fact("- Ana\u2019s \u201cflat\u201d") == normalise_fact('Ana\'s "flat"')


def test_dedup_against_todays_log_and_memory_md(open_harness: HarnessFactory) -> None:
    model = ScriptedModel(
        "- The user lives in lisbon\n- ANA PREFERS AISLE SEATS!\n- Ana has a cat\n- Ana has a cat."
    )
    harness = open_harness(model)
    harness.workspace.write_text(
        TODAY, "\n## Memory Flush — x · session old\n- The user lives in **Lisbon**.\n"
    )
    harness.workspace.write_text("MEMORY.md", "## Travel\n- Ana prefers aisle seats\n")
    result = harness.flush(conversation("chat"), session_id="s")
    assert result.entries == ("Ana has a cat",)
    assert result.duplicates == 3, "two already on file, one repeated within the answer"
    assert log_text(harness).count("Ana has a cat") == 1


def test_secret_in_a_user_message_never_reaches_a_file(
    open_harness: HarnessFactory, workspace_target: WorkspaceTarget, tmp_path: Path
) -> None:
    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        if purpose == "flush":
            return f"- Ana's deploy key is {SECRET} and it expires on Friday"
        return messages[-1]["content"].split("<daily_logs>")[1].split("</daily_logs>")[0]

    harness = open_harness(ScriptedModel(reply))
    messages = conversation(f"my deploy key is {SECRET}, it expires Friday", "ok")
    harness.session("s").after_call(messages)
    harness.save(f"- the staging password is hunter2 and the key {SECRET}")
    harness.consolidate()
    text = log_text(harness)
    assert "- Ana's deploy key is [REDACTED] and it expires on Friday" in text
    harness.close()  # the index database included: every byte stored
    files = workspace_target.stored_bytes(tmp_path)
    assert {"MEMORY.md", "2027-01-15.md", "memory_index.db"} <= {
        path.rsplit("/", 1)[-1] for path in files
    }
    for path, content in files.items():
        assert SECRET.encode() not in content, path
        assert b"hunter2" not in content, path


def test_reference_is_bounded(open_harness: HarnessFactory) -> None:
    model = ScriptedModel("NO_REPLY")
    harness = open_harness(model, flush={"reference_chars": 1_000, "reference": "full"})
    harness.workspace.write_text("MEMORY.md", "- old fact\n" * 5_000)
    harness.workspace.write_text(TODAY, "- early\n" + "- today fact\n" * 5_000 + "- latest\n")
    harness.flush(conversation("hello"), session_id="s")
    prompt = model.calls[0].messages[-1]["content"]
    assert len(prompt) < 3_000
    assert "- latest" in prompt, "the newest part of today's log is the useful reference"
    assert "- early" not in prompt
    assert "more characters of MEMORY.md not shown" in prompt


def test_daily_file_uses_the_workspace_time_zone(
    open_harness: HarnessFactory, clock: FakeClock
) -> None:
    clock.now = 1_796_155_200.0  # 2026-12-01T20:00:00Z, already 2 Dec in Auckland
    harness = open_harness(
        ScriptedModel("- Ana lands at 9"), workspace={"timezone": "Pacific/Auckland"}
    )
    result = harness.flush(conversation("landing at 9"), session_id="s")
    assert result.path == "memory/2026-12-02.md"
    assert "## Memory Flush — 2026-12-01T20:00:00Z · session s" in log_text(harness, result.path)


def test_model_failure_never_breaks_the_agent_loop(
    open_harness: HarnessFactory, caplog: Any
) -> None:
    model = ScriptedModel([ModelUnavailableError("down"), ModelUnavailableError("down"), "- x1"])
    harness = open_harness(model)
    session = harness.session("s")
    messages = conversation("remember x1")
    result = session.after_call(messages).outcomes["flush"]
    assert isinstance(result, FlushResult)
    assert (result.status, result.ok) == ("failed", False)
    assert "ModelUnavailableError: down" in (result.error or "")
    assert "memory flush of session 's' failed" in caplog.text
    with pytest.raises(ModelUnavailableError, match="down"):
        harness.flush(messages, session_id="s")  # a direct call raises
    # Two failures in a row: the next two automatic flushes do not ask the model.
    for _ in range(2):
        deferred = session.after_call(messages).outcomes["flush"]
        assert (deferred.status, deferred.ok) == ("deferred", False)
        assert "backed off after 2 failure(s)" in (deferred.error or "")
    assert len(model.calls) == 2
    assert session.after_call(messages).outcomes["flush"].entries == ("x1",)


def test_a_backed_off_flush_skips_no_message(open_harness: HarnessFactory) -> None:
    """While the flush model is backed off the mark stays: the next flush that asks it
    gets every message the deferred ones did not send."""
    answers = iter([ModelUnavailableError("down"), "- Ana likes tea\n- Bo likes rain"])

    def reply(messages: list[dict[str, Any]], purpose: str) -> str | BaseException:
        return next(answers)

    model = ScriptedModel(reply)
    harness = open_harness(model)
    session = harness.session("b")
    messages = conversation("Ana likes tea")
    assert session.after_call(messages).outcomes["flush"].status == "failed"
    messages += [{"role": "user", "content": "Bo likes rain"}]
    assert session.after_call(messages).outcomes["flush"].status == "deferred"
    messages += [{"role": "assistant", "content": "Noted."}]
    written = session.after_call(messages).outcomes["flush"]
    assert written.entries == ("Ana likes tea", "Bo likes rain")
    sent = model.calls[-1].messages[-1]["content"]
    for said in ("Ana likes tea", "Bo likes rain", "Noted."):
        assert said in sent
    assert harness.kernel.flusher.backoff_state("b").failures == 0


def test_any_model_crash_is_reported_not_raised(open_harness: HarnessFactory) -> None:
    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        raise RuntimeError("client library bug")

    harness = open_harness(ScriptedModel(reply))
    ctx = harness.session("s").after_call(conversation("hello"))
    assert ctx.outcomes["flush"].status == "failed"
    assert ctx.outcomes["flush"].error == "RuntimeError: client library bug"
    with pytest.raises(RuntimeError, match="client library bug"):
        harness.flush(conversation("hello"), session_id="s")


def test_flush_can_be_disabled_and_plugin_blocked(open_harness: HarnessFactory) -> None:
    model = ScriptedModel("- fact")
    harness = open_harness(model, flush={"enabled": False})
    assert harness.session("s").after_call(conversation("x")).outcomes["flush"].status == (
        "disabled"
    )
    blocked = open_harness(model, plugins={"disable": ["flush"]})
    assert "flush" not in blocked.session("s").after_call(conversation("x")).outcomes
    assert model.calls == []
    assert blocked.flush(conversation("x"), session_id="s").written, "direct calls still work"


def test_reindex_and_consolidation_request_follow_a_write(
    open_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = open_harness(ScriptedModel("- fact one"), consolidation={"min_new_tokens": 0})
    calls: list[Any] = []
    monkeypatch.setattr(harness.kernel, "reindex", lambda paths: calls.append(paths))
    monkeypatch.setattr(
        harness.kernel, "request_maintenance", lambda: calls.append("maintain") or True
    )
    harness.flush(conversation("a"), session_id="s")
    assert calls == [[TODAY], "maintain"]

    def broken(paths: list[str]) -> None:
        raise RuntimeError("index is read-only")

    monkeypatch.setattr(harness.kernel, "reindex", broken)
    result = harness.flush(conversation("a", "b"), session_id="s2")
    assert result.status == "duplicates"  # nothing new to write: no reindex needed
    harness.workspace.delete(TODAY)
    result = harness.flush(conversation("a", "b", "c"), session_id="s3")
    assert result.written, "the write is verified; the index failure is reported beside it"
    assert result.warnings == ("reindex failed: RuntimeError: index is read-only",)


def test_transcript_rendering() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "book", "arguments": '{"x":1}'}}
    messages = [
        {"role": "system", "content": "system prompt"},
        {"role": "user", "content": [{"type": "text", "text": "book it"}, {"type": "image_url"}]},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "y" * 5_000},
        {"role": "assistant", "content": "z" * 10_000},
        {"role": "user", "name": "__compaction_summary__", "content": "old summary"},
    ]
    text = render_transcript(messages)
    assert "system prompt" not in text
    assert "old summary" not in text
    assert text.startswith('[user]: book it\n[image]\n[assistant]:\n[tool_call: book({"x":1})]')
    assert "\n[tool_result: book]: yyy" in text
    assert len(text) < 6_000
    assert render_transcript([{"role": "assistant", "content": ""}]) == ""


def test_transcript_names_the_speaker_of_a_named_message() -> None:
    """People in one chat are users with names: the flush must see whose words these are
    (its renderer dropped the name, so the extractive model wrote "The user ..." for both)."""
    messages = [
        {"role": "user", "name": "Ines", "content": "I moved to Porto."},
        {"role": "user", "name": "Tomas", "content": "I started a pottery class."},
        {"role": "assistant", "content": "Noted."},
        {"role": "tool", "name": "lookup", "tool_call_id": "c1", "content": "ok"},
    ]
    assert render_transcript(messages, lean=True).splitlines() == [
        "[user Ines]: I moved to Porto.",
        "[user Tomas]: I started a pottery class.",
        "[assistant]: Noted.",
        "[tool_result: lookup]: ok",
    ]


def test_flush_attributes_each_fact_to_its_speaker(open_harness: HarnessFactory) -> None:
    """The offline extractive flush of a chat between two people writes their names (and
    the date "last week" meant: the clock is Friday 2027-01-15)."""
    harness = open_harness()
    messages = [
        {"role": "user", "name": "Ines", "content": "I finally moved to Porto last week."},
        {"role": "user", "name": "Tomas", "content": "I started a pottery class on Tuesdays."},
    ]
    result = harness.flush(messages, session_id="chat")
    assert result.entries == (
        "Ines finally moved to Porto in the week of 2027-01-04.",
        "Tomas started a pottery class on Tuesdays.",
    )


def test_background_mode_queues_and_close_drains(open_harness: HarnessFactory) -> None:
    model = ScriptedModel([ModelUnavailableError("blip"), "- Ana lives in Lisbon"])
    harness = open_harness(model, flush={"mode": "background", "retry_delay": 0})
    ctx = harness.session("s").after_call(conversation("I live in Lisbon"))
    assert ctx.outcomes["flush"].status == "queued"
    harness.close()
    assert "- Ana lives in Lisbon" in log_text(harness), "retried once, then written"


def test_background_flush_after_draining_began_runs_inline(open_harness: HarnessFactory) -> None:
    harness = open_harness(ScriptedModel("- Ana has a cat"), flush={"mode": "background"})
    flusher = harness.kernel.flusher
    assert flusher.submit(conversation("first"), session_id="s").status == "queued"
    flusher.drain(timeout=30)  # what close() does first
    late = flusher.submit(conversation("first", "I have a cat"), session_id="s")
    assert late.status == "duplicates", "flushed inline: nothing queued after the drain"


def test_background_failures_are_parked_and_retried_at_close(open_harness: HarnessFactory) -> None:
    failed = threading.Event()
    healthy = threading.Event()

    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        if not healthy.is_set():
            failed.set()
            raise ModelUnavailableError("down")
        return "- Ana lives in Lisbon"

    harness = open_harness(
        ScriptedModel(reply), flush={"mode": "background", "retries": 0, "retry_delay": 0}
    )
    harness.session("s").after_call(conversation("I live in Lisbon"))
    assert failed.wait(30)
    healthy.set()
    harness.close()
    assert "- Ana lives in Lisbon" in log_text(harness)


def test_concurrent_flushes_into_one_log_write_a_fact_once(open_harness: HarnessFactory) -> None:
    both_answered = threading.Barrier(2, timeout=30)

    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        both_answered.wait()  # both flushes have read the log before either writes
        return "- Ana lives in Lisbon"

    harness = open_harness(ScriptedModel(reply))
    results: list[FlushResult] = []
    threads = [
        threading.Thread(
            target=lambda sid=sid: results.append(
                harness.flush(conversation("Lisbon!"), session_id=sid)
            )
        )
        for sid in ("a", "b")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.status for r in results) == ["duplicates", "written"]
    assert log_text(harness).count("Ana lives in Lisbon") == 1


def test_interrupted_append_is_resolved_by_the_log(
    open_harness: HarnessFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        return "- Ana has a cat" if "cat" in messages[-1]["content"] else "- Ana lives in Lisbon"

    model = ScriptedModel(reply)
    harness = open_harness(model)
    workspace = harness.workspace
    messages = conversation("I live in Lisbon")
    real_update = workspace.update_text

    def broken_disk(path: str, change: Any, **kwargs: Any) -> Any:
        if path.startswith("memory/"):
            raise OSError("disk gone")
        return real_update(path, change, **kwargs)

    monkeypatch.setattr(workspace, "update_text", broken_disk)
    with pytest.raises(OSError, match="disk gone"):
        harness.flush(messages, session_id="s")
    monkeypatch.setattr(workspace, "update_text", real_update)
    assert harness.flush(messages, session_id="s").written, "not in the log: sent again"

    # The append lands and the process dies before returning: the log has the entry, the
    # state file only the pending mark. The next flush adopts it without asking the model.
    def append_then_die(path: str, change: Any, **kwargs: Any) -> Any:
        written = real_update(path, change, **kwargs)
        if path.startswith("memory/"):
            raise KeyboardInterrupt("killed")
        return written

    monkeypatch.setattr(workspace, "update_text", append_then_die)
    more = [*messages, {"role": "user", "content": "and I have a cat"}]
    with pytest.raises(KeyboardInterrupt):
        harness.flush(more, session_id="s")
    monkeypatch.setattr(workspace, "update_text", real_update)
    calls = len(model.calls)
    assert harness.flush(more, session_id="s").status == "nothing_new"
    assert len(model.calls) == calls, "the pending mark was adopted: no second extraction"
    assert log_text(harness).count("Ana has a cat") == 1


def test_bad_arguments_are_clear(open_harness: HarnessFactory) -> None:
    harness = open_harness(ScriptedModel("NO_REPLY"))
    with pytest.raises(ValueError, match="session id"):
        harness.flush([], session_id=" ")
    with pytest.raises(TypeError, match="list of dicts"):
        harness.flush("hello", session_id="s")  # type: ignore[arg-type]
    harness.close()
    with pytest.raises(HarnessMemError, match="closed"):
        harness.flush([], session_id="s")


def test_facts_logged_on_an_earlier_day_are_found_through_the_index(
    open_harness: HarnessFactory, clock: FakeClock
) -> None:
    model = ScriptedModel("- Ana's passport number ends in 4471\n- Ana booked seat 12C")
    harness = open_harness(model)
    harness.flush(conversation("passport"), session_id="monday")
    clock.advance(86_400)
    model_2 = ScriptedModel("- ana's passport number ends in 4471.\n- Ana booked a hotel")
    harness_2 = open_harness(model_2)
    result = harness_2.flush(conversation("passport again"), session_id="tuesday")
    assert result.entries == ("Ana booked a hotel",)
    assert result.duplicates == 1
    blind = open_harness(ScriptedModel("- Ana booked seat 12C"), flush={"dedup_search": False})
    assert blind.flush(conversation("seat"), session_id="wed").written, "today's log only"


# -- files that are not UTF-8 (issue 17) ---------------------------------------------------------


def test_a_daily_log_that_is_not_utf8_does_not_stop_the_flush(
    open_harness: HarnessFactory,
) -> None:
    """A Latin-1 byte in today's log: every flush still writes, the facts in the log still
    count for dedup, and the log's bytes are kept in memory/.history/ before the append
    turns the file into UTF-8."""
    harness = open_harness(
        ScriptedModel(["- Ana lives in São Paulo\n- Ana has a cat", "- Ana likes tea"])
    )
    head = "\n## Memory Flush — 2027-01-15T07:00:00Z · session x\n- Ana has a cat\n"
    original = head.encode() + b"- S\xe3o\n"  # UTF-8, then one Latin-1 edit
    harness.workspace.write_bytes(TODAY, original)
    first = harness.flush(conversation("I live in São Paulo"), session_id="s")
    assert first.written
    assert first.entries == ("Ana lives in São Paulo",), "the cat was in the log already"
    second = harness.flush(conversation("I live in São Paulo", "ok", "I like tea"), session_id="s")
    assert second.entries == ("Ana likes tea",)
    text = log_text(harness)
    assert text.startswith(f"{head}- S\ufffdo\n")
    assert text.endswith("- Ana likes tea\n")
    kept = harness.workspace.list("memory/.history")
    assert [harness.workspace.read_bytes(p) for p in kept] == [original]


def test_a_flush_state_file_that_is_not_utf8_does_not_stop_the_session(
    open_harness: HarnessFactory,
) -> None:
    """A Latin-1 byte in memory/.flush_state/<id>.json: the state is still read (its
    high-water mark holds), and the session's flushes go on."""
    model = ScriptedModel(["- Ana lives in Lisbon", "- Ana likes tea"])
    harness = open_harness(model)
    messages = conversation("I live in Lisbon")
    assert harness.flush(messages, session_id="s").written
    [path] = harness.workspace.list("memory/.flush_state")
    data = harness.workspace.read_bytes(path).replace(b'"session": "s"', b'"session": "S\xe3o"')
    harness.workspace.write_bytes(path, data)
    again = open_harness(model)  # a new process: the state comes from the file
    assert again.flush(messages, session_id="s").status == "nothing_new", "the mark held"
    assert again.flush([*messages, *conversation("I like tea")], session_id="s").written
    assert len(model.calls) == 2


# -- refusals and the harness's own markers are never facts (issue 17) ---------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "I cannot help with that.",
        "I can't help with that request.",
        "I'm sorry, but I can't assist with this.\nIt may contain personal data.",
        "**Sorry**, I am unable to extract facts from this conversation.",
        "As an AI, I do not store personal information.",
        "I\u2019m not able to do that.",
    ],
)
def test_a_refusal_is_not_stored_as_a_fact(open_harness: HarnessFactory, answer: str) -> None:
    harness = open_harness(ScriptedModel(answer))
    result = harness.flush(conversation("I live in Lisbon"), session_id="s")
    assert result.status == "no_reply"
    assert result.warnings == ("the answer was a refusal, not facts; nothing written",)
    assert not harness.workspace.exists(TODAY)
    assert parse_facts(answer) == []


def test_bullets_that_start_like_a_refusal_are_still_facts() -> None:
    assert parse_facts("- I can't eat peanuts\n- Sorry is Ana's cat") == [
        "I can't eat peanuts",
        "Sorry is Ana's cat",
    ]
    assert parse_facts("Ana can't eat peanuts.") == ["Ana can't eat peanuts."]


def test_harness_markers_are_never_facts(open_harness: HarnessFactory) -> None:
    """The extractive flush (no model configured) and a model that copies a marker: the
    eviction, shrink and context markers of the harness never reach the daily log."""
    from harnessmem.eviction import placeholder

    pasted = "I prefer CSV exports. " * 5 + "x" * 50_000
    evicted = placeholder(pasted, "large_tool_results/s/c1-0123.txt", 200)
    assert "[harnessmem: " in evicted
    shrunk = (
        "[harnessmem: this tool output (30,000,000 characters) is in the session log "
        "sessions/s.log.jsonl, line 7; read it with memory_get (path 'sessions/s.log.jsonl', "
        "start_line 7, lines 1).]"
    )
    context = (
        "[… MEMORY.md lines 3-90 (5000 tokens) are not shown: the file has 9000 tokens, over "
        "context.max_tokens = 4000. …]"
    )
    harness = open_harness()  # no model name: the offline extractive backend
    messages = conversation(
        evicted, "Noted.", f"{shrunk}\n{context}\nMy name is Ana Lopes.", "Hi Ana."
    )
    result = harness.flush(messages, session_id="s")
    assert result.written
    text = log_text(harness)
    assert "[harnessmem" not in text
    assert "[…" not in text
    assert "CSV" in text
    copier = open_harness(
        ScriptedModel(f"- Ana prefers CSV\n- {shrunk}\n- {context}\n{evicted[-300:]}")
    )
    copied = copier.flush(conversation("I prefer CSV"), session_id="s2")
    assert copied.entries == ("Ana prefers CSV",)
