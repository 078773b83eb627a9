"""``HarnessPool``: many tenants in one process, at most ``max_open`` harnesses, nothing leaked.

The scale test serves 200 tenants with at most 20 harnesses open, on local folders and on
an S3 bucket (moto); the PostgreSQL variant is in the plugin's tests
(``plugins/harnessmem-postgres/tests/test_postgres_tenants.py``).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harnessmem import HarnessPool, MemoryHarness, hookimpl, lifetime
from harnessmem.errors import ConfigError, HarnessMemError
from harnessmem.events import MaintenanceEvent
from harnessmem.pool import CLOSE_THREADS
from harnessmem.testing import ScriptedModel
from harnessmem.testing.workspace_suite import FakeClock

OPTIONS: dict[str, Any] = {"maintenance": {"enabled": False}, "plugins": {"autoload": False}}


def _fact(tenant: str) -> str:
    return f"- {tenant} keeps the spare key in tin-{tenant}; the shared word is heliotrope"


def serve_and_check(pool: HarnessPool, tenants: int) -> None:
    """Every tenant saves a fact; then every tenant (reopened) finds its own fact only.

    Checked after every call: never more than ``max_open`` harnesses open.
    """
    names = [f"tenant-{n:03d}" for n in range(tenants)]
    for name in names:
        pool.harness(name).save(_fact(name))
        assert len(pool) <= pool.max_open
    for name in reversed(names):  # the most recently used were evicted first: reopen them all
        harness = pool.harness(name)
        assert len(pool) <= pool.max_open
        hits = harness.search("heliotrope spare key", 50)
        assert [h.content for h in hits] == [_fact(name)], name
        assert harness.search(f"tin-{names[0] if name != names[0] else names[1]}") == []
    # A tenant asked for before its close began is handed its harness back, not reopened.
    assert pool.opened + pool.reclaimed >= 2 * tenants - pool.max_open
    assert pool.wait_for_closes()
    assert pool.evicted == pool.opened - len(pool)


# -- tenant ids and templates -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tenant", "why"),
    [
        ("../x", "path separator"),
        ("a/b", "path separator"),
        ("a\\b", "path separator"),
        ("..", "path separator"),
        ("", "empty"),
        ("bad\x00id", "control"),
        ("tab\tid", "control"),
        (".hidden", "starts with a dot"),
        ("-rf", "starts with a dot or a dash"),
        ("x" * 129, "longer than 128"),
        ("a b", "characters other than"),
        ("ü", "characters other than"),
        ("a?b", "characters other than"),
    ],
)
def test_bad_tenant_ids_get_a_clear_error(tmp_path: Path, tenant: str, why: str) -> None:
    with HarnessPool(str(tmp_path / "agents" / "{tenant}"), **OPTIONS) as pool:
        with pytest.raises(ValueError, match=f"invalid tenant id.*{why}"):
            pool.harness(tenant)
        assert len(pool) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "nothing created"


def test_a_non_string_tenant_is_refused(tmp_path: Path) -> None:
    with (
        HarnessPool(str(tmp_path / "{tenant}"), **OPTIONS) as pool,
        pytest.raises(ValueError, match="must be a string"),
    ):
        pool.harness(42)  # type: ignore[arg-type]


@pytest.mark.parametrize("tenant", ["alice", "user_42", "a.b", "x@example.com", "A-Z+0=9"])
def test_good_tenant_ids_name_a_folder(tmp_path: Path, tenant: str) -> None:
    with HarnessPool(str(tmp_path / "agents" / "{tenant}"), **OPTIONS) as pool:
        harness = pool.harness(tenant)
        assert harness.workspace.local_root == (tmp_path / "agents" / tenant).resolve()


@pytest.mark.parametrize("template", ["./agents", "./{user}/x", "./{tenant}/{tenant}", "./{}"])
def test_the_template_needs_one_tenant_field(template: str) -> None:
    with pytest.raises(ConfigError, match="exactly once"):
        HarnessPool(template)


def test_max_open_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max_open"):
        HarnessPool(str(tmp_path / "{tenant}"), max_open=0)


# -- many tenants -------------------------------------------------------------------------------


def test_200_tenants_with_20_open_on_local_folders(tmp_path: Path) -> None:
    template = str(tmp_path / "agents" / "{tenant}")
    with HarnessPool(template, max_open=20, **OPTIONS) as pool:
        serve_and_check(pool, 200)
        shared = pool.index
        assert shared is not None
        assert (
            pool.harness("tenant-000").kernel.index.path == tmp_path / "agents" / "memory_index.db"
        )  # type: ignore[attr-defined]
        assert shared.workspace_id == "", "the shared instance serves no tenant itself"
    assert sorted(p.name for p in (tmp_path / "agents").iterdir())[-1] == "tenant-199"
    # A harness opened alone on one tenant uses the same file and sees only that tenant.
    with MemoryHarness.open(tmp_path / "agents" / "tenant-007", **OPTIONS) as alone:
        assert alone.reindex().indexed == 0, "already indexed by the pool"
        assert [h.content for h in alone.search("heliotrope")] == [_fact("tenant-007")]


@pytest.mark.s3
def test_200_tenants_with_20_open_on_s3(
    s3_bucket: str, s3_storage_options: dict[str, Any], tmp_path: Path
) -> None:
    workspace = {"storage_options": s3_storage_options, "index_path": str(tmp_path / "pool.db")}
    with HarnessPool(
        f"s3://{s3_bucket}/agents/{{tenant}}",
        max_open=20,
        workspace=workspace,
        index={"refresh_interval": 0},
        **OPTIONS,
    ) as pool:
        serve_and_check(pool, 200)
    with HarnessPool(
        f"s3://{s3_bucket}/agents/{{tenant}}", workspace=workspace, **OPTIONS
    ) as again:
        harness = again.harness("tenant-123")
        assert harness.workspace.url == f"s3://{s3_bucket}/agents/tenant-123"
        assert [h.content for h in harness.search("heliotrope")] == [_fact("tenant-123")]


def test_the_shared_s3_index_lives_in_the_cache_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pool = HarnessPool("s3://bucket/agents/{tenant}", **OPTIONS)
    path = pool.shared_index_path
    assert path.parent.parent == tmp_path / "cache" / "harnessmem"
    assert path == HarnessPool("s3://bucket/agents/{tenant}").shared_index_path
    assert path != HarnessPool("s3://bucket/others/{tenant}").shared_index_path


# -- threads ------------------------------------------------------------------------------------


def test_threads_asking_for_tenants_at_once(tmp_path: Path) -> None:
    """8 threads, 30 tenants, 5 open: each save is found by its tenant, none lost or leaked."""
    template = str(tmp_path / "agents" / "{tenant}")
    errors: list[BaseException] = []
    saved: dict[str, set[str]] = {f"t{n}": set() for n in range(30)}
    lock = threading.Lock()

    def work(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for step in range(25):
                tenant = f"t{rng.randrange(30)}"
                word = f"marmot{seed}x{step}"
                with pool.use(tenant) as harness:
                    harness.save(f"- {tenant} noted {word}")
                    hits = harness.search(word)
                    assert [h.content for h in hits] == [f"- {tenant} noted {word}"]
                with lock:
                    saved[tenant].add(word)
        except BaseException as exc:
            errors.append(exc)

    with HarnessPool(template, max_open=5, **OPTIONS) as pool:
        threads = [threading.Thread(target=work, args=(seed,)) for seed in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert len(pool) <= 5
        for tenant, words in saved.items():
            hits = pool.harness(tenant).search("noted", 200)
            assert {h.content.rsplit(" ", 1)[1] for h in hits} == words, tenant


def test_a_pinned_harness_is_not_evicted(tmp_path: Path) -> None:
    with HarnessPool(str(tmp_path / "{tenant}"), max_open=2, **OPTIONS) as pool:
        with pool.use("alice") as alice:
            for name in ("b", "c", "d"):
                pool.harness(name)
            assert not alice.kernel.closed
            assert pool.open_tenants == ["alice", "d"], "the unpinned ones went"
            with pool.use("d"), pool.use("e"):
                assert len(pool) == 3, "over max_open while all are pinned"
            assert len(pool) == 2
        pool.harness("f")
        assert pool.wait_for_closes()
        assert alice.kernel.closed, "evicted once unpinned"


# -- closing ------------------------------------------------------------------------------------


def test_eviction_drains_queued_flushes(tmp_path: Path) -> None:
    model = ScriptedModel("- Ana lives in Lisbon")
    with HarnessPool(
        str(tmp_path / "{tenant}"), max_open=1, model=model, flush={"mode": "background"}, **OPTIONS
    ) as pool:
        ana = pool.harness("ana")
        messages = [
            {"role": "user", "content": "I live in Lisbon"},
            {"role": "assistant", "content": "Noted."},
        ]
        ctx = ana.session("s").after_call(messages)
        assert ctx.outcomes["flush"].status == "queued"
        pool.harness("bea")  # evicts ana: her queued flush is written first
        assert pool.wait_for_closes()
        assert ana.kernel.closed
        assert "- Ana lives in Lisbon" in "".join(
            ana.workspace.read_text(p) for p in ana.workspace.list("memory")
        )
        again = pool.harness("ana")
        assert [h.content for h in again.search("Lisbon")] == ["- Ana lives in Lisbon"]
        assert pool.harness("bea").search("Lisbon") == []


def test_close_closes_every_harness_and_refuses_more(tmp_path: Path) -> None:
    pool = HarnessPool(str(tmp_path / "{tenant}"), max_open=3, **OPTIONS)
    opened = [pool.harness(name) for name in ("a", "b", "c")]
    shared = pool.index
    pool.close()
    pool.close()
    assert all(h.kernel.closed for h in opened)
    with pytest.raises(HarnessMemError, match="closed"):
        pool.harness("a")
    with pytest.raises(HarnessMemError, match="closed"):
        shared.files()  # type: ignore[union-attr]


def test_one_deadline_bounds_the_close_of_the_whole_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """close(timeout) is one budget for every tenant: a tenant whose queued work took two
    seconds leaves the next one three of the five, not five of its own."""
    now = [100.0]
    monkeypatch.setattr(lifetime, "monotonic", lambda: now[0])
    given: list[float] = []

    def slow_drain(left: float) -> None:
        given.append(left)
        now[0] += 2.0  # the queued flushes took two seconds

    pool = HarnessPool(tmp_path / "{tenant}", maintenance={"enabled": False})
    for tenant in ("a", "b", "c"):
        pool.harness(tenant).kernel.on_close(slow_drain)
    pool.close(timeout=5.0)
    assert given == [5.0, 3.0, 1.0]


def test_a_failing_close_still_closes_the_rest_and_raises_the_first(tmp_path: Path) -> None:
    pool = HarnessPool(tmp_path / "{tenant}", maintenance={"enabled": False})
    harnesses = [pool.harness(t) for t in ("a", "b", "c")]

    def broken(_left: float) -> None:
        raise RuntimeError("queue jammed")

    harnesses[0].kernel.on_close(broken)
    with pytest.raises(HarnessMemError, match=r"closing the harness pool failed: .*queue jammed"):
        pool.close()
    assert all(h.kernel.closed for h in harnesses)


def test_a_given_model_is_shared_and_closed_once(tmp_path: Path) -> None:
    closed: list[str] = []

    class Model(ScriptedModel):
        def close(self) -> None:
            closed.append("model")

    with HarnessPool(str(tmp_path / "{tenant}"), max_open=1, model=Model("- x"), **OPTIONS) as pool:
        pool.harness("a")
        pool.harness("b")  # evicts a, whose close must not close the shared model
        assert closed == []
    assert closed == ["model"]


# -- maintenance --------------------------------------------------------------------------------


class _TickLog:
    def __init__(self) -> None:
        self.threads: list[str] = []

    @hookimpl
    def on_maintenance(self, event: MaintenanceEvent) -> None:
        self.threads.append(threading.current_thread().name)


@pytest.fixture
def ticking_pool(tmp_path: Path) -> Iterator[tuple[HarnessPool, FakeClock, _TickLog]]:
    clock = FakeClock()
    log = _TickLog()
    pool = HarnessPool(
        str(tmp_path / "{tenant}"),
        max_open=10,
        clock=clock,
        plugins=[log],
        maintenance={"enabled": True, "interval": 3_600, "min_gap": 60},
    )
    yield pool, clock, log
    pool.close()


def test_one_maintenance_thread_works_through_the_tenants(
    ticking_pool: tuple[HarnessPool, FakeClock, _TickLog],
) -> None:
    pool, clock, log = ticking_pool
    harnesses = [pool.harness(f"t{n}") for n in range(5)]
    runner = pool.maintenance_runner
    assert runner is not None
    assert len(runner) == 5
    names = {t.name for t in threading.enumerate()}
    assert not any(name.startswith("harnessmem-maintenance ") for name in names), names
    clock.advance(3_601)
    runner.wake()
    assert runner.wait_for_ticks(5, timeout=60)
    assert log.threads == ["harnessmem-pool-maintenance"] * 5, "one thread, one tick each"
    assert all(h.kernel.request_maintenance() for h in harnesses[:2]), "requests reach the runner"
    runner.wake()
    assert runner.wait_for_ticks(7, timeout=60)
    assert len(log.threads) == 7


def test_an_evicted_tenant_leaves_the_runner(
    ticking_pool: tuple[HarnessPool, FakeClock, _TickLog],
) -> None:
    pool, clock, _log = ticking_pool
    first = pool.harness("t0")
    for n in range(1, 11):
        pool.harness(f"t{n}")
    assert pool.wait_for_closes()
    assert first.kernel.closed
    runner = pool.maintenance_runner
    assert runner is not None
    clock.advance(3_601)
    runner.wake()
    assert runner.wait_for_ticks(10, timeout=60)
    assert len(runner) == 10, "the closed tenant's scheduler was dropped"


def test_a_harness_handed_out_is_open_even_when_every_other_is_pinned(tmp_path: Path) -> None:
    """With max_open=1 and t1 pinned, asking for t2 used to open it and close it at once
    (it was the only harness the eviction could take), handing out a closed harness."""
    with HarnessPool(str(tmp_path / "{tenant}"), max_open=1, **OPTIONS) as pool:
        with pool.use("t1") as first:
            second = pool.harness("t2")
            assert not second.kernel.closed
            assert not first.kernel.closed
            assert second.search("anything") == []  # usable, not merely not-closed
            assert pool.over_max == 1
            assert sorted(pool.open_tenants) == ["t1", "t2"]
        # The pin gone, the pool is back to max_open, the least recently used closed.
        assert len(pool) == 1
        assert pool.wait_for_closes()
        assert first.kernel.closed
        assert not pool.harness("t2").kernel.closed
        assert pool.over_max == 1


@pytest.mark.parametrize(
    "tenant",
    ["memory_index.db", "memory_index.db-wal", "memory_index.db-shm", "memory_index.db-journal",
     "MEMORY_INDEX.DB-wal", "memory_index.db.lock"],
)  # fmt: skip
def test_tenant_ids_that_name_the_pool_s_own_files_are_refused(tmp_path: Path, tenant: str) -> None:
    """A tenant named after the shared index's files made a folder beside the index: after
    a restart alice and carol could no longer be served."""
    template = str(tmp_path / "agents" / "{tenant}")
    with HarnessPool(template, **OPTIONS) as pool:
        pool.harness("alice").save("Alice prefers window seats")
        with pytest.raises(ValueError, match="are the pool's own"):
            pool.harness(tenant)
        pool.harness("carol").save("Carol prefers aisle seats")
    assert sorted(p.name for p in (tmp_path / "agents").iterdir() if p.is_dir()) == [
        "alice",
        "carol",
    ], "no stray folder"
    with HarnessPool(template, **OPTIONS) as restarted:  # the server, restarted
        assert restarted.harness("alice").search("window seats")
        assert restarted.harness("carol").search("aisle seats")


# -- forget racing an eviction ------------------------------------------------------------------


class _Pause:
    """Wraps a function: its first call says it was reached and waits to be let go."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.reached = threading.Event()
        self.opened = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self.reached.is_set():
            self.reached.set()
            assert self.opened.wait(30)
        return self.inner(*args, **kwargs)


@pytest.mark.parametrize("stage", ["tombstone", "apply", "reindex", "scrub"])
def test_a_forget_racing_its_harness_eviction_finishes_or_can_be_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """The pool closes the tenant's harness (``max_open=1``, another tenant asked for) while
    its forget is at ``stage``: the forget finishes, or fails and a second forget on the
    reopened harness finds what is left; then no byte under the pool's folder holds it."""
    from harnessmem.memory import erasure
    from harnessmem.memory import files as mf

    with HarnessPool(str(tmp_path / "{tenant}"), max_open=1, **OPTIONS) as pool:
        first = pool.harness("t1")
        first.save("- the dog is called Zorblax\n- the user lives in Quimper")
        assert first.search("Zorblax")
        eraser = first.kernel.eraser
        targets: dict[str, tuple[Any, str]] = {
            "tombstone": (erasure, "add_tombstone"),
            "apply": (eraser, "_apply"),
            "reindex": (mf, "reindex_paths"),
            "scrub": (first.kernel, "scrub_index"),
        }
        owner, name = targets[stage]
        pause = _Pause(getattr(owner, name))
        monkeypatch.setattr(owner, name, pause)
        closing = threading.Event()
        close = first.close

        def closed_by_the_pool(*args: Any, **kwargs: Any) -> None:
            closing.set()
            close(*args, **kwargs)

        monkeypatch.setattr(first, "close", closed_by_the_pool)
        outcome: dict[str, Any] = {}

        def forget() -> None:
            try:
                outcome["result"] = first.forget("Zorblax")
            except HarnessMemError as exc:
                outcome["error"] = exc

        forgetting = threading.Thread(target=forget)
        forgetting.start()
        assert pause.reached.wait(30)
        evicting = threading.Thread(target=pool.harness, args=("t2",))
        evicting.start()
        assert closing.wait(30)
        pause.opened.set()
        forgetting.join(30)
        evicting.join(30)
        assert not forgetting.is_alive()
        assert not evicting.is_alive()
        monkeypatch.undo()
        again = pool.harness("t1")
        assert again is not first
        if "error" in outcome:
            assert again.forget("Zorblax").count >= 1
        assert not again.search("Zorblax")
        assert again.search("Quimper")
    held = [p for p in tmp_path.rglob("*") if p.is_file() and b"zorblax" in p.read_bytes().lower()]
    assert held == [], outcome


# -- closing evicted harnesses in the background -------------------------------------------------


class _Gate:
    """A close step (``kernel.on_close``): says it began, waits to be let go, then runs
    ``then`` (a close's last writes: a ledger, a flush) and says it is done."""

    def __init__(self, then: Any = None) -> None:
        self.then = then
        self.began = threading.Event()
        self.go = threading.Event()
        self.done = threading.Event()
        self.thread = ""

    def __call__(self, _left: float) -> None:
        self.thread = threading.current_thread().name
        self.began.set()
        assert self.go.wait(30), "never let go"
        if self.then is not None:
            self.then()
        self.done.set()


class _Opens:
    """Records the workspace of every harness the pool builds."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    @hookimpl
    def harnessmem_configure(self, settings: Any) -> None:
        self.log.append("open " + settings.workspace.url.rsplit("/", 1)[1])


def _pool_recording_opens(tmp_path: Path, log: list[str]) -> HarnessPool:
    """A pool of one open harness whose every open is recorded in ``log``."""
    return HarnessPool(
        str(tmp_path / "{tenant}"),
        max_open=1,
        plugins=[_Opens(log)],
        maintenance={"enabled": False},
    )


def test_the_call_that_evicts_does_not_wait_for_the_close(tmp_path: Path) -> None:
    """Asking for bea evicts ana, whose close is slow (it waits on an event): the call
    returns at once and ana closes on the pool's close thread (it used to close in the
    caller's thread, most of a turn's time in a fleet of 500 tenants)."""
    with HarnessPool(str(tmp_path / "{tenant}"), max_open=1, **OPTIONS) as pool:
        ana = pool.harness("ana")
        gate = _Gate()
        ana.kernel.on_close(gate)
        bea = pool.harness("bea")
        assert not gate.done.is_set(), "the caller waited for ana's close"
        assert pool.open_tenants == ["bea"]
        assert gate.began.wait(30)
        assert not ana.kernel.closed
        gate.go.set()
        assert pool.wait_for_closes()
        assert ana.kernel.closed
        assert not bea.kernel.closed
        assert gate.thread == "harnessmem-pool-close"
        assert pool.evicted == 1


def test_a_tenant_asked_for_while_its_harness_closes_waits_and_sees_all_its_data(
    tmp_path: Path,
) -> None:
    """Ana's old harness writes once more while it closes; asking for ana meanwhile waits
    for that close, then opens a harness that finds the write: never two harnesses of
    one tenant writing at once."""
    log: list[str] = []
    fact = "- Ana keeps the spare key under the blue pot"
    with _pool_recording_opens(tmp_path, log) as pool:
        ana = pool.harness("ana")

        def last_write() -> None:
            ana.save(fact)
            log.append("ana's last write")

        gate = _Gate(last_write)
        ana.kernel.on_close(gate)
        pool.harness("bea")
        assert gate.began.wait(30), "ana's close has begun"
        got: dict[str, MemoryHarness] = {}
        asking = threading.Thread(target=lambda: got.setdefault("ana", pool.harness("ana")))
        asking.start()
        gate.go.set()
        asking.join(30)
        assert not asking.is_alive()
        again = got["ana"]
        assert again is not ana
        assert ana.kernel.closed
        assert log == ["open ana", "open bea", "ana's last write", "open ana"]
        assert [h.content for h in again.search("spare key")] == [fact]


def test_a_tenant_evicted_but_not_yet_closing_gets_its_harness_back(tmp_path: Path) -> None:
    """Every close thread held by a slow close, ana's close waits in the queue; asking for
    ana hands back the same, open harness (no close, no reopen), and the tenant evicted
    for it closes instead."""
    threads = CLOSE_THREADS
    with HarnessPool(str(tmp_path / "{tenant}"), max_open=threads, **OPTIONS) as pool:
        gates = []
        for n in range(threads):
            gates.append(_Gate())
            pool.harness(f"busy{n}").kernel.on_close(gates[-1])
        ana = pool.harness("ana")
        # Each evicts one busy tenant (a close thread each, held), the last evicts ana.
        others = [pool.harness(f"other{n}") for n in range(threads)]
        for gate in gates:
            assert gate.began.wait(30)
        assert "ana" not in pool
        assert not ana.kernel.closed
        assert pool.harness("ana") is ana
        assert pool.reclaimed == 1
        assert pool.opened == 2 * threads + 1
        assert "ana" in pool
        for gate in gates:
            gate.go.set()
        assert pool.wait_for_closes()
        assert not ana.kernel.closed
        assert others[0].kernel.closed, "evicted to make room for ana"
        assert ana.search("anything") == []  # usable


def test_a_full_close_backlog_makes_the_next_open_wait(tmp_path: Path) -> None:
    """At most max_open evicted harnesses wait for their close: past that, a tenant that
    is not open is opened only once a close has finished."""
    log: list[str] = []
    with _pool_recording_opens(tmp_path, log) as pool:
        gates = []
        for n in range(CLOSE_THREADS + 1):
            busy = pool.harness(f"busy{n}")
            gates.append(_Gate(lambda n=n: log.append(f"busy{n} closed")))
            busy.kernel.on_close(gates[-1])
        pool.harness("ana")  # the last busy one waits in the queue: the backlog is full
        for gate in gates[:-1]:
            assert gate.began.wait(30)
        asking = threading.Thread(target=pool.harness, args=("bea",))
        asking.start()
        gates[0].go.set()
        asking.join(30)
        assert not asking.is_alive()
        assert log.index("busy0 closed") < log.index("open bea")
        for gate in gates:
            gate.go.set()


def test_close_waits_for_the_closes_running_in_the_background(tmp_path: Path) -> None:
    pool = HarnessPool(str(tmp_path / "{tenant}"), max_open=1, **OPTIONS)
    ana = pool.harness("ana")
    gate = _Gate(lambda: ana.save("- Ana's last note"))
    ana.kernel.on_close(gate)
    bea = pool.harness("bea")
    assert gate.began.wait(30)
    bea.kernel.on_close(lambda _left: gate.go.set())  # let go only once close() runs
    pool.close()
    assert gate.done.is_set(), "close() returned before ana's close ended"
    assert ana.kernel.closed
    assert bea.kernel.closed
    assert "- Ana's last note" in ana.workspace.read_text("MEMORY.md")


def test_close_waits_for_background_closes_only_within_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """close(timeout=5): bea's queued work takes the five seconds, so ana's close, still
    running in the background, is not waited for; it is named in the log and finishes
    later."""
    now = [100.0]
    monkeypatch.setattr(lifetime, "monotonic", lambda: now[0])
    pool = HarnessPool(str(tmp_path / "{tenant}"), max_open=1, **OPTIONS)
    ana = pool.harness("ana")
    gate = _Gate()
    ana.kernel.on_close(gate)
    bea = pool.harness("bea")
    assert gate.began.wait(30)
    given: list[float] = []

    def slow_drain(left: float) -> None:
        given.append(left)
        now[0] += 5.0

    bea.kernel.on_close(slow_drain)
    with caplog.at_level("WARNING", logger="harnessmem.pool"):
        pool.close(timeout=5.0)
    assert given == [5.0]
    assert "the harnesses of ana were still closing after 5s" in caplog.text
    assert not gate.done.is_set()
    assert bea.kernel.closed
    gate.go.set()
    assert pool.wait_for_closes()
    assert ana.kernel.closed


def test_a_failing_background_close_is_logged_and_raised_by_close(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The caller that evicted ana is not the one to blame for her failing close: it gets
    its harness; the failure is logged at once and raised by the pool's close()."""
    pool = HarnessPool(str(tmp_path / "{tenant}"), max_open=1, **OPTIONS)
    ana = pool.harness("ana")

    def broken(_left: float) -> None:
        raise RuntimeError("usage ledger jammed")

    ana.kernel.on_close(broken)
    with caplog.at_level("WARNING", logger="harnessmem.pool"):
        bea = pool.harness("bea")
        assert pool.wait_for_closes()
    assert "closing the harness of tenant 'ana' failed" in caplog.text
    assert "usage ledger jammed" in caplog.text
    assert ana.kernel.closed, "the rest of her close ran"
    assert not pool.harness("ana").kernel.closed, "and she can be opened again"
    with pytest.raises(
        HarnessMemError,
        match=r"closing the harness pool failed: closing the evicted harness of tenant "
        r"'ana' failed: .*usage ledger jammed",
    ):
        pool.close()
    assert bea.kernel.closed
