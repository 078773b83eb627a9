"""Fixtures: no network but loopback, the fake OpenAI server, and the harness's events."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harnessmem.testing.recorders import EventLog, loopback_only


@pytest.fixture
def events() -> EventLog:
    return EventLog()


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[list[object]]:
    """Connections to anything but loopback are refused and recorded; the test runs in its
    own folder, with LangSmith tracing off."""
    refused = loopback_only(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    yield refused
    assert not refused, refused
