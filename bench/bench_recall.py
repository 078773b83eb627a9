"""Recall before replying on LoCoMo dev: does a question's evidence reach the context?

Each LoCoMo conversation is written as daily logs (as ``bench_locomo`` writes them) and each
question with usable evidence becomes one model call, as ``before_reasoning`` returns it:

- **off** (``context.recall = false``, the default): what the model sees without recall:
  the system message (one line of instructions and ``system_context()``, the MEMORY.md
  block; this replay has no MEMORY.md, so it is the empty-memory placeholder), the
  conversation's last session as the chat history (its turns alternating user and
  assistant, ``Speaker: text``: the recent context a live conversation would still have),
  then the question as the latest user message;
- **on** (``context.recall = true``, default ``recall_hits`` and ``recall_max_tokens``):
  the same messages through ``before_reasoning``, which adds the ``<memory_recall>`` block
  to the system message.

A question's evidence *reaches the context* when the text of an evidence turn
(``Speaker: text``, whitespace collapsed) is somewhere in the messages; a turn cut by the
block's token bound does not count. Scores: the share of questions with any evidence turn in
the context, with all of them, and the share of evidence turns; the tokens the block adds
(tiktoken ``cl100k_base`` as the harness counts) against the tokens of the off context.

Each question is a fresh session (no memory of what earlier questions recalled). A second
pass asks all questions of a conversation in one session, in order, so the rule "a hit shown
for an earlier user message is not shown again" applies: what that rule costs here.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench._util import Row
from bench.bench_locomo import (
    CATEGORIES,
    DATA,
    Repairs,
    _sessions,
    _turn_text,
    clean_evidence,
    write_workspace,
)

INSTRUCTIONS = "You are a helpful assistant who remembers earlier conversations."
_SPACE = re.compile(r"\s+")


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _context_text(messages: list[dict[str, Any]]) -> str:
    return _normal("\n".join(str(m.get("content") or "") for m in messages))


def _history(sample: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation's last session as chat messages (first speaker as the user)."""
    _, _, turns = _sessions(sample["conversation"])[-1]
    first = turns[0]["speaker"]
    return [
        {"role": "user" if turn["speaker"] == first else "assistant", "content": _turn_text(turn)}
        for turn in turns
    ]


class Tally:
    """Per-category sums of one condition."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], list[float]] = defaultdict(list)

    def add(self, category: str, metric: str, value: float) -> None:
        self.values[(category, metric)].append(value)
        self.values[("all", metric)].append(value)

    def mean(self, category: str, metric: str) -> float:
        values = self.values[(category, metric)]
        return sum(values) / len(values) if values else 0.0

    def count(self, category: str, metric: str) -> int:
        return len(self.values[(category, metric)])


def _score(tally: Tally, category: str, context: str, evidence: list[str]) -> None:
    found = [text for text in evidence if _normal(text) in context]
    tally.add(category, "any", float(bool(found)))
    tally.add(category, "all", float(len(found) == len(evidence)))
    tally.add(category, "turns", len(found) / len(evidence))


def evaluate(data: list[dict[str, Any]]) -> dict[str, Any]:
    """The tallies of off, on (fresh session per question) and on (one session)."""
    from harnessmem import MemoryHarness
    from harnessmem.tokens import TokenCounter

    counter = TokenCounter()
    off, on, chained = Tally(), Tally(), Tally()
    repairs = Repairs()
    seconds, calls = 0.0, 0
    with tempfile.TemporaryDirectory(prefix="bench-recall-") as tmp:
        for sample in data:
            root = Path(tmp) / sample["sample_id"] / "ws"
            turn_at = write_workspace(root, sample)
            known = set(turn_at.values())
            text_of = {
                turn["dia_id"]: _turn_text(turn)
                for _, _, turns in _sessions(sample["conversation"])
                for turn in turns
            }
            history = _history(sample)
            with MemoryHarness.open(
                root,
                context={"recall": True},
                compaction={"enabled": False},
                maintenance={"enabled": False},
                plugins={"autoload": False},
            ) as harness:
                harness.reindex()
                one_session = harness.session(f"{sample['sample_id']}-all")
                for number, qa in enumerate(sample["qa"]):
                    question = str(qa["question"])
                    ids = clean_evidence(qa.get("evidence") or [], known, question, repairs)
                    if not ids:
                        repairs.skipped_questions.append(f"{sample['sample_id']}: {question!r}")
                        continue
                    evidence = [text_of[i] for i in sorted(ids)]
                    category = CATEGORIES.get(int(qa["category"]), str(qa["category"]))
                    session = harness.session(f"{sample['sample_id']}-q{number}")
                    system = INSTRUCTIONS + "\n\n" + session.system_context()
                    messages = [
                        {"role": "system", "content": system},
                        *history,
                        {"role": "user", "content": question},
                    ]
                    _score(off, category, _context_text(messages), evidence)
                    off.add(category, "tokens", counter.count_messages(messages))
                    started = time.perf_counter()
                    recalled = session.before_reasoning(messages)
                    seconds += time.perf_counter() - started
                    calls += 1
                    _score(on, category, _context_text(recalled), evidence)
                    added = counter.count_messages(recalled) - counter.count_messages(messages)
                    on.add(category, "tokens", added)
                    on.add(category, "with block", float(recalled[0] != messages[0]))
                    again = one_session.before_reasoning(messages)
                    _score(chained, category, _context_text(again), evidence)
                    chained.add(
                        category,
                        "tokens",
                        counter.count_messages(again) - counter.count_messages(messages),
                    )
    return {
        "off": off,
        "on": on,
        "chained": chained,
        "repairs": repairs,
        "ms": seconds / max(1, calls) * 1e3,
    }


def run(quick: bool) -> list[Row]:
    """Evidence in context with recall off and on, and the tokens the block adds."""
    if not DATA.is_file():
        print(f"bench recall: skipped, LoCoMo data missing at {DATA}", file=sys.stderr)
        return []
    data = json.loads(DATA.read_text(encoding="utf-8"))
    if quick:
        data = data[:1]
    result = evaluate(data)
    off, on, chained = result["off"], result["on"], result["chained"]
    questions = off.count("all", "any")
    print(
        f"   {questions} questions ({len(result['repairs'].skipped_questions)} skipped: no "
        f"usable evidence); before_reasoning with recall {result['ms']:.2f} ms each"
    )
    print(f"   {'category':<12} {'n':>4}  {'metric':<6} {'off':>6} {'on':>6} {'1 session':>9}")
    note = (
        f"LoCoMo dev ({len(data)} conversations); off: system + MEMORY.md block + last "
        "session + question; on: plus the recall block (3 hits, 400 tokens)"
    )
    rows: list[Row] = []
    for category in ["all", *CATEGORIES.values()]:
        n = off.count(category, "any")
        for metric, label in (
            ("any", "questions with evidence in context"),
            ("all", "questions with all evidence in context"),
            ("turns", "evidence turns in context"),
        ):
            before, after = off.mean(category, metric), on.mean(category, metric)
            print(
                f"   {category:<12} {n:>4}  {metric:<6} {before:>6.3f} {after:>6.3f} "
                f"{chained.mean(category, metric):>9.3f}"
            )
            if category != "all" and metric != "any":
                continue
            rows.append(
                Row(
                    bench="recall",
                    name=f"{label}, recall on, {category} ({n} questions)",
                    value=after,
                    unit="",
                    baseline="recall off",
                    baseline_value=before,
                    notes=note + "; higher is better",
                )
            )
    rows.append(
        Row(
            bench="recall",
            name="questions with evidence in context, recall on, one session for all questions",
            value=chained.mean("all", "any"),
            unit="",
            baseline="recall on, a session per question",
            baseline_value=on.mean("all", "any"),
            notes="hits shown for an earlier question are not shown again",
        )
    )
    tokens, base = on.mean("all", "tokens"), off.mean("all", "tokens")
    print(
        f"   tokens: off context {base:.0f} per question; the block adds {tokens:.1f} "
        f"(a block in {on.mean('all', 'with block'):.1%} of the questions); one session "
        f"{chained.mean('all', 'tokens'):.1f}"
    )
    rows.append(
        Row(
            bench="recall",
            name="tokens the recall block adds per question (mean)",
            value=tokens,
            unit="tokens",
            baseline="tokens of the off context",
            baseline_value=base,
            notes=f"{on.mean('all', 'with block'):.1%} of the questions got a block",
        )
    )
    rows.append(
        Row(
            bench="recall",
            name="before_reasoning with recall on (search and block)",
            value=result["ms"],
            unit="ms",
            notes="per question, over the fresh-session pass",
        )
    )
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
