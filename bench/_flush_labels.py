"""The labelled set of candidate sentences for the extractive flush (``tests/data/flush-labels``).

Each label names a sentence by reference, not by its text: the shared transcripts' own
terms say not to copy them into this repository. A reference is the conversation unit
(``tau-bench:<run>``, ``swe-agent``, ``locomo:<sample>:session_<n>``,
``memorybank:<user>:<date>``), the message in it (an index, a LoCoMo ``dia_id``, or a
MemoryBank ``<turn>q`` / ``<turn>r``), the sentence's index under :func:`label_sentences`
(a splitter of its own, frozen, so that changing the flush does not move the references)
and the first 8 hex digits of the SHA-1 of the sentence, to tell when the data changed.
The sentences we wrote ourselves (``own.jsonl``) carry their text.

:func:`load` reads the labels and the text from the shared folder; what it cannot find
(the folder is absent, or a sentence no longer matches its hash) is counted, not guessed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessmem.messages import normalize_messages

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "tests" / "data" / "flush-labels"
SHARED = Path(os.environ.get("SHARED_DATA_DIR") or ROOT.parent / "shared" / "data")

_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def label_sentences(text: str) -> list[str]:
    """The sentences of a message text as the labels count them: lines, then ``. ! ?``
    followed by a space and a capital or digit. Frozen: references depend on it."""
    found: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if line:
            found.extend(piece.strip() for piece in _END.split(line) if piece.strip())
    return found


def digest(sentence: str) -> str:
    """The 8 hex digits that check a reference still names the same sentence."""
    return hashlib.sha1(" ".join(sentence.split()).encode("utf-8")).hexdigest()[:8]


@dataclass
class Unit:
    """One conversation as the flush would read it, and its messages by locator."""

    key: str
    messages: list[dict[str, Any]]
    by_locator: dict[str, int]


@dataclass
class Label:
    unit: str
    message: str
    index: int
    keep: bool
    kind: str
    text: str = ""


@dataclass
class LabelledSet:
    labels: list[Label] = field(default_factory=list)
    units: dict[str, Unit] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def units(shared: Path = SHARED) -> Iterator[Unit]:
    """Every conversation unit the references may name, read from ``shared``."""
    tau = shared / "tau-bench" / "gpt-4o-airline-dev.json"
    if tau.is_file():
        for run, data in enumerate(_json(tau)):
            messages = normalize_messages(data)
            yield Unit(f"tau-bench:{run}", messages, {str(i): i for i in range(len(messages))})
    swe = shared / "swe-agent" / "marshmallow-1867.function_calling.traj"
    if swe.is_file():
        messages = normalize_messages(_json(swe))
        yield Unit("swe-agent", messages, {str(i): i for i in range(len(messages))})
    locomo = shared / "locomo-dev" / "locomo-dev.json"
    if locomo.is_file():
        for sample in _json(locomo):
            talk = sample["conversation"]
            for key, turns in talk.items():
                if not re.fullmatch(r"session_\d+", key) or not turns:
                    continue
                messages = [
                    {"role": "user", "name": t["speaker"], "content": _locomo_text(t)}
                    for t in turns
                ]
                yield Unit(
                    f"locomo:{sample['sample_id']}:{key}",
                    messages,
                    {t["dia_id"]: i for i, t in enumerate(turns)},
                )
    bank = shared / "memorybank" / "memory_bank_en.json"
    if bank.is_file():
        for user, data in _json(bank).items():
            for date, turns in data.get("history", {}).items():
                messages, where = [], {}
                for i, turn in enumerate(turns):
                    where[f"{i}q"] = len(messages)
                    messages.append({"role": "user", "content": turn["query"]})
                    where[f"{i}r"] = len(messages)
                    messages.append({"role": "assistant", "content": turn["response"]})
                yield Unit(f"memorybank:{user}:{date}", messages, where)


def _locomo_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text") or "")
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def sentence_at(unit: Unit, message: str, index: int) -> str | None:
    """The sentence a reference names, or None when the unit has no such one."""
    position = unit.by_locator.get(message)
    if position is None:
        return None
    found = label_sentences(message_text(unit.messages[position]))
    return found[index] if 0 <= index < len(found) else None


#: The original labelled set, and what the extended set adds to it: every sentence of more
#: conversations whose assistant recommends things (``advice.jsonl``).
ORIGINAL: tuple[str, ...] = ("shared.jsonl",)
EXTENDED: tuple[str, ...] = ("shared.jsonl", "advice.jsonl")


def load(
    labels: Path = LABELS, shared: Path = SHARED, files: tuple[str, ...] = ORIGINAL
) -> LabelledSet:
    """The shared-data labels of ``files`` with their sentences (``own.jsonl`` is read
    separately)."""
    result = LabelledSet()
    records = [
        json.loads(line)
        for name in files
        for line in (labels / name).read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    wanted = {r["unit"] for r in records}
    result.units = {u.key: u for u in units(shared) if u.key in wanted}
    for record in records:
        where = f"{record['unit']} {record['message']}#{record['sentence']}"
        unit = result.units.get(record["unit"])
        text = sentence_at(unit, record["message"], record["sentence"]) if unit else None
        if text is None:
            result.missing.append(where)
            continue
        if digest(text) != record["sha"]:
            result.changed.append(where)
            continue
        result.labels.append(
            Label(
                record["unit"],
                record["message"],
                record["sentence"],
                record["label"] == "keep",
                record["kind"],
                text,
            )
        )
    return result


def load_own(labels: Path = LABELS) -> list[dict[str, Any]]:
    """The sentences we wrote ourselves: ``{"text", "role", "label", "kind"}`` each."""
    return [
        json.loads(line)
        for line in (labels / "own.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


@dataclass
class Verdicts:
    """What the flush wrote of each labelled sentence: ``kept[i]`` for ``labels[i]``."""

    labels: list[Label]
    kept: list[bool]
    bullets: dict[str, list[str]]

    def counts(self) -> tuple[int, int, int]:
        """True positives, kept sentences, sentences labelled keep."""
        tp = sum(
            1 for label, kept in zip(self.labels, self.kept, strict=True) if kept and label.keep
        )
        return tp, sum(self.kept), sum(1 for label in self.labels if label.keep)

    def precision(self) -> float:
        tp, kept, _ = self.counts()
        return tp / kept if kept else 0.0

    def recall(self) -> float:
        tp, _, keep = self.counts()
        return tp / keep if keep else 0.0


_SUBJECTS = frozenset({"user", "assistant"})


def _source(bullet: str, sentences: list[tuple[str, frozenset[str]]], names: frozenset[str]) -> int:
    """The index of the sentence ``bullet`` was written from: the one holding most of its
    content words (the speaker's name and "the user" left out); -1 when none holds half."""
    from harnessmem.backends.extractive._text import term_set

    wanted = term_set(bullet) - names - _SUBJECTS
    best, where = 0.0, -1
    for index, (_text_of, found) in enumerate(sentences):
        if not wanted:
            break
        share = len(wanted & found) / len(wanted)
        if share > best:
            best, where = share, index
    return where if best >= 0.5 else -1


def evaluate(labelled: LabelledSet, flush: Any) -> Verdicts:
    """Send each unit to ``flush`` (messages -> the flush's answer text) and tell, for every
    labelled sentence, whether a written bullet came from it."""
    from harnessmem.backends.extractive._text import term_set

    kept_keys: set[tuple[str, str, int]] = set()
    written: dict[str, list[str]] = {}
    for key in sorted({label.unit for label in labelled.labels}):
        unit = labelled.units[key]
        located = {i: loc for loc, i in unit.by_locator.items()}
        sentences: list[tuple[str, frozenset[str]]] = []
        where: list[tuple[str, int]] = []
        names: set[str] = set()
        for position, message in enumerate(unit.messages):
            if message.get("role") not in {"user", "assistant"}:
                continue
            if isinstance(message.get("name"), str):
                names.update(term_set(message["name"]))
            for index, sentence in enumerate(label_sentences(message_text(message))):
                sentences.append((sentence, term_set(sentence)))
                where.append((located[position], index))
        answer = flush(unit.messages)
        bullets = [line[2:].strip() for line in answer.splitlines() if line.startswith("- ")]
        written[key] = bullets
        for bullet in bullets:
            source = _source(bullet, sentences, frozenset(names))
            if source >= 0:
                kept_keys.add((key, *where[source]))
    kept = [(label.unit, label.message, label.index) in kept_keys for label in labelled.labels]
    return Verdicts(labelled.labels, kept, written)


def extractive_flush(messages: list[dict[str, Any]]) -> str:
    """The default offline flush of ``messages`` (an empty reference, as on a first day)."""
    from harnessmem.backends.extractive import ExtractiveBackend
    from harnessmem.prompts import flush_request

    return ExtractiveBackend().complete(flush_request(messages), purpose="flush").text
