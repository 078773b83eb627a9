"""The README does what it says: the main job and the integration example run as written, and
every relative link in README.md and docs/ points at a file that exists."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from harnessmem.backends.litellm_backend import no_stray_event_loop
from harnessmem.cli import main
from harnessmem.testing import FakeOpenAIServer

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _block(after: str, language: str) -> str:
    """The first ``language`` code block after the line ``after``."""
    rest = README[README.index(after) :]
    match = re.search(rf"```{language}\n(.*?)\n```", rest, flags=re.DOTALL)
    assert match, f"no {language} block after {after!r}"
    return match.group(1)


def test_the_main_job_runs_as_written() -> None:
    command = _block("<!-- main -->", "bash")
    outputs = []
    for part in command.split("&&"):
        argv = shlex.split(part)
        assert argv[0] == ".venv/bin/harnessmem"
        result = CliRunner().invoke(main, argv[1:])
        assert result.exit_code == 0, result.output
        outputs.append(result.stdout)
    replayed, found = outputs
    for word in ("compacted", "flushed", "evicted", "consolidated"):
        assert word in replayed
    assert "db-staging.tidewater.internal, port 5433" in found


def test_the_integration_example_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    code = _block("## Attach it to your agent loop", "python")
    assert len(code.splitlines()) <= 24, "the README promises a short example"
    # Before the import: litellm fetches its price list at import unless told not to.
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    said = iter(["Remember that staging listens on port 5433.", "Where is staging?", ""])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(said))
    search = {
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "memory_search",
                    "arguments": json.dumps({"query": "staging"}),
                },
            }
        ]
    }
    with (
        FakeOpenAIServer(["Noted.", search, "Staging is on port 5433."]) as server,
        # litellm's sync path leaves an event loop in this thread; close it afterwards, as
        # harnessmem's own litellm calls do, or it is collected with a ResourceWarning later.
        no_stray_event_loop(),
    ):
        monkeypatch.setattr(litellm, "api_base", server.base_url)
        exec(compile(code, "README.md", "exec"), {})
    assert not server.problems
    last = server.requests[-1].messages
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user", "assistant", "tool"]
    assert last[0]["content"].count("<memory_context ") == 1, "before_reasoning put MEMORY.md in"
    assert "port 5433" in last[-1]["content"], "memory_search found the flushed fact"
    (log,) = Path("workspace/memory").glob("*.md")
    assert "port 5433" in log.read_text()


def _links(text: str) -> list[str]:
    return [
        link.split("#", 1)[0]
        for link in re.findall(r"\]\(([^)\s]+)\)", text)
        if not link.startswith(("http://", "https://", "#", "mailto:"))
    ]


@pytest.mark.parametrize(
    "page", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda p: p.name
)
def test_relative_links_resolve(page: Path) -> None:
    missing = [
        link
        for link in _links(page.read_text(encoding="utf-8"))
        if not (page.parent / link).exists()
    ]
    assert not missing, f"{page.name} links to missing files: {missing}"
