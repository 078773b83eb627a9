"""The ``prune_sessions`` step: session logs with their offload marks, and the usage ledger.

Each test runs on a local folder and on S3 (``workspace_target``). Files are written at the
real time (an object store's LastModified is the upload time), so a session log is aged by
putting the harness clock that many days ahead; usage files are aged by the date in their
name, so those tests use a fixed clock.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.errors import LeaseError
from harnessmem.maintenance import MaintenanceScheduler, StepOutcome
from harnessmem.memory.transcripts import SessionTranscript
from harnessmem.models.usage import UsageRecord
from harnessmem.testing.workspace_suite import FakeClock
from harnessmem.workspace import safe_id

if TYPE_CHECKING:
    from conftest import WorkspaceTarget
    from harnessmem.testing.s3_server import S3TestServer

DAY = 86400.0
RETENTION = 180  # maintenance.session_retention_days, the default
LOG = "sessions/chat-42.log.jsonl"
MARK = "sessions/chat-42.offload.json"
# 2027-01-15T02:00:00Z: late on 2027-01-14 in America/Los_Angeles.
NOW = datetime(2027, 1, 15, 2, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(now=time.time())


@pytest.fixture
def harness(workspace_target: WorkspaceTarget, clock: FakeClock) -> Iterator[MemoryHarness]:
    with workspace_target.open(clock=clock, maintenance={"enabled": False}) as opened:
        yield opened


def _offload(harness: MemoryHarness, session_id: str = "chat-42") -> None:
    """Write a session log and its offload mark the way compaction does."""
    transcript = SessionTranscript(harness.workspace, session_id, clock=harness.kernel.clock)
    transcript.offload([(1, {"role": "user", "content": "hi"})])


def _prune(harness: MemoryHarness) -> StepOutcome:
    """One forced tick of just this step (each test runs it several times in a row)."""
    report = MaintenanceScheduler(harness.kernel).tick(steps=["prune_sessions"], force=True)
    return report.step("prune_sessions")


# -- session logs and their offload marks ------------------------------------------------------


def test_an_expired_session_log_goes_with_its_offload_mark(
    harness: MemoryHarness, clock: FakeClock
) -> None:
    """Kept (with its mark) until the log is past retention; then both go, once."""
    _offload(harness)
    assert harness.workspace.list("sessions") == [LOG, MARK]
    clock.advance((RETENTION - 1) * DAY)
    kept = _prune(harness)
    assert kept.counts == {"deleted": 0, "kept": 1, "unknown_age": 0}
    assert harness.workspace.list("sessions") == [LOG, MARK]

    clock.advance(2 * DAY)
    pruned = _prune(harness)
    assert pruned.status == "done", pruned
    assert pruned.counts == {"deleted": 1, "kept": 0, "unknown_age": 0, "marks_deleted": 1}
    assert pruned.detail == (
        "deleted 1 session log older than 180 days, kept 0; deleted 1 offload mark"
    )
    assert harness.workspace.list("sessions") == []

    again = _prune(harness)
    assert again.counts == {"deleted": 0, "kept": 0, "unknown_age": 0}, "not idempotent"


def test_a_mark_whose_log_is_gone_is_removed_and_a_live_one_kept(
    harness: MemoryHarness, clock: FakeClock
) -> None:
    """An orphaned mark goes whatever its age; the mark of a young log stays with it."""
    _offload(harness, "gone")
    _offload(harness)
    harness.workspace.delete("sessions/gone.log.jsonl")  # pruned by an older version
    outcome = _prune(harness)
    assert outcome.counts == {"deleted": 0, "kept": 1, "unknown_age": 0, "marks_deleted": 1}
    assert harness.workspace.list("sessions") == [LOG, MARK]


def test_a_session_an_offload_holds_is_left_for_the_next_tick(
    harness: MemoryHarness, clock: FakeClock
) -> None:
    """While the session's offload lease is held, neither its log nor its mark is touched."""
    _offload(harness)
    clock.advance((RETENTION + 1) * DAY)
    with harness.workspace.lock("offload:chat-42"):
        busy = _prune(harness)
    assert busy.counts == {"deleted": 0, "kept": 1, "unknown_age": 0, "busy": 1}
    assert "1 in use by an offload, left for the next tick" in busy.detail
    assert harness.workspace.list("sessions") == [LOG, MARK]
    assert _prune(harness).counts["deleted"] == 1
    assert harness.workspace.list("sessions") == []


def test_offload_and_prune_share_the_lease_of_a_session_id_safe_id_rewrites(
    harness: MemoryHarness, clock: FakeClock
) -> None:
    """The lease is named after the files' stem, not the raw id: both sides must agree."""
    session_id = "team/chat 42?"
    assert safe_id(session_id) != session_id
    _offload(harness, session_id)
    clock.advance((RETENTION + 1) * DAY)
    with harness.workspace.lock(f"offload:{safe_id(session_id)}"):
        assert _prune(harness).counts["busy"] == 1
        late = SessionTranscript(harness.workspace, session_id, clock=clock, lease_timeout=0)
        with pytest.raises(LeaseError):
            late.offload([(2, {"role": "user", "content": "again"})])
    assert _prune(harness).counts["deleted"] == 1
    assert harness.workspace.list("sessions") == []


def test_a_log_appended_to_after_the_listing_is_kept(
    harness: MemoryHarness, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An offload that lands between the listing and the session lease wins: no line lost."""
    _offload(harness)
    clock.advance((RETENTION + 1) * DAY)
    workspace = harness.workspace
    take = workspace.try_lock

    def offload_first(name: str, ttl: float = 60.0) -> Any:
        if name == "offload:chat-42":
            transcript = SessionTranscript(workspace, "chat-42", clock=clock)
            transcript.offload([(2, {"role": "assistant", "content": "hello again"})])
        return take(name, ttl)

    monkeypatch.setattr(workspace, "try_lock", offload_first)
    outcome = _prune(harness)
    assert outcome.counts == {"deleted": 0, "kept": 1, "unknown_age": 0}
    assert workspace.list("sessions") == [LOG, MARK]
    assert "hello again" in workspace.read_text(LOG)


# -- the usage ledger --------------------------------------------------------------------------


def _ledger_day(harness: MemoryHarness, day: date, calls: int = 1) -> None:
    at = datetime(day.year, day.month, day.day, 12, tzinfo=UTC).timestamp()
    lines = "".join(
        UsageRecord(at, "flush", "m", "litellm", 100, 10, cost=0.01).to_json() + "\n"
        for _ in range(calls)
    )
    harness.workspace.write_text(f"usage/{day.isoformat()}.jsonl", lines)


@pytest.fixture
def fixed(workspace_target: WorkspaceTarget) -> Iterator[MemoryHarness]:
    """A harness whose clock stands at NOW (usage files are dated by name)."""
    with workspace_target.open(clock=FakeClock(NOW), maintenance={"enabled": False}) as opened:
        yield opened


def test_usage_files_past_retention_are_deleted_by_the_date_in_their_name(
    fixed: MemoryHarness,
) -> None:
    """Dated more than 180 days before today: deleted; the report for the retained days is
    the same before and after; names that are not dates stay."""
    today = date(2027, 1, 15)
    for back, calls in [(0, 1), (1, 2), (RETENTION, 3), (RETENTION + 1, 4), (400, 5)]:
        _ledger_day(fixed, today - timedelta(days=back), calls)
    fixed.workspace.write_text("usage/notes.jsonl", "")
    fixed.workspace.write_text("usage/2026-02-30.jsonl", "")
    before = fixed.usage(days=RETENTION + 1)
    assert before.total.calls == 1 + 2 + 3

    outcome = _prune(fixed)
    assert outcome.status == "done", outcome
    assert outcome.counts == {
        "deleted": 0,
        "kept": 0,
        "unknown_age": 0,
        "usage_deleted": 2,
        "usage_kept": 3,
    }
    assert outcome.detail.endswith("; deleted 2 usage ledger files dated before 2026-07-19, kept 3")
    assert fixed.workspace.list("usage") == [
        "usage/2026-02-30.jsonl",
        "usage/2026-07-19.jsonl",
        "usage/2027-01-14.jsonl",
        "usage/2027-01-15.jsonl",
        "usage/notes.jsonl",
    ]
    assert fixed.usage(days=RETENTION + 1) == before
    assert _prune(fixed).counts["usage_deleted"] == 0, "not idempotent"


@pytest.mark.parametrize(
    ("zone", "deleted"),
    [("UTC", ["2027-01-12", "2027-01-13"]), ("America/Los_Angeles", ["2027-01-12"])],
)
def test_today_and_yesterday_stay_in_the_workspace_time_zone(
    workspace_target: WorkspaceTarget, zone: str, deleted: list[str]
) -> None:
    """Retention 1 day: only files before yesterday go; at 02:00 UTC it is still the 14th
    in Los Angeles, so the 13th is yesterday there."""
    with workspace_target.open(
        clock=FakeClock(NOW),
        workspace={"timezone": zone},
        maintenance={"enabled": False, "session_retention_days": 1},
    ) as harness:
        days = ["2027-01-12", "2027-01-13", "2027-01-14", "2027-01-15"]
        for day in days:
            _ledger_day(harness, date.fromisoformat(day))
        outcome = _prune(harness)
        assert outcome.counts["usage_deleted"] == len(deleted)
        left = [
            p.removeprefix("usage/").removesuffix(".jsonl") for p in harness.workspace.list("usage")
        ]
        assert left == [day for day in days if day not in deleted]


@pytest.mark.s3
def test_usage_files_are_aged_from_one_listing(
    s3_server: S3TestServer, s3_workspace_url: str, s3_storage_options: dict[str, Any]
) -> None:
    """On S3 the ledger costs one ListObjectsV2 and one DeleteObject per expired file: no
    per-file HEAD for its age."""
    with MemoryHarness.open(
        s3_workspace_url,
        workspace={"storage_options": s3_storage_options},
        clock=FakeClock(NOW),
        maintenance={"enabled": False},
    ) as harness:
        for back in (0, 1, 200, 300):
            _ledger_day(harness, date(2027, 1, 15) - timedelta(days=back))
        with s3_server.record() as requests:
            done = _prune(harness)
        assert (done.counts["usage_deleted"], done.counts["usage_kept"]) == (2, 2)
        # The tick's own lease and state file aside, the step lists once (the session logs
        # come from the same listing) and deletes the two expired days.
        bookkeeping = (".locks/maintenance.lease", "memory/.maintenance_state")
        operations = [r.operation for r in requests if not r.key.endswith(bookkeeping)]
        assert operations == ["ListObjectsV2", "DeleteObject", "DeleteObject"], requests
