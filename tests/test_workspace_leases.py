"""Leases left by dead processes: taken over at once on their own machine, waited for elsewhere.

A process killed while holding a lease (``offload:<session>``: 120 s ttl) used to stall the
next process for the whole wait, then again on the next turn. Each test here injects a
:class:`~harnessmem.workspace.waiter.Waiter` whose ``sleep`` records the pause (and moves a fake
monotonic clock), so "at once" means no pause at all, and waiting costs no real time.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from harnessmem.errors import LeaseError
from harnessmem.layout import lease_path
from harnessmem.testing import FakeClock, ScriptedModel
from harnessmem.workspace import Workspace, safe_id
from harnessmem.workspace.waiter import Waiter

if TYPE_CHECKING:
    from conftest import WorkspaceTarget

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="dead holders are recognised on Linux only"
)

NOW = 1_800_000_000.0


@dataclass
class RecordingWaiter:
    """A fake monotonic clock that only ``sleep`` moves; every pause is kept."""

    now: float = 0.0
    pauses: list[float] = field(default_factory=list)

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds

    def waiter(self) -> Waiter:
        return Waiter(monotonic=lambda: self.now, sleep=self.sleep)


@pytest.fixture
def waits() -> RecordingWaiter:
    return RecordingWaiter()


def _proc_stat(pid: int | str) -> tuple[str, str] | None:
    """(state, start time) of a process: fields 3 and 22 of proc(5); None when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as file:
            line = file.read()
    except OSError:
        return None
    fields = line.rsplit(")", 1)[-1].split()  # the command name may hold spaces or ')'
    return fields[0], fields[19]


def _this_process() -> dict[str, Any]:
    """This process as a lease record names its holder, read from /proc here."""
    with open("/proc/sys/kernel/random/boot_id") as boot:
        boot_id = boot.read().strip()
    stat = _proc_stat("self")
    return {
        "host": socket.gethostname(),
        "boot": boot_id,
        "pidns": os.readlink("/proc/self/ns/pid"),
        "pid": os.getpid(),
        "started": stat[1] if stat is not None else None,
    }


def _leave_lease(ws: Workspace, name: str, holder: object, *, ttl: float = 120) -> None:
    """Leave lease ``name`` behind as if ``holder`` (a record's holder field) had taken it at
    the workspace clock's now and died: the record as a lease file holds it."""
    now = ws.clock()
    record = {"name": name, "owner": f"other:1:{name}", "token": "t", "acquired": now}
    record["expires"] = now + ttl
    if holder is not None:
        record["holder"] = holder
    assert ws.store.put_if(ws.store.join(lease_path(name)), json.dumps(record).encode(), None)


def _workspace(target: WorkspaceTarget, waits: RecordingWaiter, clock: FakeClock) -> Workspace:
    ws = Workspace.open(target.url, target.storage_options, clock=clock)
    ws.lease_waiter = waits.waiter()
    return ws


_HOLDER = textwrap.dedent(
    """
    import json, sys
    from harnessmem.workspace import Workspace
    url, options, name, now = sys.argv[1:5]
    ws = Workspace.open(url, json.loads(options), clock=lambda: float(now))
    ws.lock(name, ttl=120)
    print("held", flush=True)
    sys.stdin.readline()  # hold it until killed
    """
)


@pytest.fixture
def holder_process(target: WorkspaceTarget) -> Iterator[Any]:
    """Start a process that takes a lease and keeps it: ``start(name) -> Popen``."""
    started: list[subprocess.Popen[str]] = []

    def start(name: str) -> subprocess.Popen[str]:
        args = [target.url, json.dumps(target.storage_options), name, str(NOW)]
        child = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        started.append(child)
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "held"
        return child

    yield start
    for child in started:
        if child.poll() is None:
            child.kill()
        child.communicate()  # reaps it and closes its pipes


@pytest.fixture
def target(workspace_target: WorkspaceTarget) -> WorkspaceTarget:
    return workspace_target


def _kill(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait()


def test_a_lease_records_the_process_that_holds_it(
    target: WorkspaceTarget, waits: RecordingWaiter
) -> None:
    """Host name, boot id, pid namespace, pid and its start time, read from /proc."""
    ws = _workspace(target, waits, FakeClock(NOW))
    with ws.lock("maintenance", ttl=30):
        (path,) = [p for p in ws.fs.find(f"{ws.root}/.locks") if p.endswith(".lease")]
        record = json.loads(ws.fs.cat_file(path))
    assert record["holder"] == _this_process()
    assert record["holder"]["started"] is not None


def test_a_killed_holder_of_this_machine_is_taken_over_at_once(
    target: WorkspaceTarget,
    waits: RecordingWaiter,
    holder_process: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """SIGKILL while holding it; the next process takes it on its first try (no pause),
    long before the 120 s ttl, and says so once."""
    clock = FakeClock(NOW + 1)
    ws = _workspace(target, waits, clock)
    child = holder_process("offload:chat-7")
    with pytest.raises(LeaseError, match="held by"):
        ws.lock("offload:chat-7", timeout=0)  # alive: respected
    _kill(child)
    caplog.set_level(logging.WARNING, logger="harnessmem.workspace")
    with ws.lock("offload:chat-7", timeout=60) as lease:
        assert lease.held
        assert lease.owner.startswith(f"{socket.gethostname()}:{os.getpid()}:")
    assert waits.pauses == []
    (warning,) = [r.getMessage() for r in caplog.records]
    assert f":{child.pid}:" in warning
    assert "no longer running" in warning


def test_a_live_holder_is_waited_for_with_the_timeout(
    target: WorkspaceTarget, waits: RecordingWaiter, holder_process: Any
) -> None:
    """Same machine, pid alive: the full timeout (fake time), then LeaseError."""
    ws = _workspace(target, waits, FakeClock(NOW + 1))
    holder_process("offload:chat-7")
    with pytest.raises(LeaseError, match=r"after waiting 5s"):
        ws.lock("offload:chat-7", timeout=5)
    assert sum(waits.pauses) == pytest.approx(5)


def _exited_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize(
    "other",
    [
        {"host": "another-host"},
        {"boot": "00000000-0000-0000-0000-000000000000"},
        {"pidns": "pid:[1]"},
        {"boot": None},
    ],
    ids=["other-host", "other-boot", "other-pid-namespace", "unknown-boot"],
)
def test_a_dead_pid_elsewhere_is_respected_until_expiry(
    target: WorkspaceTarget, waits: RecordingWaiter, other: dict[str, Any]
) -> None:
    """A pid that is dead here proves nothing about a process of another machine (or
    another pid namespace on this one): the lease holds until its ttl has passed."""
    clock = FakeClock(NOW)
    ws = _workspace(target, waits, clock)
    holder = {**_this_process(), "pid": _exited_pid(), "started": None, **other}
    _leave_lease(ws, "offload:chat-7", holder)
    clock.advance(119)
    with pytest.raises(LeaseError, match="held by"):
        ws.lock("offload:chat-7", timeout=0)
    clock.advance(2)
    with ws.lock("offload:chat-7", timeout=0):
        pass
    assert waits.pauses == []


def test_a_reused_pid_does_not_keep_a_dead_holder_alive(
    target: WorkspaceTarget, waits: RecordingWaiter
) -> None:
    """The recorded pid runs again, but started at another time: another process."""
    ws = _workspace(target, waits, FakeClock(NOW))
    parent = os.getppid()
    assert _proc_stat(parent) is not None
    _leave_lease(ws, "offload:chat-7", {**_this_process(), "pid": parent, "started": "1"})
    with ws.lock("offload:chat-7", timeout=0):
        pass
    # The same pid recorded with its real start time is that very process: respected.
    _leave_lease(ws, "offload:chat-8", {**_this_process(), "pid": parent, "started": None})
    with pytest.raises(LeaseError, match="held by"):
        ws.lock("offload:chat-8", timeout=0)


def test_a_record_of_an_older_version_is_respected_until_expiry(
    target: WorkspaceTarget, waits: RecordingWaiter
) -> None:
    """No holder recorded (written before holders were): nothing to judge, so it holds."""
    clock = FakeClock(NOW)
    ws = _workspace(target, waits, clock)
    record = {"name": "m", "owner": "old:1:t", "token": "x", "acquired": NOW, "expires": NOW + 60}
    assert ws.store.put_if(ws.store.join(lease_path("m")), json.dumps(record).encode(), None)
    with pytest.raises(LeaseError, match=r"held by old:1:t"):
        ws.lock("m", timeout=0)
    clock.advance(61)
    with ws.lock("m", timeout=0):
        pass


def test_holders_are_judged_only_when_understood(
    target: WorkspaceTarget, waits: RecordingWaiter
) -> None:
    """Garbage in a record's holder is no holder (the lease holds until it expires); this
    process is alive; our pid with another start time, or a zombie, is gone."""
    ws = _workspace(target, waits, FakeClock(NOW))
    me = _this_process()
    names = (f"lease-{n}" for n in range(100))

    def taken_at_once(holder: object) -> bool:
        name = next(names)
        _leave_lease(ws, name, holder)
        try:
            with ws.lock(name, timeout=0):
                return True
        except LeaseError:
            return False

    exited = _exited_pid()
    # Read leniently, each of these would name a process that is gone.
    assert not taken_at_once({**me, "pid": str(exited), "started": None})
    assert not taken_at_once({**me, "pid": True, "started": "1"})
    assert not taken_at_once({**me, "pid": exited, "started": None, "boot": 3})
    assert not taken_at_once("garbage")
    assert not taken_at_once(me)
    assert taken_at_once({**me, "started": "1"}), "our pid, another start: a previous process"
    assert taken_at_once({**me, "pid": exited, "started": None})
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        while (_proc_stat(zombie.pid) or ("Z",))[0] != "Z":
            os.sched_yield()
        assert taken_at_once({**me, "pid": zombie.pid, "started": None})
    finally:
        zombie.wait()
    assert waits.pauses == []


_SUMMARY = (
    "## SESSION INTENT\nHelp.\n## SUMMARY\nQuestions.\n## ARTIFACTS\nNone\n## NEXT STEPS\nNone"
)


def _open_harness(target: WorkspaceTarget, waits: RecordingWaiter) -> Any:
    """A harness that compacts past 8 messages, its lease waits going to ``waits``."""
    from harnessmem import MemoryHarness

    section = target.section()
    harness = MemoryHarness.open(
        section.pop("url"),
        workspace=section,
        clock=FakeClock(NOW + 1),
        model=ScriptedModel(lambda messages, purpose: _SUMMARY),
        compaction={"trigger_messages": 8, "keep_messages": 2, "trigger_tokens": 0},
        maintenance={"enabled": False},
        flush={"enabled": False},
        plugins={"autoload": False},
    )
    harness.workspace.lease_waiter = waits.waiter()
    return harness


def _last_compaction(harness: Any, session: str) -> Any:
    result = (
        harness.kernel.hooks.pm.get_plugin("compaction")
        .compactor(harness.kernel, session)
        .last_result
    )
    assert result is not None
    return result


def _conversation() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You help."}]
    for i in range(6):
        messages += [
            {"role": "user", "content": f"question {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    return messages


def test_the_next_compaction_after_a_killed_offload_does_not_wait(
    target: WorkspaceTarget, waits: RecordingWaiter, holder_process: Any
) -> None:
    """The reported stall: a process dies holding ``offload:<session>``; the next process's
    compaction offloads at once instead of waiting ~60 s and being postponed."""
    session = "chat-7"
    _kill(holder_process(f"offload:{safe_id(session)}"))
    with _open_harness(target, waits) as harness:
        messages = _conversation()
        harness.session(session).before_reasoning(messages)
        result = _last_compaction(harness, session)
        assert not result.postponed, result.reason
        assert result.offload is not None
        assert result.offload.appended > 0
        assert waits.pauses == []
        logged = harness.workspace.read_text(f"sessions/{safe_id(session)}.log.jsonl")
        assert "question 0" in logged


def test_a_live_holder_postpones_a_compaction_after_the_short_timeout(
    target: WorkspaceTarget, waits: RecordingWaiter, holder_process: Any
) -> None:
    """Another live process holds the session log: the turn waits
    ``compaction.offload_lease_timeout`` (5 s by default), never the old minute."""
    session = "chat-8"
    holder_process(f"offload:{safe_id(session)}")
    with _open_harness(target, waits) as harness:
        messages = _conversation()
        sent = harness.session(session).before_reasoning(messages)
        # Every message kept (the system message now also holds the memory block).
        assert sent[1:] == messages[1:], "postponed: every message kept"
        assert sent[0]["content"].startswith(messages[0]["content"])
        result = _last_compaction(harness, session)
        assert result.postponed
        assert "offload failed: LeaseError" in result.reason
        assert sum(waits.pauses) == pytest.approx(5)
