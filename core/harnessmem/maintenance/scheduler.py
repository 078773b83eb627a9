"""Background maintenance: archive old daily logs, consolidate, prune, reindex.

A tick runs these steps in order, each in isolation (a step that fails is logged and
reported, and the next one still runs):

1. ``archive``: daily logs ``memory/YYYY-MM-DD.md`` whose date (in ``workspace.timezone``)
   is more than ``maintenance.daily_file_retention_days`` before today move to
   ``memory/archive/``;
2. ``consolidate``: ``harness.consolidate()``;
3. ``prune_sessions``: session logs ``sessions/*.log.jsonl`` not modified for
   ``maintenance.session_retention_days`` are deleted with their offload marks (and marks
   whose log is gone), each under that session's offload lease; usage ledger files
   ``usage/YYYY-MM-DD.jsonl`` dated more than that many days before today (never today's
   or yesterday's) are deleted too;
4. ``prune_evictions``: evicted tool results not modified for ``eviction.retention_days``
   are deleted;
5. ``prune_audit``: audit log files ``audit/YYYY-MM-DD.jsonl`` dated more than
   ``audit.retention_days`` before today (never today's or yesterday's) are deleted;
6. ``reindex``: ``harness.reindex()``.

What the archive and prune steps change is recorded in the audit log (actor
``maintenance``); the consolidation and the reindex record their own changes.

One tick at a time across every process and replica: a tick holds the workspace lease
``maintenance`` (``maintenance.lease_ttl``, renewed between steps; a crashed holder's lease
expires) and skips everything when another holder has it. Once per window: the lease holder
records when each step ran in ``memory/.maintenance_state`` (JSON, written atomically after
every step that changed something, and at the end of the tick for the steps that found
nothing to do), and a step that ran less than ``maintenance.min_gap`` ago is skipped, so
four processes calling ``maintain()`` together run each step once. ``force=True`` ignores the
window (never the lease).

:class:`MaintenanceScheduler` owns the daemon thread: a tick every ``maintenance.interval``
and opportunistic ticks (``consolidate`` and ``reindex``) when a flush asks, at most every
``maintenance.min_gap``. Given a :class:`MaintenanceRunner`, its background ticks run on
that runner's one thread instead, which works through the schedulers of many harnesses
(a ``HarnessPool``'s tenants) one tick at a time, so one tenant never has two at once.
All times come from the harness clock; the thread waits on a
condition, so tests move a fake clock and call :meth:`MaintenanceScheduler.wake` instead of
sleeping.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from harnessmem import layout
from harnessmem.audit import acting_as
from harnessmem.errors import LeaseError, WorkspaceError
from harnessmem.events import MaintenanceEvent
from harnessmem.maintenance._runner import MaintenanceRunner
from harnessmem.maintenance._state import STATE_PATH, TickState
from harnessmem.maintenance._steps import (
    DEFAULT_STEPS,
    MaintenanceStep,
    StepDone,
    StepSkipped,
)
from harnessmem.maintenance.report import MaintenanceReport, StepOutcome, iso_utc
from harnessmem.telemetry import names

if TYPE_CHECKING:
    from harnessmem.kernel import Kernel
    from harnessmem.workspace import Lease

logger = logging.getLogger("harnessmem.maintenance")

LEASE_NAME = layout.MAINTENANCE_LEASE
#: What a flush's request runs: the steps that make its new facts count.
OPPORTUNISTIC_STEPS = ("consolidate", "reindex")
# The thread re-reads the clock at least this often, so a suspended machine or a stepped
# wall clock delays a tick by at most this much.
_MAX_WAIT = 60.0
_DETAIL_CHARS = 300


# ------------------------------------------------------------------------------ scheduler


class MaintenanceScheduler:
    """Runs maintenance ticks for one harness: on demand, on a timer, and when asked.

    :meth:`tick` runs one tick in the calling thread (``harness.maintain()`` uses it).
    :meth:`start` starts the daemon thread (the harness does this when
    ``maintenance.enabled``); its first tick comes one ``interval`` after it starts, or
    sooner when the workspace's last tick is older than that, but never sooner than
    ``min_gap``. The scheduler holds its harness weakly: a harness that is dropped without
    ``close()`` still lets its thread end.
    """

    def __init__(
        self,
        kernel: Kernel,
        *,
        steps: Sequence[MaintenanceStep] = DEFAULT_STEPS,
        runner: MaintenanceRunner | None = None,
    ) -> None:
        self._harness = weakref.ref(kernel)
        #: Where background ticks run: None, a thread of this scheduler's own.
        self.runner = runner
        self._attached = False  # added to the runner by start()
        self._ticking = False  # the runner is running a tick of this scheduler
        self.settings = kernel.settings.maintenance
        self.clock = kernel.clock
        self.steps = tuple(steps)
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise ValueError(f"maintenance step names must be unique, got {names}")
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._requested = False
        self._request_context: contextvars.Context | None = None
        self._last_request: float | None = None
        self._next_due: float | None = None
        self._started_at = 0.0
        self._finalizer: weakref.finalize[Any, Any] | None = None
        # The thread reads the schedule through the workspace, which does not reference the
        # harness: holding the harness only while ticking lets a dropped one be collected.
        self._workspace = kernel.workspace
        self._label = kernel.workspace.url
        #: Background ticks finished so far (tests wait on it with :meth:`wait_for_ticks`).
        self.ticks = 0
        #: The report of the latest background tick.
        self.last_report: MaintenanceReport | None = None

    # one tick --------------------------------------------------------------------------------

    def tick(
        self,
        trigger: str = "manual",
        *,
        steps: Iterable[str] | None = None,
        force: bool = False,
    ) -> MaintenanceReport:
        """Run one tick now and fire ``on_maintenance``; the report lists every step.

        ``steps`` limits the tick to those names (default: all, in order). Does not wait
        for the lease: when another process or thread holds it, every step is skipped and
        ``skipped_reason`` says so.
        """
        kernel = self._harness()
        if kernel is None:
            raise RuntimeError("the harness of this maintenance scheduler no longer exists")
        with (
            acting_as("maintenance"),
            kernel.telemetry.span(names.MAINTENANCE, attributes={names.TRIGGER: trigger}) as span,
        ):
            report = self._tick(kernel, trigger, steps, force)
            span.set(names.SKIPPED_REASON, report.skipped_reason)
            return report

    def _tick(
        self, kernel: Kernel, trigger: str, steps: Iterable[str] | None, force: bool
    ) -> MaintenanceReport:
        chosen = self._select(steps)
        started = self.clock()
        lease = kernel.workspace.try_lock(LEASE_NAME, ttl=self.settings.lease_ttl)
        if lease is None:
            reason = "another process or thread holds the maintenance lease"
            outcomes = tuple(StepOutcome(s.name, "skipped", reason) for s in chosen)
            report = MaintenanceReport(trigger, started, self.clock(), outcomes, reason)
        else:
            try:
                # The steps list their folders from one listing of the workspace.
                with kernel.workspace.listing_snapshot():
                    outcomes = self._run_steps(kernel, chosen, lease, trigger, started, force)
            finally:
                try:
                    lease.release()
                except Exception as exc:  # it expires by itself; the tick's work stands
                    logger.warning("releasing the maintenance lease failed: %s", exc)
            report = MaintenanceReport(trigger, started, self.clock(), outcomes)
        kernel.hooks.maintenance(
            MaintenanceEvent(
                steps=report.outcomes,
                started=report.started,
                finished=report.finished,
                trigger=trigger,
                report=report,
            )
        )
        return report

    def _select(self, names: Iterable[str] | None) -> tuple[MaintenanceStep, ...]:
        if names is None:
            return self.steps
        wanted = set(names)
        unknown = wanted - {s.name for s in self.steps}
        if unknown:
            raise ValueError(
                f"unknown maintenance steps {sorted(unknown)}; "
                f"known: {[s.name for s in self.steps]}"
            )
        return tuple(s for s in self.steps if s.name in wanted)

    def _run_steps(
        self,
        kernel: Kernel,
        chosen: Sequence[MaintenanceStep],
        lease: Lease,
        trigger: str,
        started: float,
        force: bool,
    ) -> tuple[StepOutcome, ...]:
        state = TickState.read(kernel.workspace)
        window = self.settings.min_gap
        outcomes: list[StepOutcome] = []
        lost: str | None = None
        unsaved = False  # steps recorded in ``state`` but not on file yet
        for step in chosen:
            if lost is not None:
                outcomes.append(StepOutcome(step.name, "skipped", lost))
                continue
            now = self.clock()
            last = state.last_run(step.name)
            # A record from the future (another replica's clock runs ahead) counts as
            # recent, unless it is so far ahead that it cannot be a real run.
            if not force and last is not None and -window <= now - last < window:
                outcomes.append(
                    StepOutcome(
                        step.name,
                        "skipped",
                        f"ran at {iso_utc(last)}, within maintenance.min_gap ({window:g}s)",
                    )
                )
                continue
            outcome, idle = _run_step(step, kernel, now)
            outcomes.append(outcome)
            lost = self._keep(lease)
            if lost is not None:
                # Someone took the lease over (our step outlived lease_ttl): they may run the
                # remaining steps and write the state now; doing either here would clash.
                logger.warning("maintenance stopped after step %s: %s", step.name, lost)
                continue
            state.steps[step.name] = {"at": now, "outcome": outcome.outcome[:_DETAIL_CHARS]}
            state.last_tick = {"started": started, "finished": self.clock(), "trigger": trigger}
            # Saved after every step that changed something, so a tick cut short by a crash
            # resumes where it stopped; a step that found nothing to do is saved with the
            # next write (at the latest the tick's last, before the lease is released).
            unsaved = idle
            if not idle:
                self._save(state, kernel)
        if unsaved and lost is None:
            self._save(state, kernel)
        return tuple(outcomes)

    def _keep(self, lease: Lease) -> str | None:
        """Renew ``lease`` once half its ttl has passed; why it was lost, or None."""
        if self.clock() < lease.expires - lease.ttl / 2:
            return None  # unexpired, so nobody can have taken it over: spare the write
        try:
            lease.renew()
        except LeaseError as exc:
            return f"lost the maintenance lease: {exc.message}"
        except WorkspaceError as exc:
            # The store failed through every retry: the lease may run out before it
            # answers again, and then another replica may start the next steps.
            return f"could not renew the maintenance lease: {exc.message}"
        return None

    @staticmethod
    def _save(state: TickState, kernel: Kernel) -> None:
        try:
            state.write(kernel.workspace)
        except Exception as exc:
            # The step's work stands; without the record it may run once more next time.
            logger.warning("writing %s failed: %s", STATE_PATH, exc)

    # the thread ------------------------------------------------------------------------------

    @property
    def thread(self) -> threading.Thread | None:
        """The daemon thread, once started."""
        return self._thread

    @property
    def running(self) -> bool:
        """Whether the thread (or the runner, for this scheduler) is alive and not told to stop."""
        if self.runner is not None:
            return self._attached and self.runner.running and not self._stopping
        return self._thread is not None and self._thread.is_alive() and not self._stopping

    def start(self) -> None:
        """Start the daemon thread, or join the runner (idempotent; refused after :meth:`stop`)."""
        kernel = self._harness()
        with self._cond:
            if self._thread is not None or self._attached or self._stopping or kernel is None:
                return
            self._started_at = self.clock()
            # Ends the thread when the harness is garbage collected without close().
            self._finalizer = weakref.finalize(kernel, self.signal_stop)
            if self.runner is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"harnessmem-maintenance {self._label}", daemon=True
                )
                self._thread.start()
                return
            self._attached = True
        self.runner.add(self)

    def request(self) -> bool:
        """Ask for an opportunistic tick (consolidate, reindex); never blocks.

        Throttled to one per ``maintenance.min_gap`` in this process (and the window does
        the same across processes). False when throttled or the thread is not running.
        """
        with self._cond:
            if not self.running:
                return False
            now = self.clock()
            if self._last_request is not None and now - self._last_request < self.settings.min_gap:
                return False
            self._last_request = now
            self._requested = True
            # The tick runs in the context of the request: its span nests under the span
            # of the flush (or the caller) that asked for it.
            self._request_context = contextvars.copy_context()
            self._cond.notify_all()
        if self.runner is not None:
            self.runner.wake()
        return True

    def wake(self) -> None:
        """Make the thread look at the clock now (after moving a fake clock, say)."""
        with self._cond:
            self._cond.notify_all()
        if self.runner is not None:
            self.runner.wake()

    def signal_stop(self) -> None:
        """Tell the thread to end after the tick it is running, if any; does not wait."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self.runner is not None:
            self.runner.wake()

    def join(self, timeout: float | None = None) -> bool:
        """Wait up to ``timeout`` seconds for the thread to end; True when it has.

        On a runner: for its tick of this scheduler, if one is running, to end.
        """
        if self.runner is not None:
            if self.runner.on_runner_thread():
                return not self._ticking
            with self._cond:
                done = self._cond.wait_for(lambda: not self._ticking, timeout)
            if done and self._finalizer is not None:
                self._finalizer.detach()
            return done
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return thread is None
        thread.join(timeout)
        if thread.is_alive():
            return False
        if self._finalizer is not None:
            self._finalizer.detach()
        return True

    def stop(self, timeout: float | None = None) -> bool:
        """:meth:`signal_stop`, then :meth:`join`; True when the thread has ended."""
        self.signal_stop()
        return self.join(timeout)

    def wait_for_ticks(self, count: int, timeout: float) -> bool:
        """Block until ``count`` background ticks have finished (or ``timeout`` seconds)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.ticks >= count, timeout)

    def poll(self) -> tuple[str | None, float | None]:
        """For a :class:`MaintenanceRunner`: the trigger of a tick due now, or the seconds
        until one may be; ``(None, None)`` once this scheduler is done (stopped, or its
        harness gone). A trigger returned marks the tick as running: the runner must then
        call :meth:`run_polled` with it."""
        if self._next_due is None:
            self._next_due = self._first_due()
        with self._cond:
            if self._stopping or self._harness() is None:
                return None, None
            trigger = None
            if self._requested:
                self._requested = False
                trigger = "request"
            elif self._next_due - self.clock() <= 0:
                trigger = "interval"
            if trigger is None:
                return None, self._next_due - self.clock()
            self._ticking = True
            return trigger, 0.0

    def run_polled(self, trigger: str) -> None:
        """For a :class:`MaintenanceRunner`: run the background tick :meth:`poll` gave."""
        try:
            self._background_tick(trigger)
        finally:
            with self._cond:
                self._ticking = False
                self._cond.notify_all()

    def _run(self) -> None:
        try:
            self._next_due = self._first_due()
            while True:
                trigger = self._wait_for_work()
                if trigger is None:
                    return
                self._background_tick(trigger)
        except BaseException:  # pragma: no cover - a bug; say so instead of dying silently
            logger.exception("the maintenance thread of %s stopped", self._label)

    def _first_due(self) -> float:
        # From the start time, not the thread's first look at the clock: the thread may
        # get to run after the clock has moved.
        now = self._started_at
        due = now + self.settings.interval
        try:
            last = TickState.read(self._workspace).last_full_tick()
        except Exception as exc:
            logger.warning("reading %s failed: %s", STATE_PATH, exc)
            return due
        if last is not None:
            due = min(due, max(last + self.settings.interval, now + self.settings.min_gap))
        return due

    def _wait_for_work(self) -> str | None:
        with self._cond:
            while True:
                if self._stopping or self._harness() is None:
                    return None
                if self._requested:
                    self._requested = False
                    return "request"
                assert self._next_due is not None
                delay = self._next_due - self.clock()
                if delay <= 0:
                    return "interval"
                # Real seconds: a fake clock that never moves just means no tick.
                self._cond.wait(min(delay, _MAX_WAIT))

    def _background_tick(self, trigger: str) -> None:
        kernel = self._harness()
        try:
            if kernel is None or kernel.closed:
                return
            steps = OPPORTUNISTIC_STEPS if trigger == "request" else None
            with self._cond:
                context, self._request_context = self._request_context, None
            if trigger == "request" and context is not None:
                report = context.run(self.tick, trigger, steps=steps)
            else:
                report = self.tick(trigger, steps=steps)
            self.last_report = report
            if report.failed:
                logger.warning("maintenance: %s", report)
            else:
                logger.info("maintenance: %s", report)
        except Exception:
            logger.exception("maintenance tick (%s) of %s failed", trigger, self._label)
        finally:
            del kernel  # a dropped harness may now be collected
            if trigger == "interval":
                self._next_due = self._due_after_tick()
            with self._cond:
                self.ticks += 1
                self._cond.notify_all()

    def _due_after_tick(self) -> float:
        now = self.clock()
        try:
            last = TickState.read(self._workspace).last_full_tick()
        except Exception:
            last = None
        if last is None:
            return now + self.settings.interval
        # Another replica may have ticked (or be ticking): follow the shared schedule, but
        # look again no sooner than min_gap.
        return max(last + self.settings.interval, now + self.settings.min_gap)


def _run_step(step: MaintenanceStep, kernel: Kernel, now: float) -> tuple[StepOutcome, bool]:
    """Run one step; its outcome, and whether it changed nothing (see ``StepDone.idle``).

    Never raises (that is what keeps a failing step from stopping the rest).
    """
    with kernel.telemetry.span(names.MAINTENANCE_STEP + step.name) as span:
        outcome, idle = _run_traced(step, kernel, now)
        span.set(names.STATUS, outcome.status)
        if span.recording:
            span.set_attributes({names.STEP_COUNT + k: v for k, v in outcome.counts.items()})
    kernel.telemetry.count(
        names.MAINTENANCE_STEPS, 1, {"harnessmem.step": step.name, names.OUTCOME: outcome.status}
    )
    return outcome, idle


def _run_traced(step: MaintenanceStep, kernel: Kernel, now: float) -> tuple[StepOutcome, bool]:
    begun = time.perf_counter()

    def outcome(status: str, detail: str, done: StepDone | None = None) -> StepOutcome:
        return StepOutcome(
            step.name,
            status,
            detail,
            counts=dict(done.counts) if done else {},
            started=now,
            seconds=time.perf_counter() - begun,
            result=done.result if done else None,
        )

    try:
        if step.audit is None:
            done = step.run(kernel, now)
        else:
            with kernel.audit.change(step.audit) as change:
                done = step.run(kernel, now)
                for name, count in done.counts.items():
                    change.count(name, count)
    except StepSkipped as exc:
        return outcome("skipped", str(exc)), True
    except Exception as exc:
        logger.warning("maintenance step %s failed", step.name, exc_info=True)
        # One line: the report and the CLI list one step per line (hints follow "; ").
        return outcome("failed", f"{type(exc).__name__}: {exc}".replace("\n", "; ")), False
    if done.errors:
        errors = "; ".join(done.errors[:3]) + (" ..." if len(done.errors) > 3 else "")
        failed = outcome("failed", f"{done.detail}; {len(done.errors)} failed: {errors}", done)
        return failed, False
    return outcome("done", done.detail, done), done.idle
