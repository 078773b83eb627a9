"""Crash safety: SIGKILL a process at several points inside a flush and a consolidation.

Afterwards MEMORY.md is the old or the new version, the daily log holds no torn entry, and
the flush's high-water mark and the consolidation watermark agree with what is on file:
the next run redoes exactly the work that did not land, and nothing twice.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.layout import CONSOLIDATION_STATE as STATE_PATH
from harnessmem.testing import FakeClock, ScriptedModel

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL")

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
LOG = "memory/2027-01-15.md"
SESSION = "chat-7"
MESSAGES = [
    {"role": "user", "content": "I moved to Porto and my sister Rita visits in March."},
    {"role": "assistant", "content": "Noted!"},
]
FACTS = "- The user moved to Porto\n- Rita, the user's sister, visits in March"
OLD_MEMORY = "## People\n- The user has a sister, Rita\n"
# The model answers with the day the fact was learned, as the prompt asks (a bullet without it
# would be stamped from its daily log: the answer written is then not the scripted text).
NEW_MEMORY = "## People\n- The user has a sister, Rita\n- The user lives in Porto (2027-01-15)\n"
LOGGED = "\n## Memory Flush — 2027-01-15T07:00:00Z · session old\n- The user lives in Porto\n"

CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from harnessmem import MemoryHarness
    from harnessmem.memory import files as _memory_files
    from harnessmem.backends.base import Completion, ModelBackend
    from harnessmem.workspace import Workspace

    root, operation, point = sys.argv[1:4]
    FACTS, NEW_MEMORY, MESSAGES = {facts!r}, {new_memory!r}, {messages!r}

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    class Model(ModelBackend):  # ScriptedModel's token counting would load tiktoken
        def complete(self, messages, *, purpose, max_tokens=None):
            if point == "model":
                die()
            text = FACTS if purpose == "flush" else NEW_MEMORY
            return Completion(text, 0, 0, "crash-test")

    def patch(name, when, before=True):
        real = getattr(Workspace, name)
        def patched(self, path, *args, **kwargs):
            hit = when(str(path))
            if hit and before:
                die()
            result = real(self, path, *args, **kwargs)
            if hit:
                die()
            return result
        setattr(Workspace, name, patched)

    writes = {{"state": 0}}
    def nth_state_write(n):
        def when(path):
            if path == "memory/.consolidation_state":
                writes["state"] += 1
                return writes["state"] == n
            return False
        return when

    daily = lambda path: path.startswith("memory/20")
    if point == "before_append":
        patch("update_text", daily)
    elif point == "after_append":
        patch("update_text", daily, before=False)
    elif point == "before_reindex":
        _memory_files.reindex_paths = die
    elif point == "history":
        patch("create_text", lambda path: path.startswith("memory/.history/"))
    elif point == "pending":
        patch("write_text", nth_state_write(1))
    elif point == "rename":
        real_replace = os.replace
        def replace(src, dst, *args, **kwargs):
            if str(dst).endswith("/MEMORY.md"):
                die()
            return real_replace(src, dst, *args, **kwargs)
        os.replace = replace
    elif point == "after_replace":
        patch("update_text", lambda path: path == "MEMORY.md", before=False)
    elif point == "before_commit":
        patch("write_text", nth_state_write(2))

    harness = MemoryHarness.open(
        root, model=Model(Model.Options()), clock=lambda: {now!r},
        maintenance={{"enabled": False}},
    )
    if operation == "flush":
        harness.flush(MESSAGES, session_id={session!r})
    else:
        harness.consolidate()
    print("finished without being killed")
    """
).format(facts=FACTS, new_memory=NEW_MEMORY, messages=MESSAGES, now=NOW, session=SESSION)

FLUSH_POINTS = ("model", "before_append", "after_append", "before_reindex")
CONSOLIDATION_POINTS = (
    "model",
    "history",
    "pending",
    "rename",
    "after_replace",
    "before_commit",
)
CASES = [("flush", p) for p in FLUSH_POINTS] + [("consolidate", p) for p in CONSOLIDATION_POINTS]


def _prepare(root: Path, operation: str) -> None:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(OLD_MEMORY)
    if operation == "consolidate":
        (root / LOG).write_text(LOGGED)


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Every case's child, run in parallel; the workspace each left behind."""
    children = {}
    for operation, point in CASES:
        root = tmp_path_factory.mktemp(f"{operation}-{point}") / "ws"
        _prepare(root, operation)
        children[operation, point] = (
            root,
            subprocess.Popen(
                [sys.executable, "-c", CHILD, str(root), operation, point],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        )
    roots = {}
    for case, (root, child) in children.items():
        out, err = child.communicate(timeout=120)
        assert child.returncode == -signal.SIGKILL, f"{case}: {out}{err[-2000:]}"
        roots[case] = root
    return roots


def _recovering_harness(root: Path, model: ScriptedModel) -> MemoryHarness:
    # An hour later: the leases the dead process held have expired.
    return MemoryHarness.open(
        root, model=model, clock=FakeClock(NOW + 3600), maintenance={"enabled": False}
    )


def _assert_no_torn_entry(text: str) -> None:
    entry = r"\n## Memory Flush — \S+ · session \S+\n(?:- [^\n]+\n)+"
    assert re.fullmatch(f"(?:{entry})*", text), f"torn daily log:\n{text!r}"


@pytest.mark.parametrize("point", FLUSH_POINTS)
def test_flush_killed(killed: dict[tuple[str, str], Path], point: str) -> None:
    root = killed["flush", point]
    log = root / LOG
    landed = log.exists() and "The user moved to Porto" in log.read_text()
    assert landed == (point in ("after_append", "before_reindex"))
    _assert_no_torn_entry(log.read_text() if log.exists() else "")
    assert (root / "MEMORY.md").read_text() == OLD_MEMORY, "a flush never touches MEMORY.md"
    model = ScriptedModel(FACTS)
    with _recovering_harness(root, model) as harness:
        result = harness.flush(MESSAGES, session_id=SESSION)
        # The mark agrees with the log: what landed is not extracted again, the rest is.
        assert result.status == ("nothing_new" if landed else "written")
        assert len(model.calls) == (0 if landed else 1)
        assert harness.flush(MESSAGES, session_id=SESSION).status == "nothing_new"
    text = log.read_text()
    _assert_no_torn_entry(text)
    assert text.count("- The user moved to Porto\n") == 1
    assert text.count("- Rita, the user's sister, visits in March\n") == 1


@pytest.mark.parametrize("point", CONSOLIDATION_POINTS)
def test_consolidation_killed(killed: dict[tuple[str, str], Path], point: str) -> None:
    root = killed["consolidate", point]
    memory = (root / "MEMORY.md").read_text()
    replaced = point in ("after_replace", "before_commit")
    assert memory == (NEW_MEMORY if replaced else OLD_MEMORY), "old or new, never torn"
    model = ScriptedModel(NEW_MEMORY)
    with _recovering_harness(root, model) as harness:
        result = harness.consolidate()
        # The watermark agrees with MEMORY.md: a rewrite that landed is not redone.
        assert result.status == ("nothing_new" if replaced else "consolidated"), result
        assert len(model.calls) == (0 if replaced else 1)
        assert harness.consolidate().status == "nothing_new"
        state: dict[str, Any] = json.loads(harness.workspace.read_text(STATE_PATH))
    assert (root / "MEMORY.md").read_text() == NEW_MEMORY
    assert state["files"]["2027-01-15.md"]["bytes"] == len(LOGGED.encode())
    history = sorted((root / "memory" / ".history").glob("MEMORY-*.md"))
    assert history, "the previous version is kept"
    assert history[-1].read_text() == OLD_MEMORY
