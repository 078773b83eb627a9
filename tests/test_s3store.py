"""S3 workspaces under faults, and what each operation costs in requests.

moto's server on loopback (``S3TestServer``) fails chosen requests: 503 SlowDown, 500, a
dropped connection (before or after the write landed) and a timeout. Every operation
either completes after retries or fails with a WorkspaceError that says what and where;
no partial file, no entry lost or written twice, and the flush's high-water mark and the
consolidation watermark agree with the files afterwards. The retry backoff is replaced by
a recorder, so nothing sleeps but the one timeout test (for its 0.3 s read timeout).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harnessmem import MemoryHarness, WorkspaceError
from harnessmem.layout import CONSOLIDATION_STATE as WATERMARK
from harnessmem.maintenance import MaintenanceScheduler, MaintenanceStep, StepDone
from harnessmem.testing import FakeClock, ScriptedModel
from harnessmem.testing.s3_server import S3Fault, S3Request, S3TestServer
from harnessmem.workspace import S3Store, Workspace, WorkspaceStore

pytestmark = pytest.mark.s3

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
TODAY = "memory/2027-01-15.md"
READ_TIMEOUT = 0.3

FAULTS: dict[str, Callable[..., S3Fault]] = {
    "slowdown": S3Fault.slowdown,
    "internal_error": S3Fault.internal_error,
    "drop": S3Fault.drop,
    "drop_after_write": lambda **match: S3Fault.drop(after_apply=True, **match),
    # an error answer after the write landed (the server had read the body already)
    "slowdown_after_write": lambda **match: S3Fault.slowdown(after_apply=True, **match),
    "internal_error_after_write": lambda **match: S3Fault.internal_error(after_apply=True, **match),
    "timeout": lambda **match: S3Fault.timeout(READ_TIMEOUT * 2, **match),
}


#: What docs/workspace.md promises: up to 5 attempts, pauses of at most 0.2, 0.4, 0.8, 1.6 s.
ATTEMPTS = 5
PAUSE_CEILINGS = [0.2, 0.4, 0.8, 1.6]


@pytest.fixture
def pauses() -> list[float]:
    """The retry pauses harnessmem asked for (none is slept: see ``recording``)."""
    return []


def recording(store: WorkspaceStore, pauses: list[float]) -> None:
    """Make ``store`` record its retry pauses in ``pauses`` instead of sleeping."""
    assert isinstance(store, S3Store)
    store.sleep = pauses.append  # type: ignore[method-assign]


def open_workspace(url: str, options: dict[str, Any], pauses: list[float]) -> Workspace:
    ws = Workspace.open(url, options)
    recording(ws.store, pauses)
    return ws


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


@pytest.fixture
def options(s3_faults: S3TestServer) -> dict[str, Any]:
    # A short read timeout, so that the timeout fault costs a fraction of a second.
    return s3_faults.storage_options(read_timeout=READ_TIMEOUT)


@pytest.fixture
def open_harness(
    s3_workspace_url: str, options: dict[str, Any], clock: FakeClock, pauses: list[float]
) -> Iterator[Callable[..., MemoryHarness]]:
    opened: list[MemoryHarness] = []

    def factory(model: Any = None, **sections: Any) -> MemoryHarness:
        sections.setdefault("maintenance", {"enabled": False})
        harness = MemoryHarness.open(
            s3_workspace_url,
            workspace={"storage_options": options},
            model=model or ScriptedModel("NO_REPLY"),
            clock=clock,
            **sections,
        )
        recording(harness.workspace.store, pauses)
        opened.append(harness)
        return harness

    yield factory
    for harness in opened:
        harness.close()


def conversation(*texts: str) -> list[dict[str, Any]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": text} for i, text in enumerate(texts)]


def operations(requests: list[S3Request]) -> Counter[str]:
    """``{"PutObject memory/x.md [If-Match]": 1, ...}`` for the workspace's requests."""
    return Counter(
        f"{r.operation} {r.key.split('/', 1)[-1]}" + (f" [{r.condition}]" if r.condition else "")
        for r in requests
    )


# -- the store retries, and says clearly when it gives up -------------------------------------


@pytest.mark.parametrize("kind", FAULTS)
def test_each_kind_of_fault_is_retried_and_an_append_lands_once(
    kind: str,
    s3_faults: S3TestServer,
    s3_workspace_url: str,
    options: dict[str, Any],
    pauses: list[float],
) -> None:
    """The conditional PUT of an append fails once: it is repeated, and the line is there
    exactly once, also when the failed attempt had in fact been written."""
    ws = open_workspace(s3_workspace_url, options, pauses)
    ws.write_text("memory/log.md", "- first\n")
    fault = s3_faults.inject(FAULTS[kind](method="PUT", key="memory/log.md"))
    with s3_faults.record() as requests:
        ws.append_text("memory/log.md", "- second\n")
    assert fault.fired == 1
    assert ws.read_text("memory/log.md") == "- first\n- second\n"
    failed = [r for r in requests if r.fault]
    assert [r.operation for r in failed] == ["PutObject"], requests


def test_a_store_that_keeps_failing_is_a_clear_workspace_error(
    s3_faults: S3TestServer, s3_workspace_url: str, options: dict[str, Any], pauses: list[float]
) -> None:
    """Throttled on every attempt: after ATTEMPTS tries with growing pauses, an error that
    names the operation, the file and the workspace, and says what to do."""
    ws = open_workspace(s3_workspace_url, options, pauses)
    ws.write_text("MEMORY.md", "- x\n")
    s3_faults.inject(S3Fault.slowdown(method="GET", key="MEMORY.md", times=None))
    with s3_faults.record() as requests, pytest.raises(WorkspaceError) as info:
        ws.read_text("MEMORY.md")
    assert str(info.value).startswith(f"read 'MEMORY.md' in {s3_workspace_url} failed: ")
    assert f"gave up after {ATTEMPTS} attempts" in info.value.message
    assert info.value.hint is not None
    assert "try again later" in info.value.hint
    assert len(requests) == ATTEMPTS
    assert len(pauses) == ATTEMPTS - 1
    assert all(0 <= p <= c for p, c in zip(pauses, PAUSE_CEILINGS, strict=True))


def test_errors_that_retrying_cannot_fix_are_not_retried(
    s3_faults: S3TestServer, s3_workspace_url: str, options: dict[str, Any], pauses: list[float]
) -> None:
    """A missing file is FileNotFoundError at once; a bad credential a WorkspaceError at once."""
    ws = open_workspace(s3_workspace_url, options, pauses)
    with s3_faults.record() as requests, pytest.raises(FileNotFoundError):
        ws.read_text("MEMORY.md")
    assert len(requests) == 1
    assert pauses == []


# -- flush --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", FAULTS)
def test_a_flush_completes_through_a_fault_and_writes_each_fact_once(
    kind: str, s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness]
) -> None:
    harness = open_harness(ScriptedModel("- Ana lives in Lisbon\n- Ana has a cat"))
    messages = conversation("I live in Lisbon with my cat")
    fault = s3_faults.inject(FAULTS[kind](method="PUT", key=TODAY))
    result = harness.flush(messages, session_id="s")
    assert fault.fired == 1
    assert result.written
    text = harness.workspace.read_text(TODAY)
    assert text.count("- Ana lives in Lisbon\n") == 1
    assert text.count("- Ana has a cat\n") == 1
    again = open_harness(ScriptedModel("- Ana lives in Lisbon"))  # a new process
    assert again.flush(messages, session_id="s").status == "nothing_new", "the mark holds"


@pytest.mark.parametrize("target", [TODAY, "memory/.flush_state/"])
def test_a_flush_that_cannot_write_fails_cleanly_and_the_next_one_catches_up(
    target: str, s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness]
) -> None:
    """The daily log (or the state file) cannot be written at all: WorkspaceError; no
    entry, no partial file; once the store is back the same messages are flushed once."""
    model = ScriptedModel("- Ana lives in Lisbon")
    harness = open_harness(model)
    messages = conversation("I live in Lisbon")
    s3_faults.inject(S3Fault.internal_error(method="PUT", key=target, times=None))
    with pytest.raises(WorkspaceError, match="gave up after"):
        harness.flush(messages, session_id="s")
    assert not harness.workspace.exists(TODAY)
    s3_faults.clear_faults()
    assert harness.flush(messages, session_id="s").written, "not on file: flushed again"
    assert open_harness(model).flush(messages, session_id="s").status == "nothing_new"
    assert harness.workspace.read_text(TODAY).count("- Ana lives in Lisbon\n") == 1


# -- consolidation ------------------------------------------------------------------------------


def _merging(messages: list[dict[str, Any]], purpose: str) -> str:
    user = messages[-1]["content"]
    prior = user.split("<memory_md>\n")[1].split("\n</memory_md>")[0].strip()
    logs = user.split("<daily_logs>")[1].split("</daily_logs>")[0]
    facts = [line for line in logs.splitlines() if line.startswith("- ")]
    return "\n".join([prior or "## Facts", *facts])


@pytest.mark.parametrize("kind", ["slowdown", "drop_after_write", "timeout"])
def test_a_consolidation_completes_through_a_fault(
    kind: str, s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness]
) -> None:
    harness = open_harness(ScriptedModel(_merging))
    harness.workspace.write_text("MEMORY.md", "## Facts\n- Ana lives in Lisbon\n")
    harness.workspace.append_text(TODAY, "\n## Memory Flush — x · session s\n- Ana has a cat\n")
    fault = s3_faults.inject(FAULTS[kind](method="PUT", key="/MEMORY.md"))
    assert harness.consolidate().status == "consolidated"
    assert fault.fired == 1
    text = harness.workspace.read_text("MEMORY.md")
    # The new bullet carries the day of the log it came from (restored when the model drops it).
    assert text == "## Facts\n- Ana lives in Lisbon\n- Ana has a cat (2027-01-15)\n"
    assert harness.consolidate().status == "nothing_new", "the watermark moved once"


def test_a_consolidation_that_cannot_write_changes_nothing(
    s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness]
) -> None:
    """MEMORY.md cannot be written: WorkspaceError, MEMORY.md as it was, the watermark not
    advanced; the next run consolidates the same log text once."""
    model = ScriptedModel(_merging)
    harness = open_harness(model)
    harness.workspace.write_text("MEMORY.md", "## Facts\n- Ana lives in Lisbon\n")
    harness.workspace.append_text(TODAY, "\n## Memory Flush — x · session s\n- Ana has a cat\n")
    s3_faults.inject(S3Fault.slowdown(method="PUT", key="/MEMORY.md", times=None))
    with pytest.raises(WorkspaceError, match=r"conditional write 'MEMORY\.md'"):
        harness.consolidate()
    assert harness.workspace.read_text("MEMORY.md") == "## Facts\n- Ana lives in Lisbon\n"
    s3_faults.clear_faults()
    assert harness.consolidate().status == "consolidated"
    assert len(model.calls) == 2
    assert harness.workspace.read_text("MEMORY.md").count("- Ana has a cat") == 1
    state = json.loads(harness.workspace.read_text(WATERMARK))
    assert "pending" not in state
    assert harness.consolidate().status == "nothing_new"


# -- eviction -----------------------------------------------------------------------------------

SHELL = {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
BIG = "".join(f"line {i}: {'x' * 90}\n" for i in range(1_500))


@pytest.mark.parametrize("kind", ["timeout", "drop_after_write"])
def test_an_eviction_completes_through_a_fault(
    kind: str, s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness]
) -> None:
    harness = open_harness()
    fault = s3_faults.inject(FAULTS[kind](method="PUT", key="large_tool_results/"))
    short = harness.session("s").after_tool(SHELL, BIG)
    assert fault.fired == 1
    [path] = harness.workspace.list("large_tool_results")
    assert path in short
    assert harness.get(path) == BIG


def test_an_eviction_that_cannot_write_keeps_the_result_whole(
    s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness]
) -> None:
    harness = open_harness()
    s3_faults.inject(S3Fault.internal_error(method="PUT", key="large_tool_results/", times=None))
    assert harness.session("s").after_tool(SHELL, BIG) == BIG, "nothing the tool said is lost"
    assert harness.workspace.list("large_tool_results") == [], "no partial file"


# -- lease renewal ------------------------------------------------------------------------------


def _slow_steps(clock: FakeClock, ttl: float) -> list[MaintenanceStep]:
    def slow(harness: MemoryHarness, now: float) -> StepDone:
        clock.advance(ttl * 0.6)  # past half the ttl: the scheduler renews after this
        return StepDone("slow")

    return [MaintenanceStep(name, slow) for name in ("one", "two", "three")]


def test_lease_renewal_retries_through_a_fault(
    s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness], clock: FakeClock
) -> None:
    harness = open_harness()
    ttl = harness.settings.maintenance.lease_ttl
    renewals = s3_faults.inject(
        S3Fault.slowdown(
            method="PUT", key="maintenance.lease", when=lambda r: r.condition == "If-Match"
        )
    )
    report = MaintenanceScheduler(harness.kernel, steps=_slow_steps(clock, ttl)).tick()
    assert renewals.fired == 1
    assert [s.status for s in report.steps] == ["done", "done", "done"]


def test_a_lease_that_cannot_be_renewed_stops_the_tick_without_raising(
    s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness], clock: FakeClock
) -> None:
    harness = open_harness()
    ttl = harness.settings.maintenance.lease_ttl
    s3_faults.inject(
        S3Fault.internal_error(
            key="maintenance.lease",
            times=None,
            when=lambda r: r.method != "PUT" or bool(r.condition == "If-Match"),
        )
    )
    report = MaintenanceScheduler(harness.kernel, steps=_slow_steps(clock, ttl)).tick()
    assert [s.status for s in report.steps] == ["done", "skipped", "skipped"]
    assert report.step("two").detail.startswith("could not renew the maintenance lease")


def test_a_consolidation_lease_renewal_retries_through_a_fault(
    s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness], clock: FakeClock
) -> None:
    ttl = 600.0

    def slow(messages: list[dict[str, Any]], purpose: str) -> str:
        clock.advance(ttl * 0.6)
        return _merging(messages, purpose)

    harness = open_harness(ScriptedModel(slow), consolidation={"lease_ttl": ttl})
    harness.workspace.append_text(TODAY, "\n## Memory Flush — x · session s\n- Ana has a cat\n")
    renewal = s3_faults.inject(
        S3Fault.drop(
            method="PUT",
            key="consolidation.lease",
            after_apply=True,
            when=lambda r: r.condition == "If-Match",
        )
    )
    assert harness.consolidate().status == "consolidated"
    assert renewal.fired == 1


# -- cost: requests per operation ---------------------------------------------------------------

#: What the audit log (on by default) adds to every change: its record, appended to the
#: day's file with the conditional write the daily logs use.
#: The audit record of a change, after an earlier one of this process: appended from what
#: this process wrote last, with one conditional PUT and no read.
AUDIT_APPEND = {
    f"PutObject audit/{TODAY.rsplit('/', 1)[-1].removesuffix('.md')}.jsonl [If-Match]": 1,
}


def test_a_flush_costs_four_requests_and_its_audit_record_one(
    s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness]
) -> None:
    """Once a session has flushed, each flush is: read the tombstones (what forget
    removed), write the mark, write today's log if it is still what this process wrote
    last (a conditional PUT, no read first), read the tombstones again (a forget that ran
    meanwhile). The index follows without asking."""
    replies = iter(f"- fact number {i}" for i in range(10))
    harness = open_harness(ScriptedModel(lambda messages, purpose: next(replies)))
    messages = conversation("hello")
    harness.flush(messages, session_id="s")
    for turn in range(3):
        messages = [*messages, *conversation(f"turn {turn}", "ok")]
        with s3_faults.record() as requests:
            assert harness.flush(messages, session_id="s").written
        assert operations(requests) == {
            "GetObject memory/.tombstones.json": 2,
            "PutObject memory/.flush_state/s.json": 1,
            f"PutObject {TODAY} [If-Match]": 1,
            **AUDIT_APPEND,
        }


def test_memory_save_costs_one_request_and_its_audit_record_one(
    s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness], clock: FakeClock
) -> None:
    harness = open_harness()
    harness.save("- Ana likes tea")
    with s3_faults.record() as requests:
        harness.save("- Ana likes green tea")
    assert operations(requests) == {"PutObject MEMORY.md [If-Match]": 1, **AUDIT_APPEND}
    assert {h.path for h in harness.search("green tea")} == {"MEMORY.md"}
    with s3_faults.record() as requests:
        harness.search("tea")
    assert requests == [], "within index.refresh_interval a search asks the store nothing"
    clock.advance(harness.settings.index.refresh_interval or 30)
    with s3_faults.record() as requests:
        harness.search("tea")
    assert operations(requests) == {"HeadObject MEMORY.md": 1, "ListObjectsV2 ": 1}


# -- appending from this process's own last write -----------------------------------------------


def test_an_append_after_another_writer_is_read_again_and_loses_nothing(
    s3_faults: S3TestServer, s3_workspace_url: str, options: dict[str, Any], pauses: list[float]
) -> None:
    """The second append of ``one`` starts from what it wrote last, with no read; a write
    of ``two`` in between makes that conditional PUT fail (412), and the append reads the
    file and writes again: both lines stay, in order, and without a pause (no race).
    The file is then read before each append for a while (others write it too)."""
    one = open_workspace(s3_workspace_url, options, pauses)
    two = open_workspace(s3_workspace_url, options, pauses)
    one.append_text("memory/log.md", "- one\n")
    with s3_faults.record() as requests:
        one.append_text("memory/log.md", "- one again\n")
    assert operations(requests) == {"PutObject memory/log.md [If-Match]": 1}, "no read"
    two.append_text("memory/log.md", "- two\n")
    with s3_faults.record() as requests:
        one.append_text("memory/log.md", "- one last\n")
    assert [str(r).split(" -> ")[1] for r in requests] == ["412", "200", "200", "200"]
    assert operations(requests) == {
        "PutObject memory/log.md [If-Match]": 2,
        "HeadObject memory/log.md": 1,  # was the lost PUT an earlier attempt of its own?
        "GetObject memory/log.md": 1,
    }
    assert two.read_text("memory/log.md") == "- one\n- one again\n- two\n- one last\n"
    assert pauses == []
    # Written by others too: for a while ``one`` reads it first (no PUT bound to fail).
    with s3_faults.record() as requests:
        one.append_text("memory/log.md", "- one more\n")
    assert operations(requests) == {
        "GetObject memory/log.md": 1,
        "PutObject memory/log.md [If-Match]": 1,
    }


def test_a_file_replaced_or_deleted_meanwhile_is_not_appended_to_from_memory(
    s3_faults: S3TestServer, s3_workspace_url: str, options: dict[str, Any], pauses: list[float]
) -> None:
    """Whoever replaced the file (this object, or another), the append reads it first or
    its conditional PUT fails: the replaced text never comes back. An update that declines
    the remembered text is asked again on the file as it is."""
    one = open_workspace(s3_workspace_url, options, pauses)
    two = open_workspace(s3_workspace_url, options, pauses)
    others = (
        lambda: two.write_text("memory/log.md", "- replaced\n"),
        lambda: two.delete("memory/log.md"),
    )
    own = (
        lambda: one.write_text("memory/log.md", "- replaced\n"),
        lambda: one.delete("memory/log.md"),
    )
    # Its own replace or delete makes ``one`` forget its write (no PUT that must fail).
    for replace in (*own, *others):
        one.delete("memory/log.md")
        one.append_text("memory/log.md", "- secret\n")
        replace()
        with s3_faults.record() as requests:
            one.append_text("memory/log.md", "- next\n")
        assert "secret" not in two.read_text("memory/log.md")
        assert all(r.status != 412 for r in requests) or replace in others
    one.append_text("memory/flag.md", "on\n")
    two.write_text("memory/flag.md", "")
    # From what ``one`` wrote, nothing would change; the file says otherwise.
    written = one.update_text("memory/flag.md", lambda text: None if "on" in text else "on\n")
    assert written is not None
    assert two.read_text("memory/flag.md") == "on\n"


def test_a_flush_between_two_flushes_of_another_harness_is_kept(
    s3_faults: S3TestServer, open_harness: Callable[..., MemoryHarness]
) -> None:
    """Two replicas flush into one daily log; each flush of the first starts from what it
    wrote last, the other's entry in between is kept, and each fact is there once."""
    replies = iter(f"- replica fact number {i}" for i in range(10))

    def model() -> ScriptedModel:
        return ScriptedModel(lambda messages, purpose: next(replies))

    first, second = open_harness(model()), open_harness(model())
    messages = conversation("hello")
    first.flush(messages, session_id="a")
    second.flush(conversation("hi"), session_id="b")
    with s3_faults.record() as requests:
        messages = [*messages, *conversation("more", "ok")]
        assert first.flush(messages, session_id="a").written
    assert operations(requests)[f"PutObject {TODAY} [If-Match]"] == 2, "lost once, then kept"
    text = second.workspace.read_text(TODAY)
    assert [text.count(f"replica fact number {i}") for i in range(3)] == [1, 1, 1]


def test_a_listed_file_is_read_only_when_its_etag_is_not_the_own_write(
    s3_faults: S3TestServer, s3_workspace_url: str, options: dict[str, Any], pauses: list[float]
) -> None:
    """``read_at`` answers from this object's own last write when the listing shows that
    very ETag, and reads the file when another writer's version is listed."""
    one = open_workspace(s3_workspace_url, options, pauses)
    two = open_workspace(s3_workspace_url, options, pauses)
    one.append_text("memory/a.md", "- mine\n")
    [info] = one.scan("memory")
    with s3_faults.record() as requests:
        assert one.read_at(info.path, info.etag_or_hash) == b"- mine\n"
    assert requests == []
    two.append_text("memory/a.md", "- theirs\n")
    [info] = one.scan("memory")
    with s3_faults.record() as requests:
        assert one.read_at(info.path, info.etag_or_hash) == b"- mine\n- theirs\n"
    assert operations(requests) == {"GetObject memory/a.md": 1}


def test_an_append_does_not_remember_a_large_file(
    s3_faults: S3TestServer, s3_workspace_url: str, options: dict[str, Any], pauses: list[float]
) -> None:
    """What a process keeps of its own writes is bounded (256 KiB a file): the next append
    to a larger file reads it first."""
    ws = open_workspace(s3_workspace_url, options, pauses)
    ws.append_text("memory/big.md", "x" * 300_000 + "\n")
    with s3_faults.record() as requests:
        ws.append_text("memory/big.md", "- more\n")
    assert operations(requests) == {
        "GetObject memory/big.md": 1,
        "PutObject memory/big.md [If-Match]": 1,
    }


# -- listings and change detection --------------------------------------------------------------


def test_directory_objects_are_not_files_and_a_same_size_rewrite_is_seen(
    s3_faults: S3TestServer,
    s3_bucket: str,
    open_harness: Callable[..., MemoryHarness],
    clock: FakeClock,
) -> None:
    """Tools such as the S3 console create ``folder/`` marker objects: listings, sweeps and
    consolidation ignore them (and never need them). A rewrite of the same size (mtime on
    S3 is the upload time) is seen by its ETag at the next sweep."""
    client = s3_faults.client()
    try:
        for marker in ("workspace/memory/", "workspace/memory/archive/", "workspace/sessions/"):
            client.put_object(Bucket=s3_bucket, Key=marker, Body=b"")
    finally:
        client.close()
    harness = open_harness(ScriptedModel(_merging))
    ws = harness.workspace
    ws.write_text("memory/2027-01-14.md", "- the walrus is grey\n")
    assert ws.list() == ["memory/2027-01-14.md"]
    assert ws.list("memory", recursive=False) == ["memory/2027-01-14.md"]
    assert [info.path for info in ws.scan("memory")] == ["memory/2027-01-14.md"]
    report = harness.maintain()
    assert report.ok, report
    assert report.step("consolidate").result.files == ("memory/2027-01-14.md",)
    assert "memory/2027-01-14.md" in [h.path for h in harness.search("walrus")]
    ws.write_text("memory/2027-01-14.md", "- the walrus is pink\n")  # same size
    clock.advance(harness.settings.index.refresh_interval or 30)
    assert [h.path for h in harness.search("pink")] == ["memory/2027-01-14.md"]
    assert "memory/2027-01-14.md" not in [h.path for h in harness.search("grey")]


def test_a_maintenance_tick_with_nothing_to_do_costs_four_requests_or_six(
    s3_faults: S3TestServer,
    open_harness: Callable[..., MemoryHarness],
    clock: FakeClock,
    s3_workspace_url: str,
    options: dict[str, Any],
) -> None:
    """One listing serves every step, and consolidation sees from it that nothing is new
    without taking its lease: the lease, one LIST, the tick's state; the state, the
    watermark and MEMORY.md are read too (was 17 requests in all) unless the listing
    finds each at the version this process wrote last (or missing)."""
    harness = open_harness(ScriptedModel("- Ana lives in Porto"))
    harness.flush([{"role": "user", "content": "I live in Porto"}], session_id="s")
    assert harness.maintain(force=True).ok
    harness.usage(days=1)  # the ledger's batch goes out now, not inside the tick
    clock.advance(7 * 3600)
    lease = {
        "PutObject .locks/maintenance.lease [If-None-Match]": 1,
        "ListObjectsV2 ": 1,
        "PutObject memory/.maintenance_state": 1,
        "DeleteObject .locks/maintenance.lease [If-Match]": 1,
    }
    with s3_faults.record() as requests:
        report = harness.maintain(force=True)
    assert report.ok
    assert "nothing new" in report.step("consolidate").detail
    assert operations(requests) == lease
    # Another replica wrote the states since (same content, one more newline).
    other = Workspace.open(s3_workspace_url, options)
    for path in ("memory/.maintenance_state", WATERMARK):
        other.write_text(path, other.read_text(path) + "\n")
    clock.advance(7 * 3600)
    with s3_faults.record() as requests:
        report = harness.maintain(force=True)
    assert report.ok
    assert "nothing new" in report.step("consolidate").detail
    assert operations(requests) == {
        **lease,
        "GetObject memory/.maintenance_state": 1,
        "GetObject memory/.consolidation_state": 1,
    }
