"""What the offline ``extractive`` backend's memory flush keeps of real conversations (LoCoMo).

Each LoCoMo session (a dated chat between two people) is sent to the extractive backend as
one ``flush`` request built with ``harnessmem.prompts.flush_request`` (the request contract's
builder): every turn is a ``user`` message whose ``name`` is the speaker (a two-person chat),
an image's caption is appended as ``[shares a photo: ...]``, and the reference (MEMORY.md,
today's log) is empty because every session falls on a different day. Then:

- observation recall: the share of LoCoMo's annotated ``observation`` facts of the session
  that one written bullet matches;
- evidence found: the share of questions whose evidence turns each match a bullet written
  for their session ("any": at least one evidence turn does);
- after consolidation: the observation recall of the MEMORY.md the extractive consolidation
  makes of all of a conversation's bullets with the default 4,000-token budget.

Matching criterion: two texts match when their overlap is at least THRESHOLD (0.5; the
strict rows use 0.7). Overlap = shared content words / content words of the shorter text,
with stop words and the two speakers' names removed and light stemming (plural, -ing, -ed).
Baseline, same run: the session's first turns written verbatim, cut at the number of
characters the extractive flush wrote for that session (equal volume, no selection); the
upper bound writes every turn verbatim. Questions with malformed evidence ids (LoCoMo
defects such as "D8:6; D9:17", "D", "D:11:26") are repaired when the ids can be read and
skipped when none can; the count is printed.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._util import Row
from harnessmem.backends.extractive import ExtractiveBackend
from harnessmem.backends.extractive._text import term_set
from harnessmem.prompts import consolidation_request, flush_request
from harnessmem.tokens import TokenCounter

# The shared data folder sits beside the checkout; SHARED_DATA_DIR points elsewhere.
LOCOMO = (
    Path(
        os.environ.get("SHARED_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    / "locomo-dev"
    / "locomo-dev.json"
)
THRESHOLD = 0.5
STRICT = 0.7
_ID = re.compile(r"D(\d+):(\d+)")


def overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared terms over the terms of the smaller set (0 when either is empty)."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


@dataclass
class Session:
    """One LoCoMo session: its turns, their ids, and the annotated observations."""

    key: str
    date: str
    messages: list[dict[str, Any]]
    turn_ids: list[str]
    observations: list[str]


@dataclass
class Conversation:
    sample_id: str
    names: frozenset[str]
    sessions: list[Session]
    questions: list[list[str]]  # evidence ids per question
    skipped_questions: int = 0
    repaired_questions: int = 0


def _turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text") or "")
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def load(path: Path, limit: int | None = None) -> list[Conversation]:
    """The conversations of the LoCoMo file, sessions in order."""
    data = json.loads(path.read_text(encoding="utf-8"))
    conversations = []
    for sample in data[:limit]:
        talk = sample["conversation"]
        names = frozenset(
            part.casefold() for key in ("speaker_a", "speaker_b") for part in str(talk[key]).split()
        )
        sessions = []
        numbers = sorted(
            int(m.group(1)) for k in talk if (m := re.fullmatch(r"session_(\d+)", k)) and talk[k]
        )
        for number in numbers:
            turns = talk[f"session_{number}"]
            observed = sample["observation"].get(f"session_{number}_observation", {})
            facts = [fact for items in observed.values() for fact, _ids in items]
            sessions.append(
                Session(
                    key=f"session_{number}",
                    date=str(talk.get(f"session_{number}_date_time", "")),
                    messages=[
                        {"role": "user", "name": t["speaker"], "content": _turn_text(t)}
                        for t in turns
                    ],
                    turn_ids=[t["dia_id"] for t in turns],
                    observations=facts,
                )
            )
        conversation = Conversation(sample["sample_id"], names, sessions, [])
        for qa in sample["qa"]:
            raw = qa.get("evidence") or []
            ids = [f"D{s}:{n}" for item in raw for s, n in _ID.findall(str(item))]
            if not ids:
                conversation.skipped_questions += 1
                continue
            if any(not _ID.fullmatch(str(item)) for item in raw):
                conversation.repaired_questions += 1
            conversation.questions.append(ids)
        conversations.append(conversation)
    return conversations


@dataclass
class Tally:
    """Counts for one method (the extractive flush, or the baseline)."""

    observations: int = 0
    matched: dict[float, int] = field(default_factory=dict)
    questions: int = 0
    all_found: int = 0
    any_found: int = 0

    def share(self, threshold: float) -> float:
        return self.matched.get(threshold, 0) / max(1, self.observations)


def _score_session(
    tally: Tally, bullets: Sequence[frozenset[str]], observations: Iterable[frozenset[str]]
) -> None:
    for fact in observations:
        tally.observations += 1
        best = max((overlap(fact, bullet) for bullet in bullets), default=0.0)
        for threshold in (THRESHOLD, STRICT):
            if best >= threshold:
                tally.matched[threshold] = tally.matched.get(threshold, 0) + 1


def _lead(messages: Sequence[dict[str, Any]], budget: int, content: Any) -> list[frozenset[str]]:
    """Baseline: the session's first turns verbatim, cut at ``budget`` characters."""
    kept: list[frozenset[str]] = []
    used = 0
    for message in messages:
        if used >= budget:
            break
        text = message["content"][: budget - used]
        used += len(text)
        kept.append(content(text))
    return kept


def _bullets(text: str) -> list[str]:
    return [line[2:].strip() for line in text.splitlines() if line.startswith("- ")]


def run(quick: bool) -> list[Row]:
    """Observation recall and evidence coverage of the extractive flush, against lead-N."""
    if not LOCOMO.is_file():
        print(f"bench extractive: skipped, LoCoMo data missing at {LOCOMO}", file=sys.stderr)
        return []
    conversations = load(LOCOMO, limit=2 if quick else None)
    backend = ExtractiveBackend()
    counter = TokenCounter()
    flush, lead, verbatim, consolidated = Tally(), Tally(), Tally(), Tally()
    written_chars = session_chars = bullets_total = sessions_total = 0
    flush_seconds = count_seconds = 0.0
    for conversation in conversations:
        names = conversation.names

        def content(text: str, names: frozenset[str] = names) -> frozenset[str]:
            return term_set(text) - names

        found_turns: dict[str, list[frozenset[str]]] = {}
        lead_turns: dict[str, list[frozenset[str]]] = {}
        daily: list[str] = []
        all_observations: list[frozenset[str]] = []
        for session in conversation.sessions:
            request = flush_request(session.messages, today=session.date)
            started = time.perf_counter()
            answer = backend.complete(request, purpose="flush").text
            flush_seconds += time.perf_counter() - started
            started = time.perf_counter()
            counter.count_messages(request)
            count_seconds += time.perf_counter() - started
            counter.clear_cache()
            bullets = _bullets(answer)
            bullet_terms = [content(b) for b in bullets]
            turn_terms = [content(m["content"]) for m in session.messages]
            lead_terms = _lead(session.messages, sum(len(b) for b in bullets), content)
            observations = [content(fact) for fact in session.observations]
            all_observations += observations
            _score_session(flush, bullet_terms, observations)
            _score_session(lead, lead_terms, observations)
            _score_session(verbatim, turn_terms, observations)
            for turn_id, terms_of_turn in zip(session.turn_ids, turn_terms, strict=True):
                found_turns[turn_id] = bullet_terms
                lead_turns[turn_id] = lead_terms
                found_turns[turn_id + "#turn"] = [terms_of_turn]
            daily.append(f"## Memory Flush — {session.date}\n{answer}")
            written_chars += sum(len(b) for b in bullets)
            session_chars += sum(len(m["content"]) for m in session.messages)
            bullets_total += len(bullets)
            sessions_total += 1
        for evidence in conversation.questions:
            for tally, written in ((flush, found_turns), (lead, lead_turns)):
                tally.questions += 1
                hits = []
                for turn_id in evidence:
                    turn = found_turns.get(turn_id + "#turn", [frozenset()])[0]
                    pool = written.get(turn_id, [])
                    hits.append(any(overlap(turn, b) >= THRESHOLD for b in pool))
                tally.all_found += all(hits)
                tally.any_found += any(hits)
        memory = backend.complete(
            consolidation_request("", "\n\n".join(daily), max_tokens=4_000),
            purpose="consolidation",
        ).text
        kept = [content(line[2:]) for line in memory.splitlines() if line.startswith("- ")]
        _score_session(consolidated, kept, all_observations)

    skipped = sum(c.skipped_questions for c in conversations)
    repaired = sum(c.repaired_questions for c in conversations)
    print(
        f"bench extractive: {len(conversations)} conversations, {sessions_total} sessions, "
        f"{flush.observations} observations, {flush.questions} questions "
        f"({repaired} with repaired evidence ids, {skipped} skipped: no readable id)",
        file=sys.stderr,
    )
    name = "extractive"
    base = "first turns verbatim, same chars"
    rows = [
        Row(
            name,
            "observation recall (overlap>=0.5)",
            flush.share(THRESHOLD),
            "share",
            base,
            lead.share(THRESHOLD),
        ),
        Row(
            name,
            "observation recall (overlap>=0.7)",
            flush.share(STRICT),
            "share",
            base,
            lead.share(STRICT),
        ),
        Row(
            name,
            "questions with all evidence turns found",
            flush.all_found / flush.questions,
            "share",
            base,
            lead.all_found / lead.questions,
        ),
        Row(
            name,
            "questions with any evidence turn found",
            flush.any_found / flush.questions,
            "share",
            base,
            lead.any_found / lead.questions,
        ),
        Row(
            name,
            "observation recall after consolidation (4k tokens)",
            consolidated.share(THRESHOLD),
            "share",
            "all turns verbatim (upper bound)",
            verbatim.share(THRESHOLD),
        ),
        Row(
            name,
            "bullets written per session",
            bullets_total / sessions_total,
            "bullets",
            notes=f"written chars / session chars = {written_chars / session_chars:.3f}",
        ),
        Row(
            name,
            "flush time per session",
            flush_seconds / sessions_total,
            "s",
            "token count of the same request (cold)",
            count_seconds / sessions_total,
        ),
    ]
    if not quick:
        rows.append(_scaling_row(conversations))
    return rows


#: Flushes of each size the scaling row takes the median of.
SCALING_ROUNDS = 3


def _scaling_row(conversations: Sequence[Any]) -> Row:
    """A flush of 4,000 messages against one of 1,000 (the conversations' turns one after
    another, again from the start when they run out), each on a fresh harness, medians of
    alternating samples: a flush's time should follow the messages it reads (goal: 4x)."""
    import tempfile

    from harnessmem import MemoryHarness

    said = [
        {"role": "user", "content": message["content"]}
        for conversation in conversations
        for session in conversation.sessions
        for message in session.messages
        if isinstance(message.get("content"), str)
    ]
    TokenCounter().count_text("warm up")  # the tokenizer loads once, outside the timings
    samples: dict[int, list[float]] = {1_000: [], 4_000: []}
    # A first flush loads the flush's modules; then the sizes take turns, 3 samples each.
    for count in (100, *[size for _ in range(SCALING_ROUNDS) for size in samples]):
        messages = (said * (count // max(len(said), 1) + 1))[:count]
        with (
            tempfile.TemporaryDirectory(prefix="bench-extractive-") as tmp,
            MemoryHarness.open(
                Path(tmp) / "ws", maintenance={"enabled": False}, plugins={"autoload": False}
            ) as harness,
        ):
            started = time.perf_counter()
            harness.flush(messages, session_id="long")
            if count in samples:
                samples[count].append(time.perf_counter() - started)
    seconds = {count: statistics.median(times) for count, times in samples.items()}
    return Row(
        "extractive",
        "offline flush of 4,000 messages, fresh harness",
        round(seconds[4_000], 3),
        "s",
        "the same for 1,000 messages",
        round(seconds[1_000], 3),
        notes=f"{len(said)} LoCoMo dev turns, repeated past the end; medians of "
        f"{SCALING_ROUNDS} flushes of each size, in turn; goal: at most 4x (linear)",
    )
