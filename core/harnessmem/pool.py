"""``HarnessPool``: many tenants' memory in one process, one index, one maintenance thread.

A server that gives each user or agent a workspace of its own opens them through a pool::

    pool = HarnessPool("s3://bucket/agents/{tenant}", max_open=200)
    harness = pool.harness("alice")      # opened on first use, kept while recently used

The pool opens a tenant's :class:`~harnessmem.harness.MemoryHarness` on first use
(``url_template`` with ``{tenant}`` filled in; every other argument as
``MemoryHarness.open`` takes it) and keeps at most ``max_open`` open: the one used least
recently is closed, cleanly (queued flushes drained, its maintenance tick finished), when
another is needed. Every tenant's harness searches one shared index backend instance,
each through ``index.scoped(workspace URL)``, so one SQLite file (or one PostgreSQL
database) holds every tenant, each seeing only its own entries; and one
:class:`~harnessmem.maintenance.MaintenanceRunner` thread runs every open tenant's
maintenance ticks, one at a time. Tenant ids name folders, so they are checked: letters,
digits and ``. _ - @ + =``, not starting with a dot or a dash, at most 128 characters.

Evicted harnesses close in the background, on at most :data:`CLOSE_THREADS` threads of the
pool's, so the call that asked for a tenant does not wait for another tenant's queued
flushes, maintenance tick or usage ledger. A tenant whose harness waits for its close is
handed that harness back (no close, no reopen); one whose close has begun is reopened only
after the close has finished, so two harnesses of one tenant never write at once in one
process. At most ``max_open`` evicted harnesses wait for their close: past that, asking for
a tenant that is not open waits for the backlog to shrink. A failed close is logged at
once and raised by :meth:`HarnessPool.close`, which waits for the background closes within
its one deadline (:meth:`HarnessPool.wait_for_closes` waits for them without closing).

Thread-safe: several threads may ask for harnesses at once; a tenant is opened once.
:meth:`HarnessPool.harness` never hands out a closed harness: when every other open
harness is pinned, it opens one past ``max_open`` for the while (counted in
``over_max``). A harness it handed out may be closed by a later eviction once
``max_open`` other tenants have been used; :meth:`HarnessPool.use` keeps it open while
the block runs. See ``docs/deployment.md``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import string
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessmem.errors import ConfigError, HarnessMemError
from harnessmem.harness import MemoryHarness
from harnessmem.lifetime import Closer, ClosesOnExit, Deadline

if TYPE_CHECKING:
    from harnessmem.backends.base import Completion, IndexBackend, ModelBackend
    from harnessmem.maintenance import MaintenanceRunner
    from harnessmem.settings import HarnessSettings
    from harnessmem.telemetry import Telemetry

__all__ = ["CLOSE_THREADS", "HarnessPool", "check_tenant_id"]

logger = logging.getLogger("harnessmem.pool")

_TENANT = re.compile(r"[A-Za-z0-9_@+=][A-Za-z0-9._@+=-]{0,127}")
_FIELD = "tenant"

#: Threads a pool closes evicted harnesses on (started when there is a close to run, ended
#: when there is none left). A close mostly waits (for the store, for a running maintenance
#: tick), so two keep up with a pool that evicts on nearly every turn.
CLOSE_THREADS = 2


#: The shared index's file name: it and the files SQLite keeps beside it (``-wal``,
#: ``-shm``, ``-journal``) live in the folder above the tenants', so no tenant may be named
#: after them (a folder by that name would break the index for every tenant).
RESERVED_PREFIX = "memory_index.db"


def check_tenant_id(tenant: object) -> str:
    """``tenant`` if it is a valid tenant id, else ``ValueError`` saying what is wrong."""
    if not isinstance(tenant, str):
        raise ValueError(f"a tenant id must be a string, got {type(tenant).__name__}")
    if _TENANT.fullmatch(tenant) is None:
        if not tenant:
            why = "it is empty"
        elif any(ord(ch) < 32 or ord(ch) == 127 for ch in tenant):
            why = "it holds control characters"
        elif "/" in tenant or "\\" in tenant or ".." in tenant:
            why = "it holds a path separator or '..'"
        elif len(tenant) > 128:
            why = "it is longer than 128 characters"
        elif tenant[0] in ".-":
            why = "it starts with a dot or a dash"
        else:
            why = "it holds characters other than letters, digits and . _ - @ + ="
        raise ValueError(
            f"invalid tenant id {tenant!r}: {why}; tenant ids name workspace folders "
            "(letters, digits and . _ - @ + =, at most 128 characters)"
        )
    if tenant.casefold().startswith(RESERVED_PREFIX):
        raise ValueError(
            f"invalid tenant id {tenant!r}: names starting with {RESERVED_PREFIX!r} are the "
            "pool's own (its shared index and the SQLite files beside it: -wal, -shm, "
            "-journal), kept in the folder above the tenants'"
        )
    return tenant


def _check_template(template: str) -> None:
    fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    if fields != [_FIELD]:
        raise ConfigError(
            f"the pool's URL template {template!r} must hold {{tenant}} exactly once "
            f"and no other field (found {fields})",
            hint='e.g. HarnessPool("./agents/{tenant}") or "s3://bucket/agents/{tenant}"',
        )


def shared_index_path(template: str) -> Path:
    """Where the pool's SQLite index lives when ``workspace.index_path`` is unset.

    Local: ``memory_index.db`` in the folder above the tenants' (``./agents/{tenant}`` gives
    ``./agents/memory_index.db``, the file a harness opened on ``./agents/alice`` alone uses
    too). Remote: a file in the user cache dir named after the template.
    """
    head = template.split("{" + _FIELD + "}", 1)[0]
    if "://" not in head or head.startswith("file://"):
        local = head.removeprefix("file://")
        parent = local.rsplit("/", 1)[0] if "/" in local else "."
        return Path(os.path.abspath(os.path.expanduser(parent or "/"))) / RESERVED_PREFIX
    digest = hashlib.sha256(template.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "harnessmem" / f"pool-{digest}" / RESERVED_PREFIX


def _shared_model(inner: ModelBackend) -> ModelBackend:
    """``inner`` for every tenant: calls pass through, ``close`` waits for the pool's."""
    from harnessmem.backends.base import ModelBackend

    class SharedModel(ModelBackend):
        name = inner.name
        capabilities = inner.capabilities
        metered = inner.metered

        def complete(
            self, messages: Any, *, purpose: str, max_tokens: int | None = None
        ) -> Completion:
            return inner.complete(messages, purpose=purpose, max_tokens=max_tokens)

        async def acomplete(
            self, messages: Any, *, purpose: str, max_tokens: int | None = None
        ) -> Completion:
            return await inner.acomplete(messages, purpose=purpose, max_tokens=max_tokens)

        def close(self) -> None:
            """The pool closes ``inner`` itself, once, in ``HarnessPool.close``."""

    return SharedModel(inner.options, **inner.context)


class HarnessPool(ClosesOnExit):
    """Many tenants' harnesses in one process; see the module docstring.

    ``url_template`` holds ``{tenant}``. ``max_open`` bounds the harnesses open at once.
    ``model=``, ``index=``, ``plugins=``, ``clock=``, ``config=`` and settings sections
    (``compaction={...}``) are as ``MemoryHarness.open`` takes them and apply to every
    tenant; an ``index=`` or ``model=`` instance is shared by all and stays open until
    :meth:`close` (the pool closes only what it built, and the model it was given). So is
    the telemetry (``telemetry=`` a ``Telemetry``, else one made from the ``telemetry``
    settings): one set of providers for every tenant, each tenant's spans naming it as
    ``gen_ai.memory.store.id``.
    """

    def __init__(
        self,
        url_template: str | os.PathLike[str],
        *,
        max_open: int = 64,
        model: ModelBackend | Mapping[str, Any] | None = None,
        index: IndexBackend | Mapping[str, Any] | None = None,
        plugins: Sequence[object] | Mapping[str, Any] = (),
        clock: Callable[[], float] | None = None,
        config: str | os.PathLike[str] | None = None,
        telemetry: Telemetry | None = None,
        **sections: Any,
    ) -> None:
        template = os.fspath(url_template)
        _check_template(template)
        if isinstance(max_open, bool) or not isinstance(max_open, int) or max_open < 1:
            raise ConfigError(f"HarnessPool max_open must be a positive integer, got {max_open!r}")
        self.url_template = template
        self.max_open = max_open
        self._config = config
        self._plugins = plugins
        self._clock = clock
        self._sections = sections
        self._given_model = None if model is None or isinstance(model, Mapping) else model
        self._model: Any = model if self._given_model is None else _shared_model(self._given_model)
        self._index_section = index if isinstance(index, Mapping) else None
        self._index: IndexBackend | None = None if isinstance(index, Mapping) else index
        self._owns_index = self._index is None
        self._telemetry = telemetry
        self._owns_telemetry = telemetry is None
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._open: OrderedDict[str, MemoryHarness] = OrderedDict()
        self._opening: set[str] = set()
        #: Evicted harnesses whose close has not begun, oldest first (a tenant asked for
        #: again is handed its harness back from here).
        self._queued: OrderedDict[str, MemoryHarness] = OrderedDict()
        #: Tenants whose close has begun (reopened only once it is done).
        self._closing: set[str] = set()
        self._close_threads = 0
        #: The first close that failed in the background (tenant, error) and how many did,
        #: for close() to raise.
        self._close_error: tuple[str, Exception] | None = None
        self._close_failures = 0
        #: The tenants' ``maintenance.close_timeout`` (the budget of close() by default).
        self._close_timeout = 0.0
        self._pins: dict[str, int] = {}
        self._closed = False
        self._runner: MaintenanceRunner | None = None
        #: Harnesses opened so far, and closed by eviction so far (a close that failed
        #: included; one still waiting for its close not yet).
        self.opened = 0
        self.evicted = 0
        #: Times a tenant asked for was handed back its evicted harness, whose close had
        #: not begun.
        self.reclaimed = 0
        #: Times a harness was opened past ``max_open`` because every other open one was
        #: pinned by :meth:`use` (the pool shrinks back as the pins go).
        self.over_max = 0

    # tenants -------------------------------------------------------------------------------

    def url_for(self, tenant: str) -> str:
        """The workspace URL of ``tenant`` (checked: see :func:`check_tenant_id`)."""
        return self.url_template.format(tenant=check_tenant_id(tenant))

    def harness(self, tenant: str) -> MemoryHarness:
        """``tenant``'s harness, opened on first use; the least recently used may close."""
        url = self.url_for(tenant)
        with self._lock:
            while True:
                self._check_open()
                found = self._open.get(tenant)
                if found is not None:
                    self._open.move_to_end(tenant)
                    return found
                found = self._queued.pop(tenant, None)
                if found is not None:  # evicted, its close not begun: still whole
                    self.reclaimed += 1
                    return self._admit(tenant, found)
                if (
                    tenant not in self._opening
                    and tenant not in self._closing
                    and len(self._queued) < self.max_open  # room in the close backlog
                ):
                    break
                self._changed.wait()
            self._opening.add(tenant)
        try:
            opened = self._open_harness(url)
            opened.kernel.tenant = tenant
        except BaseException:
            with self._lock:
                self._opening.discard(tenant)
                self._changed.notify_all()
            raise
        with self._lock:
            self._opening.discard(tenant)
            self.opened += 1
            self._close_timeout = opened.settings.maintenance.close_timeout
            return self._admit(tenant, opened)

    @contextmanager
    def use(self, tenant: str) -> Iterator[MemoryHarness]:
        """``tenant``'s harness, kept open (never evicted) while the block runs."""
        with self._lock:
            self._pins[tenant] = self._pins.get(tenant, 0) + 1
        try:
            yield self.harness(tenant)
        finally:
            with self._lock:
                left = self._pins[tenant] - 1
                if left:
                    self._pins[tenant] = left
                else:
                    del self._pins[tenant]
                self._evict()

    @property
    def open_tenants(self) -> list[str]:
        """Tenants with an open harness, least recently used first."""
        with self._lock:
            return list(self._open)

    def wait_for_closes(self, timeout: float | None = None) -> bool:
        """Wait until every evicted harness is closed; False if some were still waiting for
        their close, or closing, after ``timeout`` seconds (None: no limit)."""
        with self._lock:
            return self._changed.wait_for(self._closes_done, timeout)

    def __len__(self) -> int:
        with self._lock:
            return len(self._open)

    def __contains__(self, tenant: object) -> bool:
        with self._lock:
            return tenant in self._open

    @property
    def index(self) -> IndexBackend | None:
        """The index backend every tenant shares (None until the first harness opened)."""
        return self._index

    @property
    def maintenance_runner(self) -> MaintenanceRunner | None:
        """The thread running every tenant's maintenance (None until first needed)."""
        return self._runner

    # internals -----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise HarnessMemError(
                f"the harness pool for {self.url_template} is closed",
                hint="make a new HarnessPool",
            )

    def _open_harness(self, url: str) -> MemoryHarness:
        from harnessmem.settings import HarnessSettings

        sections = dict(self._sections)
        for name, value in (
            ("model", self._model),
            ("index", self._index_section),
            ("plugins", self._plugins),
        ):
            if isinstance(value, Mapping):
                sections[name] = value
        sections["workspace"] = {**dict(sections.get("workspace") or {}), "url": url}
        settings = HarnessSettings.load(self._config, **sections)
        return MemoryHarness(
            settings,
            model=None if isinstance(self._model, Mapping) else self._model,
            index=self._shared_index(settings),
            plugins=() if isinstance(self._plugins, Mapping) else self._plugins,
            clock=self._clock,
            maintenance_runner=self._maintenance_runner(),
            telemetry=self._shared_telemetry(settings),
        )

    def _shared_telemetry(self, settings: HarnessSettings) -> Telemetry:
        with self._lock:
            if self._telemetry is None:
                from harnessmem.telemetry import telemetry_from_settings

                self._telemetry = telemetry_from_settings(settings.telemetry)
            return self._telemetry

    def _shared_index(self, settings: HarnessSettings) -> IndexBackend:
        with self._lock:
            if self._index is None:
                from harnessmem.plugins import index_registry

                configured = settings.workspace.index_path
                path = Path(configured).expanduser() if configured else self.shared_index_path
                cls = index_registry().load(settings.index.backend)
                self._index = cls.create(settings.index.options, index_path=path, settings=settings)
            return self._index

    @property
    def shared_index_path(self) -> Path:
        """The default file of a shared SQLite index (see :func:`shared_index_path`)."""
        return shared_index_path(self.url_template)

    def _maintenance_runner(self) -> MaintenanceRunner:
        with self._lock:
            if self._runner is None:
                from harnessmem.maintenance import MaintenanceRunner

                self._runner = MaintenanceRunner("harnessmem-pool-maintenance")
            return self._runner

    def _admit(self, tenant: str, harness: MemoryHarness) -> MemoryHarness:
        """Put ``harness`` in the open ones, making room for it (lock held)."""
        self._open[tenant] = harness
        # The harness handed out is never its own admission's victim.
        self._evict(keep=tenant)
        if len(self._open) > self.max_open:
            self.over_max += 1
        self._changed.notify_all()
        return harness

    def _evict(self, keep: str | None = None) -> None:
        """Queue the least recently used unpinned harnesses past ``max_open`` for their
        close, never ``keep``'s (lock held)."""
        for tenant in list(self._open):
            if len(self._open) <= self.max_open:
                break
            if self._pins.get(tenant) or tenant == keep:
                continue
            self._queued[tenant] = self._open.pop(tenant)
        if self._queued and self._close_threads < CLOSE_THREADS:
            self._close_threads += 1
            # Not a daemon: the interpreter waits for it before it exits, so a close
            # begun is finished (its flushes written) rather than cut off.
            threading.Thread(target=self._close_queued, name="harnessmem-pool-close").start()

    def _close_queued(self) -> None:
        """Close the queued harnesses, oldest first, until none is left (a close thread)."""
        while True:
            with self._lock:
                if not self._queued:
                    self._close_threads -= 1
                    self._changed.notify_all()
                    return
                tenant, harness = self._queued.popitem(last=False)
                self._closing.add(tenant)
                self._changed.notify_all()  # room in the backlog
            try:
                harness.close()
            except Exception as exc:  # reported now, and raised by close()
                logger.warning("closing the harness of tenant %r failed: %s", tenant, exc)
                with self._lock:
                    self._close_error = self._close_error or (tenant, exc)
                    self._close_failures += 1
            finally:
                with self._lock:
                    self._closing.discard(tenant)
                    self.evicted += 1
                    self._changed.notify_all()

    def _closes_done(self) -> bool:
        return not self._queued and not self._closing

    def _finish_closes(self, deadline: Deadline) -> None:
        """Wait for the closes running in the background, within ``deadline``; raise the
        first that failed since the pool opened (each was logged when it failed)."""
        with self._lock:
            if not self._changed.wait_for(self._closes_done, deadline.left()):
                logger.warning(
                    "closing the harness pool for %s: the harnesses of %s were still closing "
                    "after %gs; abandoning them",
                    self.url_template,
                    ", ".join(sorted(self._closing)),
                    deadline.seconds,
                )
            failed, failures = self._close_error, self._close_failures
            self._close_error, self._close_failures = None, 0
        if failed is not None:
            tenant, first = failed
            more = f" (and {failures - 1} more)" if failures > 1 else ""
            raise HarnessMemError(
                f"closing the evicted harness of tenant {tenant!r} failed{more}: {first}"
            ) from first

    # lifetime ------------------------------------------------------------------------------

    def close(self, timeout: float | None = None) -> None:
        """Close every open harness (queued work drained), the shared index and the runner.

        ``timeout`` (default: the tenants' ``maintenance.close_timeout``) bounds the whole
        close: each harness gets what is left of it. Later calls are no-ops.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            while self._opening:
                self._changed.wait()
            # Evicted ones whose close has not begun are closed here, with the open ones.
            victims = [*self._queued.items(), *self._open.items()]
            self._queued.clear()
            self._open.clear()
            running = bool(self._closing)
        # One budget for the whole pool: each harness gets what is left of it.
        budget = self._close_timeout if victims or running else 0.0
        deadline = Deadline(budget if timeout is None else timeout)
        closer = Closer("the harness pool")
        for _tenant, harness in victims:
            closer.run(partial(_close_within, harness, deadline))
        closer.run(partial(self._finish_closes, deadline))
        runner = self._runner
        if runner is not None:
            closer.run(lambda: runner.stop(deadline.left()))
        for backend in (self._index if self._owns_index else None, self._given_model):
            if backend is not None:
                closer.run(backend.close)
        if self._owns_telemetry and self._telemetry is not None:
            closer.run(self._telemetry.shutdown)
        closer.finish()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._open)}/{self.max_open} open"
        return f"<HarnessPool {self.url_template} ({state})>"


def _close_within(harness: MemoryHarness, deadline: Deadline) -> None:
    harness.close(deadline.left())
