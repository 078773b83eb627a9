"""Tests for harnessmem.memory.transcripts: the session log, exactly once, across crashes."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harnessmem.memory.redaction import SecretRedactor
from harnessmem.memory.transcripts import OffloadMark, SessionTranscript, transcript_path
from harnessmem.messages import fingerprint
from harnessmem.testing import ScriptedModel
from harnessmem.workspace import Workspace

if TYPE_CHECKING:
    from conftest import EventLog, HarnessFactory

Message = dict[str, Any]
NOW = 1_780_000_000.25  # 2026-05-28T20:26:40.25Z


def messages(count: int, prefix: str = "m") -> list[Message]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{prefix}{i}"}
        for i in range(1, count + 1)
    ]


def entries(items: list[Message], first: int = 1) -> list[tuple[int | None, Message]]:
    return [(first + i, m) for i, m in enumerate(items)]


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.open(tmp_path / "ws")


@pytest.fixture
def transcript(workspace: Workspace) -> SessionTranscript:
    return SessionTranscript(workspace, "chat-42", clock=lambda: NOW)


def contents(transcript: SessionTranscript) -> list[str]:
    return [r.message["content"] for r in transcript.records()]


def test_records_hold_position_stream_time_fingerprint_and_the_whole_message(
    transcript: SessionTranscript,
) -> None:
    message = {"role": "tool", "tool_call_id": "c1", "content": "out", "id": "x", "timestamp": 5}
    result = transcript.offload([(1, message)])
    assert result.path == "sessions/chat-42.log.jsonl"
    assert (result.appended, result.first_line, result.last_line, result.lines) == (1, 1, 1, (1,))
    line = transcript.workspace.read_text(result.path)
    assert line.endswith("\n")
    assert json.loads(line) == {
        "seq": 1,
        "pos": 1,
        "stream": 1,
        "ts": "2026-05-28T20:26:40.250000Z",
        "fp": fingerprint(message),
        "message": message,
    }


def test_a_line_records_when_its_message_was_said_when_that_is_known(
    transcript: SessionTranscript,
) -> None:
    items = messages(2)
    transcript.offload(entries(items), said=[NOW - 3_600, None])
    lines = [
        json.loads(line) for line in transcript.workspace.read_text(transcript.path).splitlines()
    ]
    assert lines[0]["said"] == "2026-05-28T19:26:40.250000Z"
    assert lines[0]["ts"] == "2026-05-28T20:26:40.250000Z"
    assert "said" not in lines[1], "not known: not invented"
    assert [r.said for r in transcript.records()] == ["2026-05-28T19:26:40.250000Z", None]


def test_each_position_is_written_once_in_order(transcript: SessionTranscript) -> None:
    items = messages(8)
    first = transcript.offload(entries(items[:5]))
    assert first.appended == 5
    again = transcript.offload(entries(items[2:8], first=3))
    assert (again.appended, again.already) == (3, 3)
    assert again.lines == (3, 4, 5, 6, 7, 8)
    assert (again.first_line, again.last_line) == (6, 8)
    assert contents(transcript) == [m["content"] for m in items]
    assert transcript.offload(entries(items)).appended == 0
    assert [r.pos for r in transcript.records()] == list(range(1, 9))


def test_identical_messages_at_different_positions_are_both_kept(
    transcript: SessionTranscript,
) -> None:
    yes = {"role": "user", "content": "yes"}
    transcript.offload([(1, yes), (2, {"role": "assistant", "content": "ok"}), (3, dict(yes))])
    assert contents(transcript) == ["yes", "ok", "yes"]


def test_unknown_positions_are_always_written(transcript: SessionTranscript) -> None:
    transcript.offload([(None, {"role": "user", "content": "stray"})])
    transcript.offload([(None, {"role": "user", "content": "stray"})])
    assert [r.pos for r in transcript.records()] == [None, None]


def test_raw_history_is_matched_against_the_log(transcript: SessionTranscript) -> None:
    """A caller that resends its whole history: verified by the hash chain, no duplicates."""
    history = messages(6)
    transcript.offload(entries(history[:4]), verify=True)
    result = transcript.offload(entries(history), verify=True)
    assert not result.restarted
    assert result.appended == 2
    shorter = transcript.offload(entries(history[:3]), verify=True)
    assert not shorter.restarted
    assert shorter.appended == 0
    assert contents(transcript) == [m["content"] for m in history]


def test_a_different_conversation_under_the_same_id_starts_a_new_stream(
    transcript: SessionTranscript,
) -> None:
    transcript.offload(entries(messages(4)), verify=True)
    other = messages(5, prefix="n")
    result = transcript.offload(entries(other[:3]), verify=True)
    assert result.restarted
    assert result.appended == 3
    assert transcript.offload(entries(other), verify=True).appended == 2
    records = transcript.records()
    assert [(r.stream, r.pos) for r in records] == [
        (1, 1), (1, 2), (1, 3), (1, 4), (2, 1), (2, 2), (2, 3), (2, 4), (2, 5)
    ]  # fmt: skip
    shorter_and_different = transcript.offload(entries(messages(2, prefix="z")), verify=True)
    assert shorter_and_different.restarted


def test_a_crash_between_log_and_mark_is_repaired_without_duplicates(
    transcript: SessionTranscript,
) -> None:
    items = messages(6)
    transcript.offload(entries(items[:2]))
    stale_mark = transcript.workspace.read_text(transcript.mark_path)
    transcript.offload(entries(items[2:4], first=3))
    # The crash: lines 3-4 are in the log, the mark still says 2.
    transcript.workspace.write_text(transcript.mark_path, stale_mark)
    assert transcript.mark().logged == 4
    result = transcript.offload(entries(items, first=1))
    assert result.appended == 2
    assert result.lines == (1, 2, 3, 4, 5, 6)
    assert contents(transcript) == [m["content"] for m in items]


def test_a_partial_last_line_is_closed_before_the_next_append(
    transcript: SessionTranscript, caplog: pytest.LogCaptureFixture
) -> None:
    items = messages(3)
    transcript.offload(entries(items[:1]))
    mark = transcript.workspace.read_text(transcript.mark_path)
    transcript.workspace.append_text(transcript.path, '{"seq": 2, "pos": 2, "mess')  # torn write
    transcript.workspace.write_text(transcript.mark_path, mark)
    result = transcript.offload(entries(items[1:], first=2))
    assert result.appended == 2
    assert result.lines == (3, 4), "the torn line keeps its number"
    assert contents(transcript) == ["m1", "m2", "m3"]
    assert "not a transcript record" in caplog.text
    assert transcript.workspace.read_text(transcript.path).count("\n") == 4


def test_an_unreadable_mark_is_rebuilt_from_the_log(transcript: SessionTranscript) -> None:
    items = messages(4)
    transcript.offload(entries(items[:3]))
    transcript.workspace.write_text(transcript.mark_path, "not json")
    assert transcript.offload(entries(items)).appended == 1
    assert contents(transcript) == [m["content"] for m in items]


def test_a_pruned_log_is_not_refilled_with_old_positions(transcript: SessionTranscript) -> None:
    items = messages(5)
    transcript.offload(entries(items[:3]))
    transcript.workspace.delete(transcript.path)
    result = transcript.offload(entries(items))
    assert result.appended == 2
    assert result.lines == (None, None, None, 1, 2)
    assert [r.pos for r in transcript.records()] == [4, 5]


def test_texts_pass_through_the_offload_transform(workspace: Workspace) -> None:
    seen: list[str] = []

    def redact(text: str, source: str) -> str:
        seen.append(source)
        return text.replace("sk-secret", "[REDACTED]")

    transcript = SessionTranscript(workspace, "r", transform=redact)
    call = {
        "id": "c",
        "type": "function",
        "function": {"name": "f", "arguments": '{"k": "sk-secret"}'},
    }
    message = {
        "role": "user",
        "content": [
            {"type": "text", "text": "key sk-secret"},
            {"type": "image_url", "image_url": {}},
        ],
    }
    assistant = {"role": "assistant", "content": "use sk-secret", "tool_calls": [call]}
    transcript.offload([(1, message), (2, assistant)])
    text = workspace.read_text(transcript.path)
    assert "sk-secret" not in text
    assert text.count("[REDACTED]") == 3
    assert set(seen) == {"offload"}
    assert transcript.records()[0].fp == fingerprint(message), "fingerprints name the original"
    assert message["content"][0]["text"] == "key sk-secret", "the caller's message is untouched"


def test_every_string_of_every_message_is_redacted_whatever_its_key(
    workspace: Workspace,
) -> None:
    """Secrets in the fields a reasoning model or another client library adds reach the log
    redacted: the structural keys and the JSON shape stay as they were.

    When it fails: a kind of field is written without the transform (see ``_redact``)."""
    secret = "sk-proj-AbCdEf1234567890abcdefGHIJ"
    transcript = SessionTranscript(workspace, "f", transform=SecretRedactor().transform_memory_text)
    dict_call = {
        "id": "call_1",
        "type": "function",
        "function": {
            "name": "connect",
            "arguments": {"password": "hunter2", "dsn": {"token": secret}, "n": 3},
        },
    }
    messages: list[Message] = [
        {
            "role": "assistant",
            "content": "done",
            "reasoning_content": f"the user gave me {secret} earlier",
            "function_call": {"name": "login", "arguments": json.dumps({"api_key": secret})},
            "tool_calls": [dict_call],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": f"key {secret}"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": f"again {secret}"}],
                },
                {
                    "type": "image_url",
                    "image_url": {"url": "https://ana:Pa55w0rd@img.example/x.png"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_3",
                    "name": "sh",
                    "input": {"cmd": f"echo {secret}"},
                },
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "name": "connect",
            "content": "ok",
            "extra": [1, None, True, secret],
        },
    ]
    original = json.loads(json.dumps(messages))
    transcript.offload(entries(messages))
    text = workspace.read_text(transcript.path)
    for leaked in (secret, "hunter2", "Pa55w0rd"):
        assert leaked not in text
    logged = [r.message for r in transcript.records()]
    assert messages == original, "the caller's messages are untouched"
    assert [r.fp for r in transcript.records()] == [fingerprint(m) for m in messages]

    def shape(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: shape(v) for k, v in value.items()}
        if isinstance(value, list):
            return [shape(v) for v in value]
        return "str" if isinstance(value, str) else value

    assert shape(logged) == shape(messages), "only string values change"
    assert logged[0]["reasoning_content"] == "the user gave me [REDACTED] earlier"
    arguments = logged[0]["tool_calls"][0]["function"]["arguments"]
    assert arguments == {"password": "[REDACTED]", "dsn": {"token": "[REDACTED]"}, "n": 3}
    assert logged[1]["content"][2]["image_url"]["url"] == (
        "https://ana:[REDACTED]@img.example/x.png"
    )
    structural = [(m.get("role"), m.get("tool_call_id"), m.get("name")) for m in logged]
    assert structural == [(m.get("role"), m.get("tool_call_id"), m.get("name")) for m in messages]
    assert logged[0]["tool_calls"][0]["id"] == "call_1"
    assert logged[0]["function_call"]["name"] == "login"
    assert [p.get("tool_use_id") or p.get("id") for p in logged[1]["content"]] == [
        "toolu_1",
        "toolu_2",
        None,
        "toolu_3",
    ]
    assert [p["type"] for p in logged[1]["content"]] == [p["type"] for p in messages[1]["content"]]


def test_concurrent_offloads_write_each_position_once(workspace: Workspace) -> None:
    """Two writers (as two processes would be: separate objects) racing on one session."""
    items = messages(40)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def writer(start: int) -> None:
        transcript = SessionTranscript(workspace, "race")
        barrier.wait()
        try:
            for end in range(start, 41, 7):
                transcript.offload(entries(items[:end]))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s,)) for s in (3, 5, 8, 13)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    transcript = SessionTranscript(workspace, "race")
    positions = [r.pos for r in transcript.records()]
    assert positions == sorted(set(positions))
    assert [r.seq for r in transcript.records()] == list(range(1, len(positions) + 1))
    assert transcript.mark().logged == positions[-1]


def _check_store(workspace: Workspace) -> None:
    transcript = SessionTranscript(workspace, "m")
    transcript.offload(entries(messages(3)))
    transcript.offload(entries(messages(5)))
    assert contents(transcript) == ["m1", "m2", "m3", "m4", "m5"]
    other = SessionTranscript(workspace, "m")  # another process: reads the mark back
    assert other.offload(entries(messages(6))).appended == 1


def test_works_in_memory(tmp_path: Path) -> None:
    workspace = Workspace.open(f"memory://transcripts-{tmp_path.name}")
    _check_store(workspace)


@pytest.mark.s3
def test_works_on_s3(s3_workspace_url: str, s3_storage_options: dict[str, str]) -> None:
    _check_store(Workspace.open(s3_workspace_url, s3_storage_options))


@pytest.mark.parametrize(
    ("session_id", "check"),
    [
        ("chat-42", lambda p: p == "sessions/chat-42.log.jsonl"),
        ("../../etc/passwd", lambda p: p.startswith("sessions/") and p.count("/") == 1),
        ("a/b", lambda p: p.count("/") == 1),
    ],
)
def test_transcript_path_is_confined(session_id: str, check: Callable[[str], bool]) -> None:
    assert check(transcript_path(session_id))


def test_mark_round_trip() -> None:
    mark = OffloadMark(lines=7, size=99, stream=2, logged=5, chain="ab", segments=((1, 3),))
    assert OffloadMark.from_json(mark.to_json()) == mark
    assert mark.line_of(1) == 3
    assert mark.line_of(5) == 7
    assert mark.line_of(6) is None
    assert mark.line_of(0) is None


# -- odd characters in messages (issue 17) --------------------------------------------------------


def _listed_name(tmp_path: Path) -> str:
    """A file name as ``os.listdir`` gives it for a name that is not UTF-8 (``\\xff``)."""
    folder = tmp_path / "reports"
    folder.mkdir()
    try:
        with open(os.path.join(os.fsencode(folder), b"report-\xff.txt"), "wb"):
            pass
    except OSError as exc:  # a filesystem that insists on UTF-8 names
        pytest.skip(f"cannot create a non-UTF-8 file name here: {exc}")
    (name,) = os.listdir(folder)
    assert name == "report-\udcff.txt"
    return name


def test_a_lone_surrogate_loses_no_turn(
    open_harness: HarnessFactory, tmp_path: Path, events: EventLog
) -> None:
    """A tool output with a surrogateescape'd file name, then 60 turns with a small trigger:
    every message compaction takes out of the context is in the session log, positions
    contiguous from 1, the odd character stored as U+FFFD; the flush writes its fact once."""
    name = _listed_name(tmp_path)

    def reply(messages: list[Message], purpose: str) -> str:
        if purpose == "summary":
            return "## SESSION INTENT\nx\n## SUMMARY\ny\n## ARTIFACTS\nz\n## NEXT STEPS\nw"
        return f"- The reports folder holds {name}"

    harness = open_harness(
        ScriptedModel(reply), compaction={"trigger_messages": 10, "keep_messages": 4}
    )
    session = harness.session("odd")
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    history: list[Message] = [
        {"role": "user", "content": "list the reports"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps([name], ensure_ascii=False)},
    ]
    context: list[Message] = [{"role": "system", "content": "You file reports."}, *history]
    for turn in range(60):
        question = {"role": "user", "content": f"question {turn}"}
        history.append(question)
        context = session.before_reasoning([*context, question])
        answer = {"role": "assistant", "content": f"answer {turn}"}
        history.append(answer)
        context = [*context, answer]
        session.after_call(context)
    records = SessionTranscript(harness.workspace, "odd").records()
    kept = sum(1 for m in context if m in history)
    assert len(records) >= len(history) - kept, "some dropped turns are not in the log"
    assert [r.pos for r in records] == list(range(1, len(records) + 1))
    assert [r.message.get("content") for r in records] == [
        None if m["content"] is None else m["content"].replace("\udcff", "\ufffd")
        for m in history[: len(records)]
    ]
    assert records[1].message["tool_calls"] == [call]
    assert not any(e.degraded for e in events.compactions)
    daily = [p for p in harness.workspace.list("memory") if p.endswith(".md")]
    text = harness.workspace.read_text(daily[0])
    assert text.count("report-\ufffd.txt") == 1, text
