"""Where a fact came from: MEMORY.md line, daily-log entry, the session messages as said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from harnessmem import MemoryHarness
from harnessmem.cli import main
from harnessmem.memory.provenance import TraceError
from harnessmem.settings import HarnessSettings

#: The inspector on loopback answers its own names only (not Starlette's "testserver").
LOCAL = "http://127.0.0.1"


@pytest.fixture(scope="module")
def example_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("why") / "workspace"
    # The example's own dates: by default a replay shifts them by whole days to end in the
    # last 24 hours, so the days would depend on the day and hour the tests run.
    result = CliRunner().invoke(main, ["replay", "--example", "--keep-dates", "-w", str(root)])
    assert result.exit_code == 0, result.output
    return root


def _open(root: Path) -> MemoryHarness:
    settings = HarnessSettings.load(workspace={"url": str(root)}, maintenance={"enabled": False})
    return MemoryHarness(settings)


def test_the_example_s_staging_fact_leads_to_the_words_as_said(example_root: Path) -> None:
    memory = (example_root / "MEMORY.md").read_text().splitlines()
    line = next(n for n, text in enumerate(memory, 1) if "port 5433" in text)
    with _open(example_root) as harness:
        (trace,) = harness.trace(f"MEMORY.md:{line}")
    assert trace.line == line
    assert trace.date == "2026-03-09"
    entry = trace.entries[0]
    assert entry.path == "memory/2026-03-09.md"
    assert entry.session_id == "tidewater-week"
    assert entry.written is not None
    log = (example_root / entry.path).read_text().splitlines()
    assert "port 5433" in log[entry.line - 1]
    assert entry.messages, entry.note
    said = entry.messages[0]
    assert said.path == "sessions/tidewater-week.log.jsonl"
    assert said.role == "user"
    record = json.loads((example_root / said.path).read_text().splitlines()[said.line - 1])
    assert "port 5433" in record["message"]["content"]
    assert "port 5433" in said.quote
    assert all(m.said is not None and m.said <= entry.written for m in entry.messages)


def test_a_decision_under_its_day_is_traced_with_that_day(example_root: Path) -> None:
    """MEMORY.md files a day's decisions under ``### Decisions`` inside ``## <day>``."""
    memory = (example_root / "MEMORY.md").read_text().splitlines()
    line = next(n for n, text in enumerate(memory, 1) if "composite index" in text)
    assert memory[line - 2] == "### Decisions"
    with _open(example_root) as harness:
        (trace,) = harness.trace(f"MEMORY.md:{line}")
    assert trace.date == "2026-03-10"
    assert trace.entries[0].path == "memory/2026-03-10.md"


def test_the_command_prints_the_chain_and_json(example_root: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["why", "staging database port", "-w", str(example_root)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("MEMORY.md:")
    assert lines[0].endswith("· 2026-03-09")
    assert any("<- memory/2026-03-09.md:" in x and "session tidewater-week" in x for x in lines)
    assert any("<- sessions/tidewater-week.log.jsonl:" in x and "· user ·" in x for x in lines)
    assert "port 5433" in result.output.split("<- sessions/")[1]
    args = ["why", "staging database port", "-w", str(example_root), "--json"]
    as_json = runner.invoke(main, args)
    (trace,) = json.loads(as_json.output)
    assert trace["entries"][0]["messages"][0]["path"] == "sessions/tidewater-week.log.jsonl"


def test_the_command_refuses_a_line_that_is_no_fact(example_root: Path) -> None:
    result = CliRunner().invoke(main, ["why", "MEMORY.md:1", "-w", str(example_root)])
    assert result.exit_code == 4
    assert "MEMORY.md:1 is not a fact" in result.output


def test_the_inspector_shows_the_chain(example_root: Path) -> None:
    pytest.importorskip("starlette", reason="the inspector needs the 'inspect' extra")
    from starlette.testclient import TestClient

    from harnessmem.inspector import create_app

    with _open(example_root) as harness, TestClient(create_app(harness), base_url=LOCAL) as client:
        page = client.get("/why", params={"q": "staging database port"}).text
        assert "memory/2026-03-09.md:" in page
        assert "session tidewater-week" in page
        assert "sessions/tidewater-week.log.jsonl:" in page
        assert "port 5433" in page
        hits = client.get("/search", params={"q": "staging database"}).text
        assert 'href="/why?q=' in hits, "each memory hit links to where it came from"
        assert "is not a fact" in client.get("/why", params={"q": "MEMORY.md:1"}).text


# -- small workspaces ------------------------------------------------------------------

MEMORY = """## Facts

### 2026-11-02
- The user is Maya, she maintains tidewater with Jonas.
- The user prefers tea (2026-11-03)
- <script>alert(1)</script> leaked into a fact
"""
LOG_02 = """
## Memory Flush — 2026-11-02T10:00:00Z · session chat
- The user is Maya, she maintains tidewater with Jonas.
"""
LOG_03 = """
## Memory Save — 2026-11-03T08:00:00Z
- The user prefers tea
"""


def _record(line: int, role: str, content: str, said: str) -> str:
    message = {"role": role, "content": content}
    return json.dumps({"seq": line, "said": said, "message": message}) + "\n"


SESSION = (
    _record(1, "user", "Hi! I'm Maya, I maintain tidewater with Jonas.", "2026-11-02T09:00:00Z")
    + _record(2, "assistant", "Nice to meet you, Maya.", "2026-11-02T09:00:05Z")
    # Said after the flush: it cannot be where the entry came from.
    + _record(3, "user", "As I said: I'm Maya, I maintain tidewater.", "2026-11-02T11:00:00Z")
)


@pytest.fixture
def small(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "sessions").mkdir()
    (root / "MEMORY.md").write_text(MEMORY)
    (root / "memory" / "2026-11-02.md").write_text(LOG_02)
    (root / "memory" / "2026-11-03.md").write_text(LOG_03)
    (root / "sessions" / "chat.log.jsonl").write_text(SESSION)
    return root


def test_a_reworded_fact_finds_the_message_said_before_its_flush(small: Path) -> None:
    with _open(small) as harness:
        (trace,) = harness.trace("who maintains tidewater")
    assert (trace.line, trace.date) == (4, "2026-11-02")
    (entry,) = trace.entries
    assert (entry.path, entry.line, entry.session_id) == ("memory/2026-11-02.md", 3, "chat")
    assert [m.line for m in entry.messages] == [1], "the message said after the flush is not it"
    assert entry.messages[0].quote == "I'm Maya, I maintain tidewater with Jonas.", "its sentences"


def test_a_saved_fact_says_it_has_no_session(small: Path) -> None:
    with _open(small) as harness:
        (trace,) = harness.trace("tea")
    assert (trace.fact, trace.date) == ("The user prefers tea", "2026-11-03")
    (entry,) = trace.entries
    assert entry.session_id is None
    assert entry.messages == ()
    assert "saved by hand" in entry.note


def test_a_fact_only_in_a_daily_log_is_traced_from_there(small: Path) -> None:
    (small / "MEMORY.md").write_text("## Facts\n- The user likes trains\n")
    with _open(small) as harness:
        (trace,) = harness.trace("Maya maintains tidewater")
    assert trace.line is None
    assert trace.entries[0].path == "memory/2026-11-02.md"
    assert "not in MEMORY.md" in "\n".join(trace.lines())


def test_a_missing_session_log_is_said_not_guessed(small: Path) -> None:
    (small / "sessions" / "chat.log.jsonl").unlink()
    with _open(small) as harness:
        (trace,) = harness.trace("MEMORY.md:4")
    assert trace.entries[0].messages == ()
    assert "sessions/chat.log.jsonl does not exist" in trace.entries[0].note


def test_nothing_in_any_log(small: Path) -> None:
    (small / "MEMORY.md").write_text("## Facts\n- The user likes trains\n")
    with _open(small) as harness:
        (trace,) = harness.trace("MEMORY.md:2")
    assert trace.entries == ()
    assert "no daily log says it" in trace.note


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("the and of", "no content word"),
        ("MEMORY.md:1", "MEMORY.md:1 is not a fact"),
        ("MEMORY.md:99", "MEMORY.md has 6 lines"),
    ],
)
def test_bad_input_gets_one_clear_error(small: Path, text: str, message: str) -> None:
    with _open(small) as harness, pytest.raises(TraceError, match=message):
        harness.trace(text)


def test_the_inspector_escapes_what_memory_holds(small: Path) -> None:
    pytest.importorskip("starlette", reason="the inspector needs the 'inspect' extra")
    from starlette.testclient import TestClient

    from harnessmem.inspector import create_app

    with _open(small) as harness, TestClient(create_app(harness), base_url=LOCAL) as client:
        page = client.get("/why", params={"q": "script alert leaked"}).text
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;" in page
