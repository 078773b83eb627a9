"""What the offline flush keeps, judged against our own labels (``tests/data/flush-labels``).

486 sentences of the shared transcripts (SWE-agent, tau-bench, LoCoMo, MemoryBank), each
labelled keep or drop by the written rule of the labels' README; the extended set adds the
136 sentences of seven more conversations where the assistant recommends things
(``advice.jsonl``: six MemoryBank days, one tau-bench run), reported apart. Each
conversation goes to the default ``extractive`` backend as one flush request (an empty
reference); a sentence counts as kept when a written bullet holds at least half of its
content words and no other sentence of the conversation holds more. Precision:
labelled-keep among kept; recall: kept among labelled-keep. Baseline, same run: every user
sentence kept (what a flush that only drops the assistant's side would write).
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


def _rows(labelled: labels.LabelledSet, which: str, about: str) -> list[Row]:
    """Precision and recall of the flush on one labelled set, the user-only baseline beside."""
    if labelled.missing or labelled.changed:
        print(
            f"bench facts ({about}): {len(labelled.missing)} references missing, "
            f"{len(labelled.changed)} changed (left out)",
            file=sys.stderr,
        )
    flush = labels.evaluate(labelled, labels.extractive_flush)
    base = labels.evaluate(labelled, _user_only)
    tp, kept, keep = flush.counts()
    print(
        f"bench facts ({about}): {len(labelled.labels)} labelled sentences, {keep} keep; "
        f"the flush kept {kept}, {tp} of them labelled keep",
        file=sys.stderr,
    )
    baseline = "every user sentence kept"
    return [
        Row(
            "facts",
            f"flush precision ({which})",
            flush.precision(),
            "share",
            baseline,
            base.precision(),
            notes=f"{tp} of {kept} kept sentences labelled keep",
        ),
        Row(
            "facts",
            f"flush recall ({which})",
            flush.recall(),
            "share",
            baseline,
            base.recall(),
            notes=f"{tp} of {keep} keep sentences kept",
        ),
    ]


def run(quick: bool) -> list[Row]:
    """Precision and recall of the extractive flush on the labelled set, and on the set
    extended with conversations where the assistant recommends things."""
    if not labels.SHARED.is_dir():
        print(f"bench facts: skipped, shared data missing at {labels.SHARED}", file=sys.stderr)
        return []
    return [
        *_rows(labels.load(files=labels.ORIGINAL), "labelled set", "original"),
        *_rows(
            labels.load(files=labels.EXTENDED),
            "labelled set + assistant recommendations",
            "extended",
        ),
    ]
