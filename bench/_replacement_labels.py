"""The real replacement pairs of ``tests/data/replacements/real.jsonl``, read by reference.

A pair names two sentences of ``../shared/data`` as ``tests/data/flush-labels/`` does
(``unit``, ``message``, ``sentence`` under :func:`bench._flush_labels.label_sentences`,
``sha``): the shared data's terms forbid copying its text here. ``real-unrelated.jsonl``
names facts told beside them that no pair replaces. :func:`load` reads the text, who said
it and when: a LoCoMo session's date, a MemoryBank day; a tau-bench conversation has no
date, so its earlier sentences are told on :data:`TAU_DAY` and its later ones a day after.
A reference that no longer resolves, or whose sentence changed, is counted, not guessed.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._flush_labels import SHARED, Unit, digest, message_text, sentence_at, units

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "replacements"
#: The day a tau-bench conversation's earlier facts are told (its later ones: a day after).
TAU_DAY = dt.datetime(2024, 5, 10, 9, 0, tzinfo=dt.UTC)


@dataclass
class Said:
    """One sentence of a transcript: its text, who said it, when, and whose memory it
    belongs in (``owner``: a tau-bench run, a LoCoMo sample, a MemoryBank user)."""

    text: str
    role: str
    name: str | None
    when: dt.datetime
    owner: str
    where: str
    #: For a field of a list, the lines it hangs on: the list's lead-in and the items above
    #: it ("Your reservation details are as follows:" for "- **Cabin:** Economy").
    context: tuple[str, ...] = ()


@dataclass
class RealPair:
    earlier: Said
    later: Said
    kind: str
    split: str


@dataclass
class RealSet:
    pairs: list[RealPair] = field(default_factory=list)
    unrelated: list[Said] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


def _records(name: str) -> list[dict[str, Any]]:
    lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _locomo_dates(shared: Path) -> dict[str, dt.datetime]:
    """``locomo:<sample>:session_<n>`` -> the session's date (``1:56 pm on 8 May, 2023``)."""
    path = shared / "locomo-dev" / "locomo-dev.json"
    if not path.is_file():
        return {}
    dates: dict[str, dt.datetime] = {}
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for key, value in sample["conversation"].items():
            found = re.fullmatch(r"(session_\d+)_date_time", key)
            if found and isinstance(value, str):
                moment = dt.datetime.strptime(value.strip(), "%I:%M %p on %d %B, %Y")
                dates[f"locomo:{sample['sample_id']}:{found.group(1)}"] = moment.replace(
                    tzinfo=dt.UTC
                )
    return dates


_ITEM = re.compile(r"^(?P<indent>\s*)(?:[-*+]|\d{1,2}[.)])\s+\S")


def hung_on(text: str, sentence: str) -> tuple[str, ...]:
    """The lines of a message ``text`` that its list item ``sentence`` hangs on: the items
    it is nested in and the lead-in of their list (the line ending with ":" above them);
    none when ``sentence`` is no list item."""
    lines = text.splitlines()
    at = next((n for n, line in enumerate(lines) if line.strip() == sentence.strip()), None)
    if at is None or not _ITEM.match(lines[at]):
        return ()
    above: list[str] = []
    depth = len(_ITEM.match(lines[at]).group("indent"))  # type: ignore[union-attr]
    for line in reversed(lines[:at]):
        item = _ITEM.match(line)
        if item is not None and len(item.group("indent")) < depth:
            above.append(line)
            depth = len(item.group("indent"))
        elif item is None and line.strip():
            if line.rstrip().endswith(":"):
                above.append(line)
            break
    return tuple(reversed(above))


def _owner(unit: str) -> str:
    """Whose memory a unit's facts go to: a tau-bench run, a LoCoMo sample, a user."""
    parts = unit.split(":")
    return ":".join(parts[:2]) if parts[0] in {"locomo", "memorybank"} else unit


def load(shared: Path = SHARED) -> RealSet:
    """The pairs and unrelated facts whose sentences ``shared`` still holds unchanged."""
    pairs, unrelated = _records("real.jsonl"), _records("real-unrelated.jsonl")
    refs = [p[side] for p in pairs for side in ("earlier", "later")] + unrelated
    wanted = {r["unit"] for r in refs}
    found = {u.key: u for u in units(shared) if u.key in wanted}
    dates = _locomo_dates(shared)
    result = RealSet()

    def said(ref: dict[str, Any], later: bool) -> Said | None:
        where = f"{ref['unit']} {ref['message']}#{ref['sentence']}"
        unit: Unit | None = found.get(ref["unit"])
        text = sentence_at(unit, ref["message"], ref["sentence"]) if unit else None
        if unit is None or text is None:
            result.missing.append(where)
            return None
        if digest(text) != ref["sha"]:
            result.changed.append(where)
            return None
        position = unit.by_locator[ref["message"]]
        message = unit.messages[position]
        if ref["unit"].startswith("locomo:"):
            day = dates[ref["unit"]]
        elif ref["unit"].startswith("memorybank:"):
            day = dt.datetime.fromisoformat(ref["unit"].rsplit(":", 1)[1]).replace(
                hour=9, tzinfo=dt.UTC
            )
        else:
            day = TAU_DAY + dt.timedelta(days=1 if later else 0)
        name = message.get("name")
        return Said(
            text,
            str(message.get("role")),
            name if isinstance(name, str) else None,
            day + dt.timedelta(minutes=position, seconds=ref["sentence"]),
            _owner(ref["unit"]),
            where,
            hung_on(message_text(message), text) if message.get("role") == "assistant" else (),
        )

    for record in pairs:
        earlier, later = said(record["earlier"], False), said(record["later"], True)
        if earlier is not None and later is not None:
            result.pairs.append(RealPair(earlier, later, record["kind"], record["split"]))
    for record in unrelated:
        fact = said(record, False)
        if fact is not None:
            result.unrelated.append(fact)
    return result
