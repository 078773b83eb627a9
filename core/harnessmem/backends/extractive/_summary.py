"""The extractive compaction summary: four sections (intent from the user turns, salient
sentences ranked by TF-IDF term weight with a redundancy check, artifacts pulled by pattern
from tool calls, tool results and text, next steps from the last turns), merged with the
previous summary."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from harnessmem.backends.extractive._filters import DECISION, PREFERENCE
from harnessmem.backends.extractive._text import (
    CHITCHAT,
    MARKDOWN_HEADING,
    TermWeights,
    clip,
    find_artifacts,
    is_question,
    jaccard,
    near_duplicate,
    split_sentences,
    strip_bullet,
    term_set,
    terms,
)
from harnessmem.backends.extractive._turns import Turn

SECTIONS: Final = ("SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS")

_FUTURE = re.compile(
    r"\b(?:I'll|I will|we'll|we will|next,? I|next step|then I|I'm going to|going to|plan to|"
    r"need to|needs to|still have to|remaining|todo|to do|let me|follow up|pending|"
    r"waiting for|will now)\b",
    re.I,
)
_REQUEST = re.compile(
    r"\b(?:please|can you|could you|would you|make sure|I want|I need|I'd like|help me)\b", re.I
)


def parse_sections(summary: str) -> dict[str, list[str]]:
    """The four sections of a previous summary, as lists of lines ("None" left out)."""
    sections: dict[str, list[str]] = {name: [] for name in SECTIONS}
    current: str | None = None
    for line in summary.splitlines():
        heading = MARKDOWN_HEADING.match(line)
        if heading:
            title = heading.group(2).strip().upper()
            current = title if title in sections else None
            continue
        stripped = line.strip()
        if current and stripped and stripped.lower().strip(".") != "none":
            sections[current].append(stripped)
    return sections


def _intent(turns: Sequence[Turn], previous: list[str]) -> list[str]:
    asks = [t for t in turns if t.role == "user" and len(terms(t.text)) >= 2]

    def gist(turn: Turn) -> str:
        sentences = [s for s in split_sentences(turn.text) if len(terms(s)) >= 2]
        return clip(" ".join(sentences[:2]), 300)

    lines = [line for line in previous if not line.startswith("Latest request:")]
    if not lines and asks:
        lines.append(gist(asks[0]))
    if asks and (previous or asks[-1] is not asks[0]):
        lines.append("Latest request: " + gist(asks[-1]))
    return lines


def _salient(turns: Sequence[Turn], limit: int) -> list[str]:
    documents = [terms(t.text) for t in turns]
    weights = TermWeights(documents)
    candidates: list[tuple[float, int, str, frozenset[str]]] = []
    position = 0
    for turn in turns:
        if turn.role not in {"user", "assistant"}:
            continue
        for sentence in split_sentences(turn.text):
            position += 1
            found = term_set(sentence)
            # Four words that are not numbers: list fragments ("Cabin: Economy ($112)")
            # and small talk are not what a summary is for.
            if len({t for t in found - CHITCHAT if t.isalpha()}) < 4:
                continue
            if turn.role == "assistant" and is_question(sentence):
                continue
            score = weights.score(found) * (1.2 if turn.role == "user" else 1.0)
            if DECISION.search(sentence) or PREFERENCE.search(sentence):
                score *= 1.3
            if re.search(r"\d|\b[A-Z][a-z]+\b.*\b[A-Z][a-z]+\b", sentence[1:]):
                score *= 1.1
            line = f"{turn.speaker}: {clip(sentence, 280)}"
            candidates.append((score, position, line, found))
    chosen: list[tuple[int, str, frozenset[str]]] = []
    for _score, position, line, found in sorted(candidates, key=lambda c: (-c[0], c[1])):
        if len(chosen) >= limit:
            break
        if all(jaccard(found, other) < 0.5 for _, _, other in chosen):
            chosen.append((position, line, found))
    return [line for _, line, _ in sorted(chosen)]


def _flatten(value: Any, key: str = "", depth: int = 0) -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping) and depth < 3:
        for sub, item in value.items():
            yield from _flatten(item, f"{key}.{sub}" if key else str(sub), depth + 1)
    elif isinstance(value, list) and depth < 3:
        for item in value[:10]:
            yield from _flatten(item, key, depth + 1)
    else:
        yield key, value


def _artifacts(turns: Sequence[Turn]) -> list[tuple[str, str]]:
    """``(value, line)`` pairs: what was operated on first, then what was named in the talk,
    then what came back from tools (at most five per result)."""
    found: list[tuple[str, str]] = []
    for turn in turns:
        for name, arguments in turn.calls:
            try:
                parsed = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                parsed = arguments
            for key, value in _flatten(parsed):
                if isinstance(value, bool) or value is None:
                    continue
                text = str(value).strip()
                if not text:
                    continue
                if isinstance(value, int | float) or (len(text) <= 80 and "\n" not in text):
                    shown = f"{key}={text}" if key else text
                    found.append((text, f"{shown} ({name} argument)"))
                else:
                    for kind, item in find_artifacts(text)[:8]:
                        found.append((item, f"{item} ({kind} in {name} arguments)"))
    for turn in turns:
        if turn.role in {"user", "assistant"}:
            for kind, item in find_artifacts(turn.text)[:8]:
                if kind != "money":
                    found.append((item, f"{item} ({kind}, mentioned by {turn.speaker})"))
    for turn in turns:
        if turn.role == "tool":
            source = f"{turn.name} result" if turn.name else "tool result"
            for kind, item in find_artifacts(turn.text)[:5]:
                found.append((item, f"{item} ({kind}, {source})"))
    return found


def _next_steps(turns: Sequence[Turn]) -> list[str]:
    talk = [t for t in turns if t.role in {"user", "assistant"} and t.text]
    steps: list[str] = []
    if talk and talk[-1].role == "user":
        steps.append(f"Answer {talk[-1].speaker}'s latest message: {clip(talk[-1].text, 240)}")
    for turn in talk[-4:]:
        for sentence in split_sentences(turn.text):
            if turn.role == "assistant" and _FUTURE.search(sentence) and not is_question(sentence):
                steps.append(f"{turn.speaker}: {clip(sentence, 240)}")
            elif turn.role == "user" and turn is not talk[-1] and _REQUEST.search(sentence):
                steps.append(f"{turn.speaker} asked: {clip(sentence, 240)}")
    unique: list[str] = []
    for step in steps:
        if all(jaccard(term_set(step), term_set(other)) < 0.7 for other in unique):
            unique.append(step)
    return unique[:6]


def summarise(
    turns: Sequence[Turn],
    previous: str | None,
    *,
    max_sentences: int,
    max_artifacts: int,
) -> str:
    """The four-section summary of ``turns``, merged with the ``previous`` summary if any."""
    old = parse_sections(previous) if previous else {name: [] for name in SECTIONS}
    intent = _intent(turns, old["SESSION INTENT"])

    new_points = _salient(turns, max_sentences)
    old_points = [strip_bullet(line) for line in old["SUMMARY"]]
    old_points = [
        p
        for p in old_points
        if not any(near_duplicate(term_set(p), term_set(n), 0.6) for n in new_points)
    ]
    points = [*old_points[-max_sentences:], *new_points]

    old_items = [strip_bullet(line) for line in old["ARTIFACTS"]]
    seen = {item.split(" (", 1)[0] for item in old_items}
    new_items: list[str] = []
    for value, line in _artifacts(turns):
        if value not in seen and len(new_items) < max_artifacts:
            seen.add(value)
            new_items.append(line)
    # Over the cap, the oldest of the previous summary's items give way.
    items = [*old_items[max(0, len(old_items) + len(new_items) - max_artifacts) :], *new_items]

    steps = _next_steps(turns) or [strip_bullet(line) for line in old["NEXT STEPS"]]

    def section(title: str, lines: Sequence[str], bullets: bool = True) -> str:
        if not lines:
            return f"## {title}\nNone"
        body = "\n".join(f"- {line}" if bullets else line for line in lines)
        return f"## {title}\n{body}"

    return "\n\n".join(
        [
            section("SESSION INTENT", intent, bullets=False),
            section("SUMMARY", points),
            section("ARTIFACTS", items),
            section("NEXT STEPS", steps),
        ]
    )
