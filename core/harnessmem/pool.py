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

Thread-safe: several threads may ask for harnesses at once; a tenant is opened once and a
tenant being closed is reopened only after its close has finished. :meth:`HarnessPool.harness`
never hands out a closed harness: when every other open harness is pinned, it opens one
past ``max_open`` for the while (counted in ``over_max``). A harness it handed out
may be closed by a later eviction once ``max_open`` other
tenants have been used; :meth:`HarnessPool.use` keeps it open while the block runs.
See ``docs/deployment.md``.
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

__all__ = ["HarnessPool", "check_tenant_id"]

logger = logging.getLogger("harnessmem.pool")

_TENANT = re.compile(r"[A-Za-z0-9_@+=][A-Za-z0-9._@+=-]{0,127}")
_FIELD = "tenant"


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
    :meth:`close` (the pool closes only what it built, and the model it was given).
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
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._open: OrderedDict[str, MemoryHarness] = OrderedDict()
        self._opening: set[str] = set()
        self._closing: set[str] = set()
        self._pins: dict[str, int] = {}
        self._closed = False
        self._runner: MaintenanceRunner | None = None
        #: Harnesses opened and closed so far (evictions included).
        self.opened = 0
        self.evicted = 0
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
                if tenant not in self._opening and tenant not in self._closing:
                    break
                self._changed.wait()
            self._opening.add(tenant)
        try:
            opened = self._open_harness(url)
        except BaseException:
            with self._lock:
                self._opening.discard(tenant)
                self._changed.notify_all()
            raise
        with self._lock:
            self._opening.discard(tenant)
            self._open[tenant] = opened
            self.opened += 1
            # The harness just opened is handed out: never its own opening's victim.
            victims = self._victims(keep=tenant)
            if len(self._open) > self.max_open:
                self.over_max += 1
            self._changed.notify_all()
        self._close_all(victims)
        return opened

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
                victims = self._victims()
            self._close_all(victims)

    @property
    def open_tenants(self) -> list[str]:
        """Tenants with an open harness, least recently used first."""
        with self._lock:
            return list(self._open)

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
        )

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

    def _victims(self, keep: str | None = None) -> list[tuple[str, MemoryHarness]]:
        """Take the least recently used unpinned harnesses past ``max_open`` (lock held),
        never ``keep``'s."""
        victims = []
        for tenant in list(self._open):
            if len(self._open) <= self.max_open:
                break
            if self._pins.get(tenant) or tenant == keep:
                continue
            victims.append((tenant, self._open.pop(tenant)))
            self._closing.add(tenant)
        return victims

    def _close_all(self, victims: list[tuple[str, MemoryHarness]]) -> None:
        errors: list[Exception] = []
        for tenant, harness in victims:
            try:
                harness.close()
            except Exception as exc:  # close the others; report the first
                logger.warning("closing the harness of tenant %r failed: %s", tenant, exc)
                errors.append(exc)
            finally:
                with self._lock:
                    self._closing.discard(tenant)
                    self.evicted += 1
                    self._changed.notify_all()
        if errors:
            raise errors[0]

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
            victims = list(self._open.items())
            self._open.clear()
            self._closing.update(tenant for tenant, _ in victims)
        # One budget for the whole pool: each harness gets what is left of it.
        budget = victims[0][1].settings.maintenance.close_timeout if victims else 0.0
        deadline = Deadline(budget if timeout is None else timeout)
        closer = Closer("the harness pool")
        for tenant, harness in victims:
            closer.run(partial(_close_within, harness, deadline))
            with self._lock:
                self._closing.discard(tenant)
        runner = self._runner
        if runner is not None:
            closer.run(lambda: runner.stop(deadline.left()))
        for backend in (self._index if self._owns_index else None, self._given_model):
            if backend is not None:
                closer.run(backend.close)
        closer.finish()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._open)}/{self.max_open} open"
        return f"<HarnessPool {self.url_template} ({state})>"


def _close_within(harness: MemoryHarness, deadline: Deadline) -> None:
    harness.close(deadline.left())
