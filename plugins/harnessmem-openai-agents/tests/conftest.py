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
    own folder, with the SDK's tracing (an upload to api.openai.com) off."""
    from agents import set_tracing_disabled

    refused = loopback_only(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    set_tracing_disabled(True)
    yield refused
    assert not refused, refused
