"""Tests for harnessmem.compaction._summary: reading the summaries models really write."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harnessmem.compaction import SECTIONS, normalise_summary
from harnessmem.prompts import load_template

CORPUS = Path(__file__).parent / "data" / "summary-answers.txt"
_ENTRY = re.compile(r"^=== (.+?) \| (accept|reject: (.+))$")


def _corpus() -> list[tuple[str, str, str | None]]:
    """(style, answer, None to accept or the reason to reject) for every corpus entry."""
    entries: list[tuple[str, list[str], str | None]] = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        match = _ENTRY.match(line)
        if match:
            entries.append((match.group(1), [], match.group(3)))
        elif entries:
            entries[-1][1].append(line)
    return [(style, "\n".join(lines), reason) for style, lines, reason in entries]


CORPUS_ENTRIES = _corpus()
ACCEPTED = [(style, text) for style, text, reason in CORPUS_ENTRIES if reason is None]
REJECTED = [(style, text, reason) for style, text, reason in CORPUS_ENTRIES if reason]


def _sections(canonical: str) -> dict[str, str]:
    parts = re.split(r"^## (SESSION INTENT|SUMMARY|ARTIFACTS|NEXT STEPS)\n", canonical, flags=re.M)
    assert parts[0] == ""
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts), 2)}


def test_the_corpus_is_large_enough() -> None:
    assert len(ACCEPTED) >= 30
    assert len(REJECTED) >= 10


@pytest.mark.parametrize(("style", "text"), ACCEPTED, ids=[s for s, _ in ACCEPTED])
def test_what_models_write_is_read_into_the_canonical_form(style: str, text: str) -> None:
    normal, problem = normalise_summary(text, prompt=load_template("summary"))
    assert problem == "", style
    assert normal is not None
    sections = _sections(normal)
    assert list(sections) == list(SECTIONS)  # canonical order, whatever order was written
    assert "reservation" in sections["SESSION INTENT"].lower()
    assert "HAT136" in sections["SUMMARY"]
    assert "confirm" in sections["NEXT STEPS"].lower()
    assert "HAT136" not in sections["SESSION INTENT"]
    assert "confirm" not in sections["SUMMARY"].lower()
    artifacts = sections["ARTIFACTS"]
    assert artifacts == "None" or "4WQ150" in artifacts or "HAT136" in artifacts
    # No label survives as text at the start of a section.
    for body in sections.values():
        label = r"(?:#+|\*+|\d+\.)?\s*(?:session intent|summary|artifacts|next steps?)\s*[:*]"
        assert not re.match(label, body, re.I)
    # The canonical form reads back as itself.
    assert normalise_summary(normal) == (normal, "")


@pytest.mark.parametrize(("style", "text", "reason"), REJECTED, ids=[s for s, _, _ in REJECTED])
def test_junk_is_rejected_with_a_reason(style: str, text: str, reason: str) -> None:
    normal, problem = normalise_summary(text, prompt=load_template("summary"))
    assert normal is None, style
    assert reason in problem


def test_a_preamble_and_fences_are_dropped() -> None:
    normal, _ = normalise_summary(
        "Sure! Here it is:\n```markdown\nSESSION INTENT: a\nSUMMARY: b\nNEXT STEPS: c\n```"
    )
    assert (
        normal == "## SESSION INTENT\na\n\n## SUMMARY\nb\n\n## ARTIFACTS\nNone\n\n## NEXT STEPS\nc"
    )


def test_a_bullet_label_inside_a_section_does_not_open_a_section() -> None:
    text = "## SUMMARY\n- Next steps: were discussed\nx\n## SESSION INTENT\ny\n## NEXT STEPS\nz"
    normal, _ = normalise_summary(text)
    assert normal is not None
    sections = _sections(normal)
    assert sections["SUMMARY"] == "- Next steps: were discussed\nx"
    assert sections["NEXT STEPS"] == "z"


def test_a_long_answer_opening_with_sorry_is_not_a_refusal() -> None:
    body = "Sorry for the delay; the user wants reservation 4WQ150 changed. " * 10
    normal, problem = normalise_summary(f"SESSION INTENT: {body}\nSUMMARY: x\nNEXT STEPS: y")
    assert problem == ""
    assert normal is not None


@given(st.text(max_size=400))
def test_any_text_is_read_or_rejected_without_raising(text: str) -> None:
    normal, problem = normalise_summary(text)
    assert (normal is None) == bool(problem)
    if normal is not None:
        assert list(_sections(normal)) == list(SECTIONS)
