"""Recorders for tests of harnessmem and of plugins and adapters built on it.

- :class:`EventLog`: a plugin that keeps every observer event a harness emits;
- :func:`loopback_only`: refuses, and records, every connection a test opens to anything
  but this machine, so a test that would reach the network fails instead of passing on a
  machine that happens to be online.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

from harnessmem.plugins import hookimpl
from harnessmem.settings.exposure import is_loopback

if TYPE_CHECKING:
    import pytest

    from harnessmem.events import (
        CompactionResult,
        MaintenanceEvent,
        MemoryConsolidatedEvent,
        MemoryFlushedEvent,
        ToolResultEvictedEvent,
    )

__all__ = ["EventLog", "loopback_only"]


class EventLog:
    """A plugin that keeps the observer events a harness emits, one list per hook.

    Pass it in ``plugins=[log]`` when opening the harness.
    """

    def __init__(self) -> None:
        self.compactions: list[CompactionResult] = []
        self.flushed: list[MemoryFlushedEvent] = []
        self.consolidated: list[MemoryConsolidatedEvent] = []
        self.evicted: list[ToolResultEvictedEvent] = []
        self.maintenance: list[MaintenanceEvent] = []

    @hookimpl
    def on_compaction(self, event: CompactionResult) -> None:
        self.compactions.append(event)

    @hookimpl
    def on_memory_flushed(self, event: MemoryFlushedEvent) -> None:
        self.flushed.append(event)

    @hookimpl
    def on_memory_consolidated(self, event: MemoryConsolidatedEvent) -> None:
        self.consolidated.append(event)

    @hookimpl
    def on_tool_result_evicted(self, event: ToolResultEvictedEvent) -> None:
        self.evicted.append(event)

    @hookimpl
    def on_maintenance(self, event: MaintenanceEvent) -> None:
        self.maintenance.append(event)


def loopback_only(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """From now until the test ends, an IP connection to anything but a loopback address
    raises ``OSError`` and its address is added to the returned list (assert it is empty
    at the end: a library may swallow the error). Local sockets are left alone."""
    refused: list[object] = []
    connect = socket.socket.connect

    def guarded(sock: socket.socket, address: Any) -> Any:
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0] if isinstance(address, tuple) else address
            if not is_loopback(str(host)):
                refused.append(address)
                raise OSError(f"no network in tests ({address!r})")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    return refused
