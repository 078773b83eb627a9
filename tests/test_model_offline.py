"""Acceptance: with no configuration at all, a harness compacts, flushes and consolidates
offline with the extractive backend (no key, no network)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.backends.extractive import ExtractiveBackend
from harnessmem.testing.recorders import loopback_only


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse every connection that is not to this machine."""
    refused = loopback_only(monkeypatch)
    yield
    assert not refused, refused


def test_a_default_harness_does_all_three_jobs_offline(
    tmp_path: Path, no_network: None, agent_run: list[dict[str, Any]]
) -> None:
    opening = {
        "role": "user",
        "content": "Please remember that my seat preference is aisle. I prefer vegetarian meals.",
    }
    conversation = [opening, *agent_run]
    workspace = tmp_path / "ws"
    with MemoryHarness.open(
        workspace,
        compaction={"trigger_messages": 20, "keep_messages": 6},
        maintenance={"enabled": False},
    ) as harness:
        assert all(
            isinstance(harness.kernel.model_for(p).backend, ExtractiveBackend)
            for p in ("summary", "flush", "consolidation")
        )
        session = harness.session("offline")
        sent = session.before_reasoning(conversation)
        session.after_call(sent)
        harness.consolidate()
        usage = harness.usage()

    # compaction: the prefix became one four-section summary
    assert len(sent) < len(conversation)
    summaries = [m for m in sent if "## SESSION INTENT" in str(m.get("content"))]
    assert len(summaries) == 1
    headings = re.findall(r"(?m)^## (.+)$", str(summaries[0]["content"]))
    assert headings[:4] == ["SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS"]
    assert "reservation_id=" in str(summaries[0]["content"])
    # flush: facts in today's daily log
    (daily,) = (workspace / "memory").glob("????-??-??.md")
    log = daily.read_text()
    assert "- The user's seat preference is aisle." in log
    assert "- The user prefers vegetarian meals." in log
    # consolidation: MEMORY.md holds them
    memory = (workspace / "MEMORY.md").read_text()
    assert "The user's seat preference is aisle." in memory
    assert "## Preferences" in memory
    # every call was served, and recorded, by the extractive backend
    assert set(usage.purposes) == {"summary", "flush", "consolidation"}
    assert set(usage.by_model()) == {"extractive"}
    assert usage.total.cost == 0.0
