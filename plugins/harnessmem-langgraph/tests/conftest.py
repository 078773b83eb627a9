"""Fixtures: no network but loopback, the fake OpenAI server, and the harness's events."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from harnessmem import hookimpl


class Events:
    """The compaction and eviction events a harness emits."""

    def __init__(self) -> None:
        self.compactions: list[Any] = []
        self.evicted: list[Any] = []

    @hookimpl
    def on_compaction(self, event: Any) -> None:
        self.compactions.append(event)

    @hookimpl
    def on_tool_result_evicted(self, event: Any) -> None:
        self.evicted.append(event)


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[list[object]]:
    """Connections to anything but loopback are refused and recorded; the test runs in its
    own folder, with LangSmith tracing off."""
    refused: list[object] = []
    connect = socket.socket.connect

    def loopback_only(sock: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if sock.family in (socket.AF_INET, socket.AF_INET6) and host not in (
            "127.0.0.1",
            "::1",
            "localhost",
        ):
            refused.append(address)
            raise OSError(f"no network in tests ({address!r})")
        return connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    yield refused
    assert not refused, refused
