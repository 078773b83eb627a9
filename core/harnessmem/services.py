"""What a component (and a plugin, through ``TurnContext.harness``) sees of the harness.

:class:`Services` is the narrow interface the components are written against: the
workspace, the settings, the hook facade, the clock, the model for a purpose, the index
(search, get, sync), maintenance requests, a seat at close time, and the harness's one
instance of a peer component. ``MemoryHarness`` is the one implementation; the components
never import it, so data flows one way (harness -> components -> workspace, index, model)
and a component can be tested against any object with these members.

A component is a class whose constructor takes the services; :meth:`Services.component`
builds it once per harness (``services.component(MemoryFlusher)``) and hands out that
instance to every caller, so peers share its state (locks, back-off, caches) without
reaching into each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from harnessmem.backends.base import SearchHit, SearchMode
    from harnessmem.index import ReindexResult
    from harnessmem.models.usage import MeteredModel
    from harnessmem.plugins import HookFacade
    from harnessmem.settings import HarnessSettings
    from harnessmem.workspace import Workspace

__all__ = ["Services"]

C = TypeVar("C")


class Services(Protocol):
    """The harness as its components see it (see the module docstring)."""

    #: The validated settings of this harness.
    settings: HarnessSettings
    #: The workspace (local folder, S3 prefix, any fsspec URL).
    workspace: Workspace
    #: The typed facade over the plugin hooks: lifecycle calls and observer events.
    hooks: HookFacade
    #: Seconds since the epoch; tests inject a fake.
    clock: Callable[[], float]

    @property
    def closed(self) -> bool:
        """Whether the harness was closed (every call but ``closed`` then raises)."""
        ...

    def check_open(self) -> None:
        """Raise ``HarnessMemError`` (with a hint) once the harness is closed."""
        ...

    def model_for(self, purpose: str) -> MeteredModel:
        """The metered model serving ``summary``, ``flush`` or ``consolidation``."""
        ...

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        mode: SearchMode = "any",
        source: str = "memory",
        session_id: str | None = None,
        since: date | str | None = None,
        until: date | str | None = None,
    ) -> list[SearchHit]:
        """Ranked full-text search of the workspace's memory (or session logs), optionally
        of the entries dated ``since`` .. ``until``."""
        ...

    def get(self, path: str, start_line: int = 1, lines: int | None = None) -> str:
        """Lines of a memory file, session log or evicted result, confined to those."""
        ...

    def reindex(self, full: bool = False, *, paths: Sequence[str] | None = None) -> ReindexResult:
        """Bring the index up to date with the workspace (all files, or just ``paths``)."""
        ...

    @property
    def refresh_interval(self) -> float:
        """Seconds between looks for files other processes changed (``index.refresh_interval``)."""
        ...

    def request_maintenance(self) -> bool:
        """Ask for an opportunistic maintenance tick soon; never blocks; False if throttled."""
        ...

    def on_close(self, drain: Callable[[float], object]) -> None:
        """Call ``drain(seconds_left)`` when the harness closes, before backends close."""
        ...

    def component(self, kind: Callable[[Services], C]) -> C:
        """This harness's one instance of the component ``kind``, built on first use."""
        ...
