"""What the offline flush keeps, judged against our own labels (``tests/data/flush-labels``).

486 sentences of the shared transcripts (SWE-agent, tau-bench, LoCoMo, MemoryBank), each
labelled keep or drop by the written rule of the labels' README. Each conversation goes to
the default ``extractive`` backend as one flush request (an empty reference); a sentence
counts as kept when a written bullet holds at least half of its content words and no other
sentence of the conversation holds more. Precision: labelled-keep among kept; recall: kept
among labelled-keep. Baseline, same run: every user sentence kept (what a flush that only
drops the assistant's side would write).
"""

from __future__ import annotations

import sys
from typing import Any

from bench import _flush_labels as labels
from bench._util import Row


def _user_only(messages: list[dict[str, Any]]) -> str:
    lines = []
    for message in messages:
        if message.get("role") == "user":
            lines += [f"- {s}" for s in labels.label_sentences(labels.message_text(message))]
    return "\n".join(lines)


def run(quick: bool) -> list[Row]:
    """Precision and recall of the extractive flush on the labelled set."""
    if not labels.SHARED.is_dir():
        print(f"bench facts: skipped, shared data missing at {labels.SHARED}", file=sys.stderr)
        return []
    labelled = labels.load()
    if labelled.missing or labelled.changed:
        print(
            f"bench facts: {len(labelled.missing)} references missing, "
            f"{len(labelled.changed)} changed (left out)",
            file=sys.stderr,
        )
    flush = labels.evaluate(labelled, labels.extractive_flush)
    base = labels.evaluate(labelled, _user_only)
    tp, kept, keep = flush.counts()
    print(
        f"bench facts: {len(labelled.labels)} labelled sentences, {keep} keep; "
        f"the flush kept {kept}, {tp} of them labelled keep",
        file=sys.stderr,
    )
    baseline = "every user sentence kept"
    return [
        Row(
            "facts",
            "flush precision (labelled set)",
            flush.precision(),
            "share",
            baseline,
            base.precision(),
            notes=f"{tp} of {kept} kept sentences labelled keep",
        ),
        Row(
            "facts",
            "flush recall (labelled set)",
            flush.recall(),
            "share",
            baseline,
            base.recall(),
            notes=f"{tp} of {keep} keep sentences kept",
        ),
    ]
