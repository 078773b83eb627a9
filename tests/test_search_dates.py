"""Searches between two dates: the harness, the agent's tool, the CLI and the fallback."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from harnessmem import MemoryHarness
from harnessmem.backends.inmemory import InMemoryIndex
from harnessmem.cli import main
from harnessmem.settings import HarnessSettings


def harness_on(root: Path, **index: Any) -> MemoryHarness:
    settings = HarnessSettings.load(
        workspace={"url": str(root)}, maintenance={"enabled": False}, index=index or {}
    )
    return MemoryHarness(settings)


def write_logs(harness: MemoryHarness, days: dict[str, str]) -> None:
    for day, text in days.items():
        harness.workspace.write_text(f"memory/{day}.md", text)


LOGS = {
    "2026-10-02": "- The ferry to Brest leaves at 07:10 on weekdays.\n",
    "2026-11-20": "- The ferry timetable changed: 07:40 from December.\n",
    "2026-11-29": "- Jonas took the ferry to the Brest office.\n",
}


def test_harness_search_between_dates(tmp_path: Path) -> None:
    with harness_on(tmp_path / "ws") as harness:
        write_logs(harness, LOGS)
        assert len(harness.search("ferry")) == 3
        hits = harness.search("ferry", since=date(2026, 11, 1), until="2026-11-25")
        assert [h.path for h in hits] == ["memory/2026-11-20.md"]
        assert [h.path for h in harness.search("ferry", since="2026-11-25")] == [
            "memory/2026-11-29.md"
        ]


class _Undated(InMemoryIndex):
    """A third-party-like backend without the ``dates`` capability."""

    name: ClassVar[str] = "undated"
    capabilities: ClassVar[frozenset[str]] = InMemoryIndex.capabilities - {"dates"}

    def search(self, query: str, limit: int = 10, **kwargs: Any) -> list[Any]:
        assert not {"since", "until"} & set(kwargs), "never passed to this backend"
        return super().search(query, limit, **kwargs)


def test_a_backend_without_dates_gets_the_harness_s_filter(tmp_path: Path) -> None:
    settings = HarnessSettings.load(
        workspace={"url": str(tmp_path / "ws")}, maintenance={"enabled": False}
    )
    backend = _Undated(InMemoryIndex.Options())
    with MemoryHarness(settings, index=backend) as harness:
        write_logs(harness, LOGS)
        hits = harness.search("ferry Brest", since="2026-11-01")
        assert sorted(h.path for h in hits) == ["memory/2026-11-20.md", "memory/2026-11-29.md"]


def test_the_memory_search_tool_takes_since_and_until(tmp_path: Path) -> None:
    with harness_on(tmp_path / "ws") as harness:
        write_logs(harness, LOGS)
        session = harness.session("s")
        schema = next(t for t in session.tools if t["function"]["name"] == "memory_search")
        assert {"since", "until"} <= set(schema["function"]["parameters"]["properties"])
        text = session.call_tool("memory_search", {"query": "ferry", "until": "2026-10-31"})
        assert "memory/2026-10-02.md" in text
        assert "2026-11-" not in text
        empty = session.call_tool("memory_search", {"query": "ferry", "since": "2027-01-01"})
        assert empty.startswith("No memories match 'ferry' dated 2027-01-01 to ...")
        bad = session.call_tool("memory_search", {"query": "ferry", "since": "last week"})
        assert bad.startswith("Error:")
        assert "since must be a date" in bad
        wrong = session.call_tool(
            "memory_search", {"query": "ferry", "since": "2026-12-01", "until": "2026-11-01"}
        )
        assert "after until" in wrong


def _today() -> date:
    """Today where the CLI counts days from: the default workspace time zone."""
    return datetime.now(ZoneInfo(HarnessSettings().workspace.timezone)).date()


@pytest.mark.parametrize(
    ("text", "days_back"),
    [
        ("today", 0),
        ("Yesterday", 1),
        ("last week", 7),
        ("3 days ago", 3),
        ("2 weeks ago", 14),
        ("last month", 30),
    ],
)
def test_the_cli_reads_days_as_people_write_them(tmp_path: Path, text: str, days_back: int) -> None:
    root = tmp_path / "ws"
    with harness_on(root) as harness:
        write_logs(harness, {"2026-11-02": "- a note about the lighthouse\n"})
    result = CliRunner().invoke(main, ["search", "x", "-w", str(root), "--since", text])
    assert result.exit_code == 0, result.output
    assert f"dated {_today() - timedelta(days=days_back)} to ..." in result.output
    dated = CliRunner().invoke(main, ["search", "x", "-w", str(root), "--until", "2026-11-02"])
    assert "dated ... to 2026-11-02" in dated.output
    bad = ["search", "x", "-w", str(root), "--since", "the day before the storm"]
    assert "not a day I can read" in CliRunner().invoke(main, bad).output


def test_cli_search_since_a_relative_day(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    today = _today()
    with harness_on(root) as harness:
        write_logs(
            harness,
            {
                (today - timedelta(days=20)).isoformat(): "- an old note about the lighthouse\n",
                today.isoformat(): "- a new note about the lighthouse\n",
            },
        )
    result = CliRunner().invoke(
        main, ["search", "lighthouse", "-w", str(root), "--since", "last week"]
    )
    assert result.exit_code == 0, result.output
    assert "a new note" in result.output
    assert "an old note" not in result.output
    assert f"dated {today - timedelta(days=7)} to ..." in result.output
    bad = CliRunner().invoke(main, ["search", "x", "-w", str(root), "--since", "soonish"])
    assert bad.exit_code == 2
    assert "not a day I can read" in bad.output


def test_memory_md_facts_are_found_by_the_date_of_their_stamp(tmp_path: Path) -> None:
    with harness_on(tmp_path / "ws") as harness:
        harness.workspace.write_text(
            "MEMORY.md",
            "## Facts\n- The ferry leaves at 07:40 (2026-11-20)\n- The ferry is blue\n",
        )
        hits = harness.search("ferry", since="2026-11-15", until="2026-11-25")
        assert [(h.path, h.date) for h in hits] == [("MEMORY.md", "2026-11-20")]


def test_a_file_of_several_dates_is_found_between_any_two_of_them(tmp_path: Path) -> None:
    """A file's entries span days (MEMORY.md's stamps, timed headings, before and after
    an undated entry): a search between dates inside that span finds the entry of each."""
    text = (
        "- The ferry pass expires in March (2026-03-01)\n"
        "- The ferry runs hourly\n"
        "- Ferry tickets went up (2026-01-10)\n"
        "- The ferry crew changed (2026-02-14)\n"
    )
    with harness_on(tmp_path / "ws") as harness:
        harness.workspace.write_text("MEMORY.md", text)
        for since, until, day in (
            ("2026-01-01", "2026-01-31", "2026-01-10"),
            ("2026-02-01", "2026-02-20", "2026-02-14"),
            ("2026-02-20", "2026-03-10", "2026-03-01"),
        ):
            hits = harness.search("ferry", since=since, until=until)
            assert [h.date for h in hits] == [day], (since, until)
