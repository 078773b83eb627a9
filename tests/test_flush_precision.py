"""The offline flush keeps what a person would keep: measured on the labelled set
(``tests/data/flush-labels``), and on the SWE-agent trajectory replayed end to end."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.backends.fulltext import parse_query
from harnessmem.replay import ReplayClock, load_transcript, replay

ROOT = Path(__file__).resolve().parents[1]
OWN = ROOT / "tests" / "data" / "flush-labels" / "own.jsonl"


@pytest.fixture(scope="module")
def labels() -> Iterator[ModuleType]:
    """``bench/_flush_labels.py``, imported from the checkout (bench/ is not installed)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT))
        yield importlib.import_module("bench._flush_labels")


@pytest.fixture(scope="module")
def labelled(labels: ModuleType, shared_file: Callable[[str], Path]) -> Any:
    shared_file("locomo-dev")
    return labels.load()


def test_the_labelled_set_is_whole(labelled: Any) -> None:
    """Every reference still names its sentence; when not, the shared files changed: check
    ``missing`` / ``changed`` and relabel those sentences by the README's rule."""
    assert not labelled.missing
    assert not labelled.changed
    assert len(labelled.labels) >= 300
    units = {label.unit.split(":")[0] for label in labelled.labels}
    assert units == {"tau-bench", "swe-agent", "locomo", "memorybank"}


def _assert_precise(labels: ModuleType, labelled: Any) -> None:
    """The acceptance figures on ``labelled``: precision >= 0.85 with recall >= 0.70. A
    failure lists the sentences judged otherwise than labelled."""
    verdicts = labels.evaluate(labelled, labels.extractive_flush)
    wrong = [
        f"{'kept' if kept else 'dropped'} {label.kind}: {label.text[:80]}"
        for label, kept in zip(verdicts.labels, verdicts.kept, strict=True)
        if kept != label.keep
    ]
    assert verdicts.precision() >= 0.85, wrong
    assert verdicts.recall() >= 0.70, wrong


def test_flush_precision_and_recall_on_the_labelled_set(labels: ModuleType, labelled: Any) -> None:
    _assert_precise(labels, labelled)


def test_the_extended_labelled_set(labels: ModuleType, shared_file: Callable[[str], Path]) -> None:
    """The labelled set with the conversations where the assistant recommends things
    (``advice.jsonl``): whole, and as precise as the original set."""
    shared_file("memorybank")
    extended: Any = labels.load(files=labels.EXTENDED)
    assert not extended.missing
    assert not extended.changed
    assert any(label.kind == "recommendation" for label in extended.labels)
    _assert_precise(labels, extended)


@pytest.mark.parametrize(
    "record",
    [json.loads(line) for line in OWN.read_text(encoding="utf-8").splitlines() if line.strip()],
    ids=lambda r: r["kind"],
)
def test_our_own_sentences(labels: ModuleType, record: dict[str, str]) -> None:
    """Sentences we wrote (no shared data needed): each is kept or dropped as labelled."""
    message = {"role": record["role"], "content": record["text"]}
    answer = labels.extractive_flush([message])
    kept = answer.strip() != "NO_REPLY"
    assert kept == (record["label"] == "keep"), answer


def _words(text: str) -> set[str]:
    """The content words of ``text``: its query terms, stop words left out."""
    return {token for term in parse_query(text) for token in term.tokens}


def test_the_swe_agent_replay_writes_no_instruction_or_code(
    tmp_path: Path, shared_file: Callable[[str], Path], labelled: Any
) -> None:
    """Replayed with the defaults, the trajectory's facts are about the bug and its fix, not
    the framework's standing orders nor the issue's code."""
    path = shared_file("swe-agent/marshmallow-1867.function_calling.traj")
    clock = ReplayClock()
    with MemoryHarness.open(tmp_path / "ws", clock=clock, maintenance={"enabled": False}) as h:
        replay(h, load_transcript(path), session_id="swe", clock=clock)
    bullets = [
        line[2:]
        for log in sorted((tmp_path / "ws" / "memory").glob("*.md"))
        for line in log.read_text().splitlines()
        if line.startswith("- ")
    ]
    assert bullets
    dropped = [
        label
        for label in labelled.labels
        if label.unit == "swe-agent" and label.kind in {"instruction", "boilerplate", "code"}
    ]
    assert len(dropped) > 20, "the labels of what the flush must drop are there"
    for bullet in bullets:
        found = _words(bullet) - {"user", "assistant"}
        for label in dropped:
            source = _words(label.text)
            assert len(found & source) < 0.8 * len(found), (bullet, label.text)
    assert any("round" in bullet for bullet in bullets), "the fix that was made"
