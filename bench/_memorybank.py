"""Our answer key to the MemoryBank probing questions (``tests/data/memorybank-answers``).

MemoryBank (``../shared/data/memorybank``) holds 15 users' dated dialogues with an AI
companion and 100 probing questions about them, without answers. The key gives each
question, by reference, the turns of the user's own dialogue that state the answer
(``{"date": "2023-04-30", "turn": "3q"}``: the query of turn 3 of that day; ``r`` the
response), a short answer for people to read, and the ``match`` strings that tell a search
hit holding the answer (see :func:`hit_holds`). The shared data's terms say it is not to be
copied into this repository: a question is named by its user and index in
``probing_questions_en.jsonl``, with ``sha`` (8 hex digits of the question's SHA-1) to tell
when the file changed. :func:`load` reads the key and the text it points to.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KEY = ROOT / "tests" / "data" / "memorybank-answers" / "answers.jsonl"
SHARED = Path(os.environ.get("SHARED_DATA_DIR") or ROOT.parent / "shared" / "data")
BANK = "memorybank/memory_bank_en.json"
QUESTIONS = "memorybank/probing_questions_en.jsonl"
_TURN = re.compile(r"^(\d+)([qr])$")


def digest(text: str) -> str:
    """The 8 hex digits that check a reference still names the same question."""
    return hashlib.sha1(" ".join(text.split()).encode("utf-8")).hexdigest()[:8]


@dataclass
class Dialogues:
    """Each user's dialogue (names stripped: the file spells some with spaces), by date,
    and their probing questions in file order."""

    days: dict[str, dict[str, list[dict[str, str]]]]
    questions: dict[str, list[str]]

    def turn(self, user: str, date: str, turn: str) -> str | None:
        """The text a reference names (``3q`` the query of turn 3), or None."""
        match = _TURN.match(turn)
        turns = self.days.get(user, {}).get(date)
        if match is None or turns is None or int(match.group(1)) >= len(turns):
            return None
        entry = turns[int(match.group(1))]
        return str(entry["query" if match.group(2) == "q" else "response"])


def read_dialogues(shared: Path = SHARED) -> Dialogues:
    """The MemoryBank dialogues and questions under ``shared`` (FileNotFoundError if absent)."""
    bank = json.loads((shared / BANK).read_text(encoding="utf-8"))
    days = {name.strip(): dict(data.get("history") or {}) for name, data in bank.items()}
    questions: dict[str, list[str]] = {}
    lines = (shared / QUESTIONS).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        record = json.loads(line)
        if not isinstance(record, dict):
            raise ValueError(f"{shared / QUESTIONS} line {number}: expected an object")
        for name, asked in record.items():
            questions.setdefault(name.strip(), []).extend(str(q) for q in asked)
    return Dialogues(days, questions)


@dataclass
class Answer:
    """One question of the key, with its text and the text of its evidence turns."""

    user: str
    index: int
    question: str
    answerable: bool
    answer: str = ""
    match: list[str] = field(default_factory=list)
    evidence: list[tuple[str, str]] = field(default_factory=list)
    evidence_text: list[str] = field(default_factory=list)
    hit_date: str | None = None
    reason: str = ""


@dataclass
class AnswerKey:
    answers: list[Answer] = field(default_factory=list)
    #: References the shared data does not have (question or evidence turn), and
    #: questions whose text no longer matches its ``sha``.
    missing: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)

    @property
    def answerable(self) -> list[Answer]:
        return [a for a in self.answers if a.answerable]


def read_key(path: Path = KEY) -> list[dict[str, Any]]:
    """The key's records as written."""
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def load(dialogues: Dialogues, path: Path = KEY) -> AnswerKey:
    """The key resolved against ``dialogues``; what does not resolve is listed, not guessed."""
    key = AnswerKey()
    for record in read_key(path):
        user, index = str(record["user"]), int(record["question"])
        where = f"{user} question {index}"
        asked = dialogues.questions.get(user, [])
        if not 0 <= index < len(asked):
            key.missing.append(where)
            continue
        if digest(asked[index]) != record["sha"]:
            key.changed.append(where)
            continue
        answer = Answer(user, index, asked[index], bool(record["answerable"]))
        if not answer.answerable:
            answer.reason = str(record.get("reason") or "")
            key.answers.append(answer)
            continue
        answer.answer = str(record["answer"])
        answer.match = [str(m) for m in record["match"]]
        answer.hit_date = record.get("hit_date")
        for ref in record["evidence"]:
            text = dialogues.turn(user, ref["date"], ref["turn"])
            if text is None:
                key.missing.append(f"{where}: {ref['date']} {ref['turn']}")
                continue
            answer.evidence.append((ref["date"], ref["turn"]))
            answer.evidence_text.append(text)
        if len(answer.evidence) == len(record["evidence"]):
            key.answers.append(answer)
    return key


#: Memory is written in the third person: the user's "my" is "the user's" there.
_PERSON = {
    "i": r"(?:i|the\s+user)",
    "me": r"(?:me|the\s+user)",
    "my": r"(?:my|the\s+user's)",
    "myself": r"(?:myself|the\s+user)",
}


def _pattern(needle: str) -> re.Pattern[str]:
    """``needle`` case-insensitively, not inside a longer word ("hot" is not in "photo"),
    its first-person words also in the third person ("my birthday", "the user's birthday")."""
    words = r"\s+".join(_PERSON.get(part.lower(), re.escape(part)) for part in needle.split())
    return re.compile(rf"(?<!\w){words}(?!\w)", re.IGNORECASE)


def contains(text: str, needle: str) -> bool:
    """Whether ``text`` holds ``needle`` by the key's rule (case and spacing aside, whole
    words, the user's "I", "me", "my" also as "the user", "the user's")."""
    return _pattern(needle).search(text) is not None


def hit_holds(answer: Answer, content: str, dates: set[str]) -> bool:
    """Whether a hit holds the answer: its text contains one of the ``match`` strings and,
    for a question the key ties to a day (``hit_date``), one of ``dates`` (the hit's own
    day and those of the places it stands for) is that day."""
    if answer.hit_date is not None and answer.hit_date not in dates:
        return False
    return any(contains(content, needle) for needle in answer.match)
