"""Forget and edit (harnessmem.memory.erasure): a fact leaves every file and the index, and
stays gone after the next flush of an old conversation and a consolidation."""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from harnessmem import ForgetError, layout
from harnessmem.memory import files as mf
from harnessmem.memory.transcripts import SessionTranscript
from harnessmem.testing import ScriptedModel, run_at_once

DAY = 86_400.0
#: Rounds of flushes racing a forget.
ROUNDS = 50
TOKEN = b"zorblax"
DOG = "fact: the user's dog is called Zorblax"
TOWN = "fact: the user lives in Quimper"
TEA = "fact: the user prefers green tea"
_FACT = re.compile(r"(?im)^\s*(?:-\s+|FACT:\s*)(fact: [^\n]+?)\s*$")


def _answer(messages: list[dict[str, Any]], purpose: str) -> str:
    """A flush lists the ``FACT:`` lines of the conversation; a consolidation keeps every
    fact bullet it was sent (MEMORY.md and the logs), once each."""
    text = "\n".join(str(m.get("content") or "") for m in messages)
    if purpose == "flush":
        found = re.findall(r"FACT: (fact: [^\n\"\\]+)", text)
    else:
        found = _FACT.findall(text)
    facts = list(dict.fromkeys(f.strip() for f in found))
    return mf.bullet_block(facts) if facts else "NO_REPLY"


def _conversation(*facts: str) -> list[dict[str, Any]]:
    said = "\n".join(f"FACT: {fact}" for fact in facts)
    return [
        {"role": "user", "content": f"Some things about me.\n{said}"},
        {"role": "assistant", "content": "Noted, thank you."},
    ]


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel(_answer)


def _files(target: Any, tmp_path: Path) -> dict[str, bytes]:
    """Every stored byte but the lock files (which a lease leaves behind, empty)."""
    stored = target.stored_bytes(tmp_path)
    return {path: data for path, data in stored.items() if f"/{layout.LOCKS_DIR}/" not in path}


def _holding(stored: dict[str, bytes], token: bytes = TOKEN) -> list[str]:
    return sorted(path for path, data in stored.items() if token in data.lower())


def _remembered(harness: Any, conversation: list[dict[str, Any]], clock: Any) -> None:
    """Day one: the conversation is flushed, logged, a result evicted, and consolidated;
    day two: another fact, consolidated again (so memory/.history/ holds day one's text)."""
    harness.flush(conversation, session_id="chat-1")
    SessionTranscript(harness.workspace, "chat-1").offload(list(enumerate(conversation, 1)))
    evicted = layout.eviction_path(layout.EVICTION_DIR, "chat-1", "call-1", "x")
    harness.workspace.write_text(evicted, "line one\nthe dog Zorblax barked\nline three\n")
    assert harness.consolidate().accepted
    clock.advance(DAY)
    harness.flush(_conversation(TEA), session_id="chat-2")
    assert harness.consolidate().accepted


def test_a_forgotten_fact_is_gone_everywhere_and_stays_gone(
    open_harness: Any, workspace_target: Any, model: ScriptedModel, clock: Any, tmp_path: Path
) -> None:
    harness = open_harness(model)
    conversation = _conversation(DOG, TOWN)
    _remembered(harness, conversation, clock)
    assert harness.search("Zorblax")
    assert harness.search("Zorblax", source="sessions")
    before = workspace_target.stored_bytes(tmp_path)
    assert any(layout.HISTORY_DIR in path for path in _holding(before))

    preview = harness.forget("zorblax DOG", dry_run=True, sessions=True)
    assert preview.dry_run
    assert preview.count >= 4
    assert {r.kind for r in preview.removals} >= {"memory", "daily", "session", "evicted"}
    assert workspace_target.stored_bytes(tmp_path) == before  # a dry run changes nothing

    result = harness.forget("zorblax DOG", sessions=True)
    assert result.count == preview.count
    assert result.tombstoned
    assert {r.path for r in result.removals} == {r.path for r in preview.removals}
    assert not harness.search("Zorblax")
    assert not harness.search("Zorblax", source="sessions")
    assert harness.search("Quimper")
    assert harness.search("green tea")
    stored = workspace_target.stored_bytes(tmp_path)
    assert _holding(stored) == []  # no file of the workspace, and not the index either
    if not workspace_target.is_s3:
        assert result.index_scrubbed
        assert harness.kernel.index_path.exists()
    assert b"Quimper" in b"".join(stored.values())

    # The old conversation, flushed again (as another session would), and consolidated.
    again = harness.flush(conversation, session_id="chat-1-replayed")
    assert "Zorblax" not in "".join(again.entries)
    assert any("forgotten" in w for w in again.warnings)
    harness.consolidate()
    assert "Zorblax" not in harness.workspace.read_text(layout.MEMORY_FILE)
    assert "Quimper" in harness.workspace.read_text(layout.MEMORY_FILE)
    assert not harness.search("Zorblax")
    # An older daily log that still holds it (another writer's copy, a restore):
    # consolidation does not take it back into MEMORY.md.
    harness.workspace.write_text(
        layout.daily_log_path("2020-01-01"), f"## Memory Flush — old\n- {DOG}\n- {TOWN}\n"
    )
    harness.consolidate()
    assert "Zorblax" not in harness.workspace.read_text(layout.MEMORY_FILE)


def test_the_session_log_keeps_its_lines_and_bookkeeping(
    open_harness: Any, model: ScriptedModel
) -> None:
    harness = open_harness(model)
    conversation = _conversation(DOG, TOWN)
    transcript = SessionTranscript(harness.workspace, "chat-1")
    transcript.offload(list(enumerate(conversation, 1)))
    before = transcript.records()
    harness.forget("Zorblax", sessions=True)
    after = transcript.records()
    assert [(r.seq, r.pos, r.fp) for r in after] == [(r.seq, r.pos, r.fp) for r in before]
    assert after[0].message["content"] == "[forgotten]"
    assert after[0].message["role"] == "user"
    assert after[1].message == before[1].message
    mark = transcript.mark()
    assert mark.size == harness.workspace.info(transcript.path).size
    # Offloading the same conversation again writes nothing: it is known to be logged.
    again = SessionTranscript(harness.workspace, "chat-1").offload(list(enumerate(conversation, 1)))
    assert again.appended == 0
    assert again.lines == (1, 2)


def test_bad_queries_get_one_clear_error_and_change_nothing(
    open_harness: Any, workspace_target: Any, model: ScriptedModel, tmp_path: Path
) -> None:
    harness = open_harness(model)
    harness.flush(_conversation(DOG, TOWN, TEA), session_id="chat-1")
    before = _files(workspace_target, tmp_path)
    with pytest.raises(ForgetError, match="needs a query"):
        harness.forget("   ")
    with pytest.raises(ForgetError, match="holds no word"):
        harness.forget("?!")
    with pytest.raises(ForgetError, match=r"nothing .* matches 'a unicorn'"):
        harness.forget("a unicorn")
    with pytest.raises(ForgetError, match=r"3 facts match 'user', more than the limit of 2"):
        harness.forget("user", limit=2)
    with pytest.raises(ForgetError, match="holds every word"):
        harness.forget("Quimper", replace_with="fact: the user lives in Quimper, Brittany")
    assert _files(workspace_target, tmp_path) == before
    assert not harness.workspace.exists(layout.TOMBSTONES)


def test_edit_replaces_the_fact_and_the_old_text_does_not_return(
    open_harness: Any, model: ScriptedModel, clock: Any
) -> None:
    harness = open_harness(model)
    harness.flush(_conversation(DOG, TOWN), session_id="chat-1")
    assert harness.consolidate().accepted
    result = harness.forget("Quimper", replace_with="fact: the user lives in Brest")
    assert result.replacement == "fact: the user lives in Brest"
    assert {r.kind for r in result.removals} == {"memory", "daily"}
    memory = harness.workspace.read_text(layout.MEMORY_FILE)
    assert "- fact: the user lives in Brest" in memory
    assert "Quimper" not in memory
    assert [hit.path for hit in harness.search("Brest")]
    assert not harness.search("Quimper")
    # The history keeps the version the edit replaced, as a consolidation's does.
    history = harness.workspace.list(layout.HISTORY_DIR)
    assert "Quimper" in harness.workspace.read_text(history[-1])
    clock.advance(DAY)
    harness.flush(_conversation(TOWN), session_id="chat-1-replayed")
    harness.consolidate()
    assert "Quimper" not in harness.workspace.read_text(layout.MEMORY_FILE)


def test_the_watermark_follows_a_rewritten_log(open_harness: Any, model: ScriptedModel) -> None:
    """A consolidated log that loses a fact is not consolidated again from its start."""
    harness = open_harness(model)
    harness.flush(_conversation(DOG, TOWN), session_id="chat-1")
    assert harness.consolidate().accepted
    calls = len(model.calls)
    harness.forget("Zorblax")
    assert harness.consolidate().status == "nothing_new"
    assert len(model.calls) == calls


class _Gate:
    """A model whose first flush and first consolidation call wait for the test to open
    them, after saying they were reached (so the test knows what was read when)."""

    def __init__(self) -> None:
        self.reached = {p: threading.Event() for p in ("flush", "consolidation")}
        self.opened = {p: threading.Event() for p in ("flush", "consolidation")}
        self.armed = {"flush", "consolidation"}
        self.lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]], purpose: str) -> str:
        with self.lock:
            wait = purpose in self.armed
            self.armed.discard(purpose)
        if wait:
            self.reached[purpose].set()
            assert self.opened[purpose].wait(30)
        return _answer(messages, purpose)


def test_a_forget_racing_a_flush_and_a_consolidation_loses_nothing_else(
    open_harness: Any,
) -> None:
    """The flush read the log before the forget rewrote it and writes after; the
    consolidation holds its lease (with the fact in its prompt) when the forget starts."""
    gate = _Gate()
    harness = open_harness(ScriptedModel(gate))
    gate.armed.clear()
    harness.flush(_conversation(DOG, TOWN), session_id="chat-0")
    gate.armed.update({"flush", "consolidation"})
    bicycle = "fact: the user owns a red bicycle"
    errors: list[BaseException] = []
    results: dict[str, Any] = {}

    def run(name: str, work: Any) -> threading.Thread:
        def target() -> None:
            try:
                results[name] = work()
            except BaseException as exc:  # reported below
                errors.append(exc)

        thread = threading.Thread(target=target)
        thread.start()
        return thread

    flushing = run("flush", lambda: harness.flush(_conversation(bicycle, DOG), session_id="c1"))
    consolidating = run("consolidation", harness.consolidate)
    assert gate.reached["flush"].wait(30)
    assert gate.reached["consolidation"].wait(30)
    forgetting = run("forget", lambda: harness.forget("Zorblax"))
    gate.opened["consolidation"].set()
    consolidating.join()
    forgetting.join()
    gate.opened["flush"].set()
    flushing.join()
    assert errors == []
    assert results["consolidation"].accepted
    assert results["forget"].count >= 1
    assert results["flush"].entries == (bicycle,)
    harness.consolidate()
    logs = "".join(
        harness.workspace.read_text(p) for p in harness.workspace.list(layout.MEMORY_DIR)
    )
    memory = harness.workspace.read_text(layout.MEMORY_FILE)
    assert bicycle in logs
    assert TOWN in logs
    assert TOWN in memory
    assert bicycle in memory
    assert "Zorblax" not in logs
    assert "Zorblax" not in memory


def test_the_sqlite_index_keeps_no_byte_of_the_fact(tmp_path: Path) -> None:
    from harnessmem import MemoryHarness

    with MemoryHarness.open(tmp_path / "ws", maintenance={"enabled": False}) as harness:
        harness.save(f"{DOG}\n{TOWN}")
        lines = [f"- fact {n}: the user read book {n} of many" for n in range(300)]
        harness.workspace.write_text(layout.daily_log_path("2027-01-14"), "\n".join(lines))
        harness.reindex()
        assert harness.search("Zorblax")
        db = harness.kernel.index_path
        assert TOKEN in (db.read_bytes() + _wal(db)).lower()
        harness.forget("Zorblax")
        assert not harness.search("Zorblax")
        assert harness.search("Quimper")
        assert TOKEN not in (db.read_bytes() + _wal(db)).lower()
        with sqlite3.connect(db) as check:
            assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _wal(db: Path) -> bytes:
    wal = db.with_name(db.name + "-wal")
    return wal.read_bytes() if wal.exists() else b""


def test_tombstones_hold_no_word_of_the_fact(open_harness: Any, model: ScriptedModel) -> None:
    harness = open_harness(model)
    harness.flush(_conversation(DOG), session_id="chat-1")
    harness.forget("Zorblax dog")
    raw = harness.workspace.read_text(layout.TOMBSTONES)
    assert "zorblax" not in raw.lower()
    assert "dog" not in raw.lower()
    assert len(json.loads(raw)["tombstones"]) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "# Memory\n\n## Memory Flush — 1\n- a Zorblax\n  more of it\n- keep\n",
            "# Memory\n\n## Memory Flush — 1\n- keep\n",
        ),
        (
            "## Flush 1\n- keep\n\n## Flush 2\n- Zorblax\n\n## Flush 3\n- b\n",
            "## Flush 1\n- keep\n\n## Flush 3\n- b\n",
        ),
        ("## Flush 1\n- keep\n\n## Flush 2\n- Zorblax\n", "## Flush 1\n- keep\n"),
        ("prose about Zorblax\nother prose\n", "other prose\n"),
    ],
)
def test_a_fact_goes_with_its_continuation_lines_and_an_emptied_entry(
    text: str, expected: str
) -> None:
    new, found = mf.rewrite_units(text, lambda unit: "zorblax" in unit.casefold())
    assert new == expected
    assert len(found) == 1


def test_the_summary_names_history_copies_and_pending_flushes_apart() -> None:
    """A flush's pending entry is no copy "in history" (a newcomer saw one where no
    history existed)."""
    from harnessmem.memory.erasure import ForgetResult, Removal

    daily = Removal("memory/2026-05-01.md", 3, "- Zorblax barked", "daily")
    state = Removal("memory/.flush_state/chat.json", 1, "Zorblax barked", "state")
    old = Removal("memory/.history/MEMORY-1.md", 2, "- Zorblax barked", "history")
    pending = ForgetResult("zorblax", True, (daily, state))
    assert str(pending).endswith("in 2 files (and 1 in a flush not yet written)")
    both = ForgetResult("zorblax", False, (daily, state, old))
    assert str(both).endswith("(and 1 copy in history, 1 in a flush not yet written)")
    assert str(ForgetResult("zorblax", False, (daily,))).endswith("in 1 file")


class _Paused:
    """``read_tombstones`` for the flush: its first call reads them, says so, and returns
    only when the test lets it (so the forget can run between the read and the write)."""

    def __init__(self) -> None:
        from harnessmem.memory import flush

        self.real = flush.read_tombstones
        self.reached = threading.Event()
        self.opened = threading.Event()
        self.calls = 0

    def __call__(self, workspace: Any) -> Any:
        stones = self.real(workspace)
        self.calls += 1
        if self.calls == 1:
            self.reached.set()
            assert self.opened.wait(30)
        return stones


def test_a_flush_that_read_the_tombstones_before_a_forget_takes_the_fact_back_out(
    open_harness: Any,
    workspace_target: Any,
    model: ScriptedModel,
    clock: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The flush read today's log (the forget plans it clean) and the tombstones (none yet);
    the forget runs to its end; then the flush's write lands: the fact must not stay."""
    from harnessmem.memory import flush

    harness = open_harness(model)
    harness.flush(_conversation(DOG), session_id="day-1")
    clock.advance(DAY)
    paused = _Paused()
    monkeypatch.setattr(flush, "read_tombstones", paused)
    results: dict[str, Any] = {}
    flushing = threading.Thread(
        target=lambda: results.update(
            flush=harness.flush(_conversation(TOWN, f"{DOG} again"), session_id="day-2")
        )
    )
    flushing.start()
    assert paused.reached.wait(30)
    results["forget"] = harness.forget("Zorblax")
    paused.opened.set()
    flushing.join(30)
    assert not flushing.is_alive()
    assert results["forget"].count == 1
    assert results["flush"].entries == (TOWN,)
    assert any("forgotten meanwhile" in w for w in results["flush"].warnings)
    assert _holding(_files(workspace_target, tmp_path)) == []
    assert not harness.search("Zorblax")
    assert harness.search("Quimper")


def test_flushes_racing_a_forget_never_keep_the_fact(
    open_harness: Any, workspace_target: Any, model: ScriptedModel, tmp_path: Path
) -> None:
    """Fifty rounds: four threads append the round's fact (each in its own words) and a fact
    of their own to today's log while the fact is forgotten; after each round no stored
    byte, index row or search hit holds it, and every thread's own fact is on file."""
    harness = open_harness(model)
    said: dict[str, list[dict[str, Any]]] = {name: [] for name in ("seed", "0", "1", "2", "3")}

    def tell(name: str, *facts: str) -> None:
        # Each session goes on (its mark moves along), so the flush states stay five.
        said[name] += _conversation(*facts)
        harness.flush(list(said[name]), session_id=f"session-{name}")

    for round_ in range(ROUNDS):
        token = f"zorb{round_}x"
        tell("seed", f"fact: the dog is called {token}")
        jobs = [
            functools.partial(
                tell,
                str(n),
                f"fact: thread {n} saw the dog {token}",
                f"fact: thread {n} of {round_}",
            )
            for n in range(4)
        ]
        jobs.append(functools.partial(harness.forget, token, limit=50))
        assert run_at_once(jobs) == []
        stored = _files(workspace_target, tmp_path)
        assert _holding(stored, token.encode()) == [], f"round {round_}"
        assert not harness.search(token), f"round {round_}"
        logs = b"".join(data for path, data in stored.items() if "/memory/" in path)
        for n in range(4):
            assert f"fact: thread {n} of {round_}\n".encode() in logs, f"round {round_}"
