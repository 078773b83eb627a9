"""What compaction, consolidation, a maintenance tick, leases and flushes cost on S3.

Each test runs the operation on an ``s3://`` workspace served by moto on loopback and pins
the requests it makes, in order, so that a change that adds one fails here. (The usage
ledger is turned off: it writes its batches on its own schedule, see
``harnessmem.models.usage``; requests of the index, which has its own tests, are left out where
they would show.) The savings these pin, and why each keeps its guarantee:

- a lease is released with one conditional DELETE of the version it wrote, and renewed
  with one conditional PUT, with no read first: the version names a record with the
  holder's own random token, so the condition holds exactly when the lease is still its;
- an append to a file this process wrote last (a daily log, a session log, the audit
  log, MEMORY.md) starts from the bytes and ETag of its own write: one conditional PUT,
  no read; when another writer changed the file meanwhile the PUT fails and the append
  reads the file and tries again, so nothing is lost (``test_s3store.py``);
- an offload reads the session log once (its body and ETag), or not at all when this
  process wrote it last, and appends with one conditional PUT from that version; the
  offload mark is read only when this process did not write the current one (an
  unchanged log version means an unchanged mark);
- a flush of messages that are all flushed already (compaction's flush of the prefix it
  drops) writes nothing: the stored mark covers them and finds the list's place later;
- a consolidation reads MEMORY.md once (the read that resolves a pending watermark is the
  one it rewrites), reads a daily log only when the listing's ETag is not the one of this
  process's own last write of it, lists the archive only when the listing of ``memory/``
  shows it (a common prefix), writes the previous version with one create-if-absent
  PUT (a new name), and finds the kept versions in its watermark instead of listing
  ``memory/.history/`` (a run that stopped between its writes leaves ``pending``, and the
  next run lists the folder again);
- a maintenance tick writes its state after each step that changed something and once at
  the end, before the lease is released: other processes still see every step once, and
  after a crash only steps that found nothing to do run again.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs

import pytest

from harnessmem import MemoryHarness
from harnessmem.memory.transcripts import SessionTranscript
from harnessmem.testing import FakeClock, ScriptedModel
from harnessmem.testing.s3_server import S3Request, S3TestServer
from harnessmem.workspace import Workspace

pytestmark = pytest.mark.s3

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
TODAY = "memory/2027-01-15.md"
SESSION_LOG = "sessions/trip.log.jsonl"
LEASE_HASH = re.compile(r"-[0-9a-f]{16}(?=\.lease$)")
#: What the index's sweep before a search asks (a flush's dedup searches): its own tests.
INDEX_SWEEP = ("HeadObject MEMORY.md", "ListObjectsV2 memory/", "ListObjectsV2 sessions/")


def described(requests: list[S3Request]) -> list[str]:
    """``["PutObject .locks/consolidation.lease [If-None-Match]", "ListObjectsV2 memory/",
    ...]``: each request with its workspace-relative key (a listing: its prefix)."""
    out = []
    for r in requests:
        if r.key:
            name = LEASE_HASH.sub("", r.key.split("/", 1)[-1])
        else:
            prefix = parse_qs(r.query).get("prefix", [""])[0]
            name = prefix.split("/", 1)[-1]
        out.append(f"{r.operation} {name}" + (f" [{r.condition}]" if r.condition else ""))
    return out


def _replies(messages: list[dict[str, Any]], purpose: str) -> str:
    """A fact per flush (named after the turn), a summary, and consolidations that keep
    every fact they are shown."""
    text = messages[-1]["content"]
    if purpose == "consolidation":
        return "\n".join(["## Facts", *sorted(set(re.findall(r"(?m)^- .+$", text)))])
    if purpose == "summary":
        return (
            "SESSION INTENT\nbook a trip\n\nSUMMARY\nthe user talked about a trip\n\n"
            "ARTIFACTS\nnone\n\nNEXT STEPS\nbook it"
        )
    turn = re.findall(r"user says (\d+)", text)
    return f"- the trip fact number {turn[-1]} is remembered" if turn else "NO_REPLY"


@pytest.fixture
def new_harness(
    s3_workspace_url: str,
    s3_storage_options: dict[str, Any],
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Callable[..., MemoryHarness]]:
    """Harnesses on S3 with the scripted model, compaction at 30 messages keeping 10, and
    the usage ledger off (it writes its batches on its own schedule), and the audit log off
    (its cost is pinned on its own below)."""
    monkeypatch.setenv("HARNESSMEM_MODEL__RECORD_USAGE", "false")
    monkeypatch.setenv("HARNESSMEM_AUDIT__ENABLED", "false")
    defaults = {
        "maintenance": {"enabled": False},
        "compaction": {"trigger_messages": 30, "keep_messages": 10},
        "workspace": {"storage_options": s3_storage_options},
    }
    with contextlib.ExitStack() as opened:

        def factory(**sections: Any) -> MemoryHarness:
            settings = {**defaults, **sections}
            model = ScriptedModel(_replies)
            harness = MemoryHarness.open(s3_workspace_url, model=model, clock=clock, **settings)
            return opened.enter_context(harness)

        yield factory


def _chat(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a travel agent."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"user says {turn} about the trip"})
        messages.append({"role": "assistant", "content": f"answer {turn}"})
    return messages


# -- leases -------------------------------------------------------------------------------------


def test_a_lease_costs_a_put_to_take_one_to_renew_and_a_delete_to_release(
    s3_server: S3TestServer, s3_workspace_url: str, s3_storage_options: dict[str, Any]
) -> None:
    workspace = Workspace.open(s3_workspace_url, s3_storage_options, clock=FakeClock(NOW))
    with s3_server.record() as requests:
        lease = workspace.lock("maintenance", ttl=60)
        lease.renew()
        lease.renew()
        assert lease.release() is True
    assert described(requests) == [
        "PutObject .locks/maintenance.lease [If-None-Match]",
        "PutObject .locks/maintenance.lease [If-Match]",
        "PutObject .locks/maintenance.lease [If-Match]",
        "DeleteObject .locks/maintenance.lease [If-Match]",
    ]
    assert workspace.try_lock("maintenance") is not None, "released"


def test_a_lease_taken_over_is_neither_renewed_nor_released_by_its_old_holder(
    s3_workspace_url: str, s3_storage_options: dict[str, Any]
) -> None:
    """The conditional requests carry the version the holder wrote: once another holder
    wrote its own record, they fail, and the old holder says it lost the lease."""
    from harnessmem.errors import LeaseError

    clock = FakeClock(NOW)
    first = Workspace.open(s3_workspace_url, s3_storage_options, clock=clock)
    other = Workspace.open(s3_workspace_url, s3_storage_options, clock=clock)
    lease = first.lock("maintenance", ttl=10)
    clock.advance(11)
    second = other.lock("maintenance", ttl=10)
    with pytest.raises(LeaseError, match="taken over"):
        lease.renew()
    assert lease.release() is False
    assert other.try_lock("maintenance") is None, "the new holder's lease was left alone"
    assert second.release() is True
    lease = first.lock("other", ttl=10)
    clock.advance(11)
    assert other.lock("other", ttl=10).held
    assert lease.release() is False, "not ours any more"
    assert other.try_lock("other") is None, "the new holder's lease was left alone"


# -- compaction ---------------------------------------------------------------------------------


def _offload(*, first: bool) -> list[str]:
    """An offload of session "trip": the lease, the log written from the version this
    process wrote last (at the session's first offload in this process, a new log: the
    mark and the log read first), the mark written, the lease released."""
    lease = ".locks/offload_trip.lease"
    return [
        f"PutObject {lease} [If-None-Match]",
        *(["GetObject sessions/trip.offload.json", f"GetObject {SESSION_LOG}"] if first else []),
        f"PutObject {SESSION_LOG} [{'If-None-Match' if first else 'If-Match'}]",
        "PutObject sessions/trip.offload.json",
        f"DeleteObject {lease} [If-Match]",
    ]


def test_compaction_of_a_flushed_session_costs_five_requests(
    s3_server: S3TestServer, new_harness: Callable[..., MemoryHarness], clock: FakeClock
) -> None:
    """A session whose turns were flushed after each call: the compaction's flush has
    nothing new (no request), and the offload is the lease, one conditional PUT of the log
    from this process's own last write of it, the mark, and the release. The first
    offload of the session in this process also reads the mark and the log. Before it,
    the memory block's HEAD of MEMORY.md."""
    harness = new_harness()
    session = harness.session("trip")
    messages = _chat(0)
    compactions: list[list[str]] = []
    for turn in range(32):
        messages.append({"role": "user", "content": f"user says {turn} about the trip"})
        clock.advance(10)
        with s3_server.record() as requests:
            messages = session.before_reasoning(messages)
        if any("sessions/" in r.key for r in requests):
            compactions.append(described(requests))
        messages.append({"role": "assistant", "content": f"answer {turn}"})
        session.after_call(messages)
    # First the memory block's change check (MEMORY.md unchanged since the last turn).
    assert compactions[:2] == [
        ["HeadObject MEMORY.md", *_offload(first=True)],
        ["HeadObject MEMORY.md", *_offload(first=False)],
    ]
    lines = [json.loads(line) for line in harness.workspace.read_text(SESSION_LOG).splitlines()]
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    positions = [line["pos"] for line in lines]
    assert positions == sorted(set(positions)), "each message once, in order"


def test_compaction_of_a_new_session_flushes_then_offloads_in_twelve_requests(
    s3_server: S3TestServer, new_harness: Callable[..., MemoryHarness]
) -> None:
    """The benchmark's case: the offload, then the session never flushed, so the
    compaction's flush (its facts asked for in the summary call) reads its mark, MEMORY.md
    and today's log, then the tombstones (after the log: a forget writes them before it
    rewrites the log), writes mark and log, and reads the tombstones again (a forget that
    wrote its tombstone between the two reads, see docs/memory.md)."""
    harness = new_harness()
    harness.save("- the user likes trains")
    with s3_server.record() as requests:
        out = harness.session("trip").before_reasoning(_chat(15))
    assert len(out) < 31
    calls = [c for c in described(requests) if not c.startswith(INDEX_SWEEP)]
    # MEMORY.md is not read: the memory block's HEAD finds it at the version of this
    # process's save, and the flush's "already known" reference may be that old too.
    assert calls == [
        *_offload(first=True),
        "GetObject memory/.flush_state/trip.json",
        f"GetObject {TODAY}",
        "GetObject memory/.tombstones.json",
        "PutObject memory/.flush_state/trip.json",
        f"PutObject {TODAY} [If-None-Match]",
        "GetObject memory/.tombstones.json",  # again: a forget that ran meanwhile
    ]


def test_an_offload_after_another_process_wrote_the_log_reads_the_mark_again(
    s3_server: S3TestServer, s3_workspace_url: str, s3_storage_options: dict[str, Any]
) -> None:
    """The mark is taken from memory only while the log is at the version this object
    wrote; after another writer's offload the mark is read, and nothing is logged twice."""
    one = SessionTranscript(Workspace.open(s3_workspace_url, s3_storage_options), "s")
    two = SessionTranscript(Workspace.open(s3_workspace_url, s3_storage_options), "s")
    history = [{"role": "user", "content": f"message {i}"} for i in range(1, 9)]
    entries = list(enumerate(history, start=1))
    assert one.offload(entries[:2]).appended == 2
    assert two.offload(entries[:4]).appended == 2
    with s3_server.record() as requests:
        result = one.offload(entries[:6])
    assert (result.appended, result.already, result.first_line) == (2, 4, 5)
    assert described(requests)[1:-1] == [
        "PutObject sessions/s.log.jsonl [If-Match]",  # from what ``one`` wrote last: lost,
        "HeadObject sessions/s.log.jsonl",  # (not an earlier attempt of this very write)
        "GetObject sessions/s.log.jsonl",  # not the log the mark was made for: start over,
        "GetObject sessions/s.offload.json",  # read the mark,
        "GetObject sessions/s.log.jsonl",  # then the log again
        "PutObject sessions/s.log.jsonl [If-Match]",
        "PutObject sessions/s.offload.json",
    ]
    assert two.offload(entries).appended == 2
    logged = [r.message["content"] for r in one.records()]
    assert logged == [m["content"] for m in history]
    assert one.mark().logged == 8


# -- flush --------------------------------------------------------------------------------------


def test_a_flush_after_a_restart_reads_the_pending_log_once(
    s3_server: S3TestServer, new_harness: Callable[..., MemoryHarness]
) -> None:
    """The state file's pending entry is checked against today's log, and that read is
    the one the flush appends from."""
    messages = _chat(1)[1:]
    new_harness().flush(messages, session_id="trip")
    again = new_harness()  # a new process: nothing remembered
    again.save("- the user likes trains")
    messages += [{"role": "user", "content": "user says 7 about the trip"}]
    with s3_server.record() as requests:
        assert again.flush(messages, session_id="trip").written
    flush = [c for c in described(requests) if not c.startswith(INDEX_SWEEP)]
    assert flush == [
        "GetObject memory/.flush_state/trip.json",
        f"GetObject {TODAY}",
        # (MEMORY.md as this process saved it: the "already known" reference)
        "GetObject memory/.tombstones.json",  # after the log (see above)
        "PutObject memory/.flush_state/trip.json",
        f"PutObject {TODAY} [If-Match]",
        "GetObject memory/.tombstones.json",  # again: a forget that ran meanwhile
    ]


# -- consolidation ------------------------------------------------------------------------------


def test_consolidation_costs_ten_requests_and_nothing_new_five(
    s3_server: S3TestServer, new_harness: Callable[..., MemoryHarness], clock: FakeClock
) -> None:
    """memory/ is listed with a delimiter: its common prefixes say whether the archive and
    memory/.history/ hold anything, so that a folder that does not exist is not listed."""
    harness = new_harness()
    harness.save("- the user likes trains")
    harness.flush(_chat(1)[1:], session_id="a")
    with s3_server.record() as first:
        assert harness.consolidate().status == "consolidated"
    # Not recorded in the watermark yet, but memory/'s listing shows no such folder.
    assert "ListObjectsV2 memory/.history/" not in described(first)
    clock.advance(60)
    harness.flush([*_chat(3)[1:]], session_id="a")
    with s3_server.record() as requests:
        result = harness.consolidate()
    assert result.status == "consolidated"
    lease, release = (
        "PutObject .locks/consolidation.lease [If-None-Match]",
        "DeleteObject .locks/consolidation.lease [If-Match]",
    )
    # The watermark and MEMORY.md read once each, the logs listed (there is no archive).
    look = [
        "GetObject memory/.consolidation_state",
        "GetObject MEMORY.md",
        "ListObjectsV2 memory/",
    ]
    assert described(requests) == [
        lease,
        *look,
        # Today's log is not read: the listing's ETag is that of the flush's own write.
        "GetObject memory/.tombstones.json",  # read only when there is log text to curate
        "PutObject memory/.consolidation_state",  # pending
        f"PutObject {result.history_path} [If-None-Match]",
        "PutObject MEMORY.md [If-Match]",
        "PutObject memory/.consolidation_state",  # committed
        release,
    ]
    with s3_server.record() as requests:
        assert harness.consolidate().status == "nothing_new"
    assert described(requests) == [lease, *look, release]
    # An archived log: the archive is listed too (after memory/, where a log being
    # archived still is, or is not any more because its copy is in the archive).
    harness.workspace.write_text("memory/archive/2026-01-01.md", "- an archived fact\n")
    with s3_server.record() as requests:
        result = harness.consolidate()
    assert result.status == "consolidated"
    assert result.files == ("memory/archive/2026-01-01.md",)
    assert described(requests)[3:5] == ["ListObjectsV2 memory/", "ListObjectsV2 memory/archive/"]


def test_the_history_recorded_in_the_watermark_stays_bounded_and_true(
    new_harness: Callable[..., MemoryHarness], clock: FakeClock
) -> None:
    """Without listing memory/.history/, the kept versions are still the last
    ``history_keep``; a version written by a run that stopped before its commit is found
    by the listing the next run makes."""
    harness = new_harness(consolidation={"history_keep": 2})
    ws = harness.workspace
    harness.save("- fact zero")
    for turn in range(4):
        clock.advance(60)
        harness.flush(
            [{"role": "user", "content": f"user says {turn} about the trip"}], session_id="a"
        )
        assert harness.consolidate().status == "consolidated"
    listed = ws.list("memory/.history")
    assert len(listed) == 2
    state = json.loads(ws.read_text("memory/.consolidation_state"))
    assert state["history"] == listed
    # A run that stopped between its writes: pending on file, a version not recorded.
    ws.write_text("memory/.history/MEMORY-20270115T000000Z.md", "stray\n")
    state["pending"] = {"memory_bytes": 1, "memory_hash": "x", "files": {}}
    ws.write_text("memory/.consolidation_state", json.dumps(state))
    clock.advance(60)
    harness.flush([{"role": "user", "content": "user says 9 about the trip"}], session_id="a")
    assert harness.consolidate().status == "consolidated"
    assert len(ws.list("memory/.history")) == 2
    assert "memory/.history/MEMORY-20270115T000000Z.md" not in ws.list("memory/.history")


# -- maintenance --------------------------------------------------------------------------------


def test_a_maintenance_tick_with_nothing_to_do_writes_its_state_once(
    s3_server: S3TestServer, new_harness: Callable[..., MemoryHarness], clock: FakeClock
) -> None:
    harness = new_harness()
    harness.maintain()
    clock.advance(3600)
    with s3_server.record() as requests:
        report = harness.maintain()
    assert report.ok
    assert report.ran
    calls = described(requests)
    mine = [c for c in calls if not c.startswith(("ListObjectsV2", *INDEX_SWEEP))]
    # The tick's state, the watermark and MEMORY.md are not read: the listing (made under
    # the lease) finds them missing or at the version this process wrote last.
    assert mine == [
        "PutObject .locks/maintenance.lease [If-None-Match]",
        "PutObject memory/.maintenance_state",
        "DeleteObject .locks/maintenance.lease [If-Match]",
    ]
    # Consolidation sees from the tick's one listing that nothing is new (no lease); every
    # step's listing, the index's sweep included, comes from that one LIST.
    assert calls.count("ListObjectsV2 ") == 1, calls
    assert len(calls) <= 4, calls
    state = json.loads(harness.workspace.read_text("memory/.maintenance_state"))
    assert {name for name, step in state["steps"].items() if step["at"] == clock.now} == {
        "archive",
        "consolidate",
        "prune_sessions",
        "prune_evictions",
        "prune_audit",
        "reindex",
    }


def test_a_maintenance_tick_writes_its_state_after_each_step_that_changed_something(
    s3_server: S3TestServer, new_harness: Callable[..., MemoryHarness], clock: FakeClock
) -> None:
    """So that after a crash the next tick does not repeat it; the steps that found nothing
    to do wait for the next write."""
    harness = new_harness()
    harness.save("- the user likes trains")
    harness.flush(_chat(1)[1:], session_id="a")
    harness.workspace.write_text("large_tool_results/s/call_1-abc.txt", "big\n")
    clock.advance(3600)  # the evicted result is older than 30 days by the moto clock
    with s3_server.record() as requests:
        report = harness.maintain()
    assert report.step("consolidate").result.status == "consolidated"
    assert report.step("prune_evictions").counts["deleted"] == 1
    calls = described(requests)
    state_writes = [i for i, c in enumerate(calls) if c == "PutObject memory/.maintenance_state"]
    after = [calls[i - 1] for i in state_writes]
    assert after == [
        "DeleteObject .locks/consolidation.lease [If-Match]",
        "DeleteObject large_tool_results/s/call_1-abc.txt",
        after[-1],  # the end of the tick: the reindex and the idle steps
    ]
    assert calls[-1] == "DeleteObject .locks/maintenance.lease [If-Match]"


# -- the audit log ------------------------------------------------------------------------------


def test_a_change_costs_the_audit_log_a_conditional_put(
    s3_server: S3TestServer, new_harness: Callable[..., MemoryHarness], clock: FakeClock
) -> None:
    """One record per change: the day's audit file read once (the first) and written with
    one conditional PUT from the version read, or from this process's own last write of
    it (no read); a change that writes a file whole (a delete, a move, a replace) reads it
    first, for the hash it held."""
    harness = new_harness(audit={"enabled": True})
    audit = "audit/2027-01-15.jsonl"
    for condition in ("If-None-Match", "If-Match"):
        with s3_server.record() as requests:
            harness.save(f"- the user likes trains ({condition})")
        first = condition == "If-None-Match"
        assert [c for c in described(requests) if c.startswith(("GetObject a", "PutObject a"))] == [
            *([f"GetObject {audit}"] if first else []),
            f"PutObject {audit} [{condition}]",
        ]
    harness.workspace.write_text("large_tool_results/s/call_1-abc.txt", "big\n")
    clock.advance(3600)
    with s3_server.record() as requests:
        harness.kernel.maintenance.tick("manual", steps=["prune_evictions"], force=True)
    calls = described(requests)
    deleted = calls.index("DeleteObject large_tool_results/s/call_1-abc.txt")
    assert calls[deleted - 1] == "GetObject large_tool_results/s/call_1-abc.txt"


# -- the memory block ---------------------------------------------------------------------------


def test_the_memory_block_costs_one_head_per_turn_and_a_get_when_memory_changed(
    s3_server: S3TestServer, new_harness: Callable[..., MemoryHarness]
) -> None:
    """context.inject = "system": each before_reasoning checks MEMORY.md's version with one
    HEAD and reads it (one GET) only when it changed, and not even then when the version
    is this process's own save; with "manual" before_reasoning makes no request (below
    the compaction trigger, nothing to evict)."""
    harness = new_harness()
    other = new_harness()  # another replica
    harness.save("- the user likes trains")
    session = harness.session("trip")
    messages = _chat(2)
    costs = []
    for change in (None, harness, None, None, other, harness):
        if change is not None:
            change.save(f"- fact {len(costs)}")
        with s3_server.record() as requests:
            messages = session.before_reasoning(messages)
        costs.append(described(requests))
    assert costs[0] == ["HeadObject MEMORY.md"], "first turn, after this process's save"
    assert costs[1] == costs[5] == ["HeadObject MEMORY.md"], "its own save"
    assert costs[2] == costs[3] == ["HeadObject MEMORY.md"], "memory unchanged"
    assert costs[4] == ["HeadObject MEMORY.md", "GetObject MEMORY.md"], "another's save"
    assert "- fact 4" in messages[0]["content"]
    assert "- fact 5" in messages[0]["content"]
    manual = new_harness(context={"inject": "manual"}).session("trip")
    with s3_server.record() as requests:
        assert manual.before_reasoning(_chat(2)) == _chat(2)
    assert described(requests) == []
