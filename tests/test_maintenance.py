"""Maintenance ticks, the scheduler thread, close() and `harnessmem maintain`.

The tick tests run on a local folder and on S3 (``workspace_target``), except those that
age files with os.utime (an object store's LastModified is the upload time). The
scheduler-thread and CLI tests are about threads and commands, not storage: local only.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from harnessmem import MemoryHarness
from harnessmem.cli import main
from harnessmem.maintenance import (
    STATE_PATH,
    MaintenanceReport,
    MaintenanceScheduler,
    MaintenanceStep,
    StepDone,
    StepSkipped,
)
from harnessmem.memory.consolidation import MemoryConsolidator
from harnessmem.testing.workspace_suite import FakeClock

if TYPE_CHECKING:
    from conftest import EventLog, HarnessFactory, RunTogether, WorkspaceTarget

DAY = 86400.0
STEPS = ["archive", "consolidate", "prune_sessions", "prune_evictions", "prune_audit", "reindex"]
# 2027-01-15T02:00:00Z: late on 2027-01-14 in America/Los_Angeles.
NOW = datetime(2027, 1, 15, 2, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def clock() -> FakeClock:
    """Overrides conftest's: ``open_harness`` runs these tests at ``NOW``."""
    return FakeClock(now=NOW)


@pytest.fixture
def harness(open_harness: HarnessFactory) -> MemoryHarness:
    return open_harness()


#: For tests that age files with os.utime, which object stores do not allow.
local_only = pytest.mark.parametrize("workspace_target", ["local"], indirect=True)


@pytest.fixture
def calls(harness: MemoryHarness, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Stand-ins for consolidate() and reindex() (other issues build them) that record calls."""
    seen: list[str] = []

    def consolidate(backoff: bool = False) -> str:
        seen.append("consolidate")
        return "consolidated 2 files"

    def reindex(full: bool = False) -> None:
        seen.append("reindex")

    monkeypatch.setattr(harness.kernel.consolidator, "consolidate", consolidate)
    monkeypatch.setattr(harness.kernel, "reindex", reindex)
    return seen


def _age(harness: MemoryHarness, path: str, seconds: float, text: str = "x\n") -> None:
    """Write ``path`` with a modification time ``seconds`` before the harness clock."""
    harness.workspace.write_text(path, text)
    local = harness.workspace.local_path(path)
    assert local is not None
    when = harness.kernel.clock() - seconds
    os.utime(local, (when, when))


# -- the steps -------------------------------------------------------------------------------


def test_expired_daily_log_moves_to_the_archive(harness: MemoryHarness, calls: list[str]) -> None:
    """Dated more than 90 days before today: archived; the rest of memory/ stays."""
    ws = harness.workspace
    ws.write_text("memory/2026-10-16.md", "- 91 days old\n")
    ws.write_text("memory/2026-10-17.md", "- 90 days old: kept\n")
    ws.write_text("memory/2027-01-15.md", "- today\n")
    ws.write_text("memory/notes.md", "- not a daily log\n")
    ws.write_text("memory/2026-02-30.md", "- not a real date\n")
    ws.write_text("memory/archive/2020-01-01.md", "- archived long ago\n")
    report = harness.maintain()
    assert report.step("archive").outcome == ("done: archived 1 daily log dated before 2026-10-17")
    assert report.step("archive").counts == {"archived": 1, "merged": 0}
    assert ws.list("memory") == [
        "memory/.maintenance_state",
        "memory/2026-02-30.md",
        "memory/2026-10-17.md",
        "memory/2027-01-15.md",
        "memory/archive/2020-01-01.md",
        "memory/archive/2026-10-16.md",
        "memory/notes.md",
    ]
    assert ws.read_text("memory/archive/2026-10-16.md") == "- 91 days old\n"


def test_archive_dates_follow_the_workspace_time_zone(
    workspace_target: WorkspaceTarget, clock: FakeClock
) -> None:
    """At 02:00 UTC it is still yesterday in Los Angeles: the cutoff moves back a day."""
    for zone, archived in [("UTC", True), ("America/Los_Angeles", False)]:
        with workspace_target.sibling(zone.replace("/", "_")).open(
            clock=clock,
            workspace={"timezone": zone},
            maintenance={"enabled": False, "daily_file_retention_days": 1},
        ) as harness:
            harness.workspace.write_text("memory/2027-01-13.md", "- x\n")
            harness.maintain()
            assert harness.workspace.exists("memory/archive/2027-01-13.md") is archived, zone


def test_archive_merges_into_an_existing_archive_file(
    harness: MemoryHarness, calls: list[str]
) -> None:
    """A daily log written again after its day was archived is merged, never overwritten."""
    ws = harness.workspace
    ws.write_text("memory/archive/2020-01-01.md", "- first\n")
    ws.write_text("memory/2020-01-01.md", "- late flush\n")
    report = harness.maintain()
    assert report.step("archive").counts == {"archived": 0, "merged": 1}
    assert ws.read_text("memory/archive/2020-01-01.md") == "- first\n\n- late flush\n"
    assert not ws.exists("memory/2020-01-01.md")


def test_archived_logs_leave_search_unless_include_archive(
    workspace_target: WorkspaceTarget, tmp_path: Path, clock: FakeClock
) -> None:
    """A full, real tick (consolidate and reindex included): the archived log leaves search."""
    options: dict[str, Any] = {"clock": clock, "maintenance": {"enabled": False}}
    with workspace_target.open(**options) as harness:
        harness.workspace.write_text("memory/2020-01-01.md", "- the zanzibar itinerary\n")
        assert [h.path for h in harness.search("zanzibar")] == ["memory/2020-01-01.md"]
        report = harness.maintain()
        assert report.step("archive").counts["archived"] == 1
        assert report.step("reindex").status == "done", report
        # Consolidation may carry the fact into MEMORY.md; the daily log itself is gone.
        assert [h.path for h in harness.search("zanzibar") if h.path.startswith("memory/")] == []
    with workspace_target.open(
        index={"include_archive": True},
        workspace={"index_path": str(tmp_path / "with-archive.db")},
        **options,
    ) as harness:
        paths = [h.path for h in harness.search("zanzibar")]
        assert "memory/archive/2020-01-01.md" in paths


@local_only
def test_old_session_logs_and_evicted_results_are_pruned(
    harness: MemoryHarness, calls: list[str]
) -> None:
    """Session logs past 180 days and evicted results past 30 days go; younger ones stay."""
    ws = harness.workspace
    _age(harness, "sessions/old.log.jsonl", 181 * DAY)
    _age(harness, "sessions/young.log.jsonl", 179 * DAY)
    _age(harness, "sessions/old.notes", 400 * DAY)  # not a session log: never pruned
    _age(harness, "large_tool_results/s1/call_1-aaaa.txt", 31 * DAY)
    _age(harness, "large_tool_results/s2/call_2-bbbb.txt", 29 * DAY)
    report = harness.maintain()
    assert report.step("prune_sessions").counts == {"deleted": 1, "kept": 1, "unknown_age": 0}
    assert report.step("prune_evictions").counts == {"deleted": 1, "kept": 1, "unknown_age": 0}
    assert ws.list("sessions") == ["sessions/old.notes", "sessions/young.log.jsonl"]
    assert ws.list("large_tool_results") == ["large_tool_results/s2/call_2-bbbb.txt"]
    root = ws.local_root
    assert root is not None
    assert not (root / "large_tool_results" / "s1").exists(), "empty folder left behind"


@local_only
def test_a_step_that_raises_does_not_stop_the_rest(
    harness: MemoryHarness,
    monkeypatch: pytest.MonkeyPatch,
    events: EventLog,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """consolidate raises: it is reported and logged; archive, prune and reindex still run."""
    ran: list[str] = []

    def broken(backoff: bool = False) -> None:
        raise RuntimeError("the model is down")

    monkeypatch.setattr(harness.kernel.consolidator, "consolidate", broken)
    monkeypatch.setattr(harness.kernel, "reindex", lambda full=False: ran.append("reindex"))
    harness.workspace.write_text("memory/2020-01-01.md", "- old\n")
    _age(harness, "sessions/old.log.jsonl", 200 * DAY)
    with caplog.at_level(logging.WARNING, logger="harnessmem.maintenance"):
        report = harness.maintain()
    assert [s.name for s in report.steps] == STEPS
    assert report.step("consolidate").outcome == "failed: RuntimeError: the model is down"
    assert report.failed == ("consolidate",)
    assert not report.ok
    assert [report.step(n).status for n in STEPS] == ["done", "failed"] + ["done"] * 4
    assert ran == ["reindex"]
    assert harness.workspace.exists("memory/archive/2020-01-01.md")
    assert not harness.workspace.exists("sessions/old.log.jsonl")
    assert "maintenance step consolidate failed" in caplog.text
    [event] = events.maintenance
    assert event.steps["consolidate"] == "failed: RuntimeError: the model is down"
    assert event.report is report


def test_a_step_that_cannot_run_here_says_so_and_a_not_implemented_one_fails(
    harness: MemoryHarness,
) -> None:
    """A custom step that does not apply raises StepSkipped with the reason; one that raises
    NotImplementedError is a failure like any other (it used to read "unavailable" and
    count as fine, which hid unfinished code)."""

    def not_here(h: MemoryHarness, now: float) -> StepDone:
        raise StepSkipped("no vector store configured")

    def not_built(h: MemoryHarness, now: float) -> StepDone:
        raise NotImplementedError("embed the new entries")

    steps = [MaintenanceStep("vectors", not_here), MaintenanceStep("embed", not_built)]
    report = MaintenanceScheduler(harness.kernel, steps=steps).tick()
    assert report.step("vectors").outcome == "skipped: no vector store configured"
    assert report.step("embed").outcome == "failed: NotImplementedError: embed the new entries"
    assert report.failed == ("embed",)
    assert not report.ok


def test_consolidation_result_is_carried_in_the_report(
    harness: MemoryHarness, calls: list[str]
) -> None:
    """What consolidate() returns is kept whole and summarised in the outcome."""
    report = harness.maintain()
    assert report.step("consolidate").outcome == "done: consolidated 2 files"
    assert report.step("consolidate").result == "consolidated 2 files"
    assert calls == ["consolidate", "reindex"]


def test_a_tick_consolidates_what_its_listing_shows_new(open_harness: HarnessFactory) -> None:
    """Inside a tick consolidation decides "nothing new" from the tick's listing without
    its lease; a log flushed since the last run, or a MEMORY.md over budget, still gets a
    full run (local and S3)."""
    harness = open_harness(consolidation={"min_new_tokens": 0})
    harness.flush([{"role": "user", "content": "I live in Porto."}], session_id="a")
    assert harness.maintain(force=True).step("consolidate").detail.startswith("consolidated")
    assert "Porto" in harness.workspace.read_text("MEMORY.md")
    idle = harness.maintain(force=True).step("consolidate")
    assert "nothing new" in idle.detail
    harness.flush([{"role": "user", "content": "My dog is called Rex."}], session_id="b")
    assert harness.maintain(force=True).step("consolidate").detail.startswith("consolidated")
    assert "Rex" in harness.workspace.read_text("MEMORY.md")
    # memory_save past the budget: the listing shows no new log, but MEMORY.md is too big.
    budget = harness.settings.consolidation.max_memory_tokens
    saved = "\n".join(f"- Saved fact number {n} about the harbour crane {n}." for n in range(400))
    harness.workspace.append_text("MEMORY.md", "\n" + saved + "\n")
    assert harness.kernel.consolidator.tokens(harness.workspace.read_text("MEMORY.md")) > budget
    trimmed = harness.maintain(force=True).step("consolidate")
    assert "nothing new" not in trimmed.detail


def test_disabled_consolidation_is_skipped(
    workspace_target: WorkspaceTarget, clock: FakeClock
) -> None:
    with workspace_target.open(
        clock=clock,
        consolidation={"enabled": False},
        maintenance={"enabled": False},
    ) as harness:
        outcome = harness.maintain().step("consolidate")
    assert outcome.outcome == "skipped: consolidation.enabled is false"


# -- once per window, one at a time ----------------------------------------------------------


def test_each_step_runs_once_per_window(
    harness: MemoryHarness, clock: FakeClock, calls: list[str]
) -> None:
    """A second tick inside min_gap skips every step; after it, they run again; force runs."""
    first = harness.maintain()
    assert all(s.status == "done" for s in first.steps)
    clock.advance(harness.settings.maintenance.min_gap - 1)
    second = harness.maintain()
    assert not second.ran
    assert "within maintenance.min_gap" in second.step("archive").detail
    assert calls == ["consolidate", "reindex"]
    forced = harness.maintain(force=True)
    assert forced.step("consolidate").status == "done"
    clock.advance(harness.settings.maintenance.min_gap)
    assert harness.maintain().ran
    assert calls == ["consolidate", "reindex"] * 3
    state = json.loads(harness.workspace.read_text(STATE_PATH))
    assert set(state["steps"]) == set(STEPS)
    assert state["last_tick"]["trigger"] == "manual"


def test_an_interrupted_tick_resumes_with_the_steps_it_did_not_record(
    harness: MemoryHarness, clock: FakeClock, calls: list[str]
) -> None:
    """Steps are recorded one by one: after a crash, only the unrecorded ones run."""
    state = {"version": 1, "steps": {"archive": {"at": clock.now - 60, "outcome": "done"}}}
    harness.workspace.write_text(STATE_PATH, json.dumps(state))
    report = harness.maintain()
    assert [s.name for s in report.steps if s.ran] == STEPS[1:]


def test_a_corrupt_state_file_means_steps_run_again(
    harness: MemoryHarness, calls: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    harness.workspace.write_text(STATE_PATH, "{not json")
    with caplog.at_level(logging.WARNING, logger="harnessmem.maintenance"):
        assert all(s.ran for s in harness.maintain().steps)
    assert "not JSON" in caplog.text
    json.loads(harness.workspace.read_text(STATE_PATH))  # rewritten whole


def test_a_held_lease_skips_the_whole_tick(harness: MemoryHarness, calls: list[str]) -> None:
    """Another process is ticking: nothing runs here, and the report says why."""
    with harness.workspace.lock("maintenance", ttl=60):
        report = harness.maintain()
    assert report.skipped_reason == "another process or thread holds the maintenance lease"
    assert not report.ran
    assert calls == []
    assert harness.maintain().ran, "the lease was released, the next tick runs"


def test_a_lost_lease_stops_the_remaining_steps(
    harness: MemoryHarness, clock: FakeClock, calls: list[str]
) -> None:
    """A step outlives lease_ttl and another replica takes over: this one stops there."""
    from harnessmem.workspace import Workspace

    def slow_step(h: MemoryHarness, now: float) -> StepDone:
        clock.advance(h.settings.maintenance.lease_ttl + 1)
        other = Workspace.open(h.workspace.url, h.workspace.storage_options, clock=clock)
        other.lock("maintenance", ttl=60)
        return StepDone("took too long")

    steps = [MaintenanceStep("slow", slow_step), MaintenanceStep("after", slow_step)]
    report = MaintenanceScheduler(harness.kernel, steps=steps).tick()
    assert report.step("slow").status == "done"
    assert report.step("after").status == "skipped"
    assert report.step("after").detail.startswith("lost the maintenance lease")


def test_every_tick_fires_on_maintenance(
    harness: MemoryHarness, events: EventLog, calls: list[str]
) -> None:
    report = harness.maintain()
    [event] = events.maintenance
    assert event.steps == report.outcomes
    assert (event.started, event.finished, event.trigger) == (
        report.started,
        report.finished,
        "manual",
    )
    assert isinstance(event.report, MaintenanceReport)
    assert json.loads(json.dumps(report.as_dict()))["steps"][0]["name"] == "archive"
    assert str(report).splitlines()[1] == (
        "  archive          done: no daily log dated before 2026-10-17"
    )


def test_unknown_step_names_are_refused(harness: MemoryHarness) -> None:
    scheduler = MaintenanceScheduler(harness.kernel)
    with pytest.raises(ValueError, match=r"unknown maintenance steps \['nope'\]"):
        scheduler.tick(steps=["nope"])
    with pytest.raises(ValueError, match="unique"):
        MaintenanceScheduler(harness.kernel, steps=[MaintenanceStep("a", print)] * 2)  # type: ignore[list-item]


# -- several processes -----------------------------------------------------------------------

_CHILD = """
import json, sys
from harnessmem import MemoryHarness
url, options, now = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3])

from harnessmem.memory.consolidation import MemoryConsolidator

# Stand-ins that count calls in a shared file (appends are lossless across processes).
def consolidate(self, *, backoff=False):
    self.workspace.append_text("calls.log", "consolidate\\n")
    return "consolidated"

MemoryConsolidator.consolidate = consolidate

harness = MemoryHarness.open(url, workspace={"storage_options": options}, clock=lambda: now,
                             maintenance={"enabled": False})

def reindex(full=False):
    harness.workspace.append_text("calls.log", "reindex\\n")

harness.kernel.reindex = reindex
print("ready", flush=True)
sys.stdin.readline()  # start together, so the ticks really compete
report = harness.maintain()
harness.close()
print(json.dumps(report.as_dict()), flush=True)
"""


def test_four_processes_run_each_step_once(
    workspace_target: WorkspaceTarget, run_together: RunTogether
) -> None:
    """4 processes call maintain() together: every step runs in exactly one of them."""
    url, options = workspace_target.url, workspace_target.storage_options
    # Files written now are 200 days old by the children's clock: all prunable.
    now = datetime.now(UTC).timestamp() + 200 * DAY
    today = datetime.fromtimestamp(now, UTC).date()
    with MemoryHarness.open(
        url, workspace={"storage_options": options}, maintenance={"enabled": False}
    ) as setup:
        ws = setup.workspace
        for day in ("2020-01-01", "2020-01-02", today.isoformat()):
            ws.write_text(f"memory/{day}.md", f"- fact of {day}\n")
        ws.write_text("sessions/old.log.jsonl", "{}\n")
        ws.write_text("large_tool_results/s/call_1-abc.txt", "big\n")
    reports = run_together(_CHILD, [[url, json.dumps(options), repr(now)]] * 4)

    for name in STEPS:
        ran = [
            s for r in reports for s in r["steps"] if s["name"] == name and s["status"] != "skipped"
        ]
        assert len(ran) == 1, f"{name} ran {len(ran)} times"
        assert ran[0]["status"] == "done", ran[0]
    with MemoryHarness.open(
        url, workspace={"storage_options": options}, maintenance={"enabled": False}
    ) as check:
        ws = check.workspace
        assert ws.read_text("calls.log") == "consolidate\nreindex\n"
        assert ws.list("memory/archive") == [
            "memory/archive/2020-01-01.md",
            "memory/archive/2020-01-02.md",
        ]
        assert ws.exists(f"memory/{today.isoformat()}.md")
        assert ws.list("sessions") == []
        assert ws.list("large_tool_results") == []
        state = json.loads(ws.read_text(STATE_PATH))
        assert set(state["steps"]) == set(STEPS)


# -- the scheduler thread and close() --------------------------------------------------------


def _scheduled(tmp_path: Path, clock: FakeClock, **maintenance: Any) -> MemoryHarness:
    return MemoryHarness.open(tmp_path / "ws", clock=clock, maintenance=maintenance)


def _stub_components(harness: MemoryHarness, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    monkeypatch.setattr(
        harness.kernel.consolidator,
        "consolidate",
        lambda backoff=False: seen.append("consolidate"),
    )
    monkeypatch.setattr(harness.kernel, "reindex", lambda full=False: seen.append("reindex"))
    return seen


def test_close_stops_the_thread_and_leaves_none_behind(tmp_path: Path, clock: FakeClock) -> None:
    harness = _scheduled(tmp_path, clock)
    scheduler = harness.kernel.maintenance
    assert scheduler is not None
    assert scheduler.running
    thread = scheduler.thread
    assert thread is not None
    assert thread.daemon
    assert thread in threading.enumerate()
    harness.close()
    assert thread not in threading.enumerate()
    assert not thread.is_alive()
    assert harness.kernel.request_maintenance() is False


def test_no_thread_when_maintenance_is_disabled(tmp_path: Path, clock: FakeClock) -> None:
    # Only threads this harness started count: a request thread of another test's
    # loopback server may still be ending (it is gone from the list, not new).
    before = set(threading.enumerate())
    with _scheduled(tmp_path, clock, enabled=False) as harness:
        started = {t for t in threading.enumerate() if t.is_alive()} - before
        assert started == set()
        assert harness.kernel.request_maintenance() is False


def test_interval_tick_comes_when_the_clock_says(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No tick at start (not even when woken); one after the clock moves by the interval."""
    with _scheduled(tmp_path, clock) as harness:
        seen = _stub_components(harness, monkeypatch)
        scheduler = harness.kernel.maintenance
        assert scheduler is not None
        scheduler.wake()
        assert harness.kernel.request_maintenance() is True  # proves the loop is idle, not ticking
        assert scheduler.wait_for_ticks(1, timeout=30)
        assert scheduler.last_report is not None
        assert scheduler.last_report.trigger == "request", "an interval tick came too early"
        clock.advance(harness.settings.maintenance.interval)
        scheduler.wake()
        assert scheduler.wait_for_ticks(2, timeout=30)
        report = scheduler.last_report
        assert report.trigger == "interval"
        assert [s.name for s in report.steps] == STEPS
        assert seen == ["consolidate", "reindex", "consolidate", "reindex"]


def test_requests_are_throttled_and_run_consolidate_and_reindex(
    tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _scheduled(tmp_path, clock) as harness:
        seen = _stub_components(harness, monkeypatch)
        scheduler = harness.kernel.maintenance
        assert scheduler is not None
        assert harness.kernel.request_maintenance() is True
        assert harness.kernel.request_maintenance() is False  # within min_gap
        assert scheduler.wait_for_ticks(1, timeout=30)
        report = scheduler.last_report
        assert report is not None
        assert [s.name for s in report.steps] == ["consolidate", "reindex"]
        assert seen == ["consolidate", "reindex"]
        clock.advance(harness.settings.maintenance.min_gap)
        assert harness.kernel.request_maintenance() is True
        assert scheduler.wait_for_ticks(2, timeout=30)
        assert seen == ["consolidate", "reindex"] * 2


def test_first_tick_follows_the_workspace_schedule(tmp_path: Path, clock: FakeClock) -> None:
    """A workspace whose last tick is overdue gets one min_gap after start, not an interval."""
    with _scheduled(tmp_path, clock, enabled=False) as first:
        first.maintain()
    clock.advance(7 * 3600)
    with _scheduled(tmp_path, clock) as harness:
        scheduler = harness.kernel.maintenance
        assert scheduler is not None
        clock.advance(harness.settings.maintenance.min_gap)
        scheduler.wake()
        assert scheduler.wait_for_ticks(1, timeout=30)
        assert scheduler.last_report is not None
        assert scheduler.last_report.trigger == "interval"


def test_close_waits_for_a_running_tick_up_to_its_timeout(
    tmp_path: Path,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A tick stuck in consolidation does not hold close() past the timeout; it is logged."""
    harness = _scheduled(tmp_path, clock)
    entered, release = threading.Event(), threading.Event()

    def stuck(backoff: bool = False) -> None:
        entered.set()
        release.wait(30)

    monkeypatch.setattr(harness.kernel.consolidator, "consolidate", stuck)
    monkeypatch.setattr(harness.kernel, "reindex", lambda full=False: None)
    scheduler = harness.kernel.maintenance
    assert scheduler is not None
    thread = scheduler.thread
    assert thread is not None
    assert harness.kernel.request_maintenance()
    assert entered.wait(30)
    with caplog.at_level(logging.WARNING, logger="harnessmem.harness"):
        harness.close(timeout=0)
    assert harness.kernel.closed
    assert "still running after 0s" in caplog.text
    release.set()
    thread.join(30)
    assert not thread.is_alive(), "the thread did not end after its tick"


def test_close_drains_queued_work_before_releasing_backends(
    tmp_path: Path, clock: FakeClock
) -> None:
    """The seam for queued flushes: drainers run first, with the time left."""
    harness = _scheduled(tmp_path, clock)
    budget: list[float] = []
    harness.kernel.on_close(budget.append)
    harness.close(timeout=5)
    assert len(budget) == 1
    assert 0 < budget[0] <= 5


def test_a_dropped_harness_lets_its_thread_end(tmp_path: Path, clock: FakeClock) -> None:
    """The scheduler holds the harness weakly: forgetting close() does not leak the thread."""
    harness = _scheduled(tmp_path, clock)
    assert harness.kernel.maintenance is not None
    thread = harness.kernel.maintenance.thread
    assert thread is not None
    del harness
    gc.collect()
    thread.join(30)
    assert not thread.is_alive()


def test_open_harnesses_close_at_interpreter_exit(tmp_path: Path) -> None:
    """atexit closes what the program left open, so queued work drains."""
    code = (
        "import sys\n"
        "from harnessmem import MemoryHarness\n"
        "h = MemoryHarness.open(sys.argv[1])\n"
        "h.kernel.on_close(lambda left: print('drained', flush=True))\n"
        "print('scheduler', h.kernel.maintenance.running, flush=True)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert out.stdout.split("\n")[:2] == ["scheduler True", "drained"]


def test_harness_tracking_keeps_no_harness_alive(tmp_path: Path, clock: FakeClock) -> None:
    """Open harnesses are tracked for the atexit close (the test above) weakly: a harness
    nothing else holds is freed."""
    import weakref

    harness = _scheduled(tmp_path, clock, enabled=False)
    ref = weakref.ref(harness)
    del harness
    gc.collect()
    assert ref() is None


# -- the command line ------------------------------------------------------------------------


def test_cli_maintain_prints_the_report(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2000-01-01.md").write_text("- old\n")
    result = CliRunner().invoke(main, ["maintain", "-w", str(ws), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [s["name"] for s in data["steps"]] == STEPS
    assert data["steps"][0]["counts"]["archived"] == 1
    assert (ws / "memory" / "archive" / "2000-01-01.md").exists()
    again = CliRunner().invoke(main, ["maintain", "-w", str(ws)])
    assert again.exit_code == 0
    assert "skipped: ran at" in again.output
    forced = CliRunner().invoke(main, ["maintain", "-w", str(ws), "--force"])
    assert "archive          done" in forced.output


def test_cli_maintain_exits_1_when_a_step_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: MemoryConsolidator, *, backoff: bool = False) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(MemoryConsolidator, "consolidate", broken)
    result = CliRunner().invoke(main, ["maintain", "-w", str(tmp_path / "ws")])
    assert result.exit_code == 1
    assert "consolidate      failed: RuntimeError: boom" in result.output
