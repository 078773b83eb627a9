"""Replaced facts on the offline default: does MEMORY.md keep only the current one?

The pairs of ``tests/data/replacements/own.jsonl`` (an earlier fact and a later one that
replaces it, written by us) and the unrelated facts of
``unrelated.jsonl`` (each with a text only it holds) go through a real harness on the
default offline set-up (the ``extractive`` model, the SQLite index; plugins not
autoloaded, the maintenance thread off) as a user would say them: one session tells the
earlier facts with the unrelated ones, a consolidation follows; a session 18 days later
tells the later facts, another consolidation follows. Then, in MEMORY.md:

- *replaced facts still current*: the share of pairs whose earlier fact is still a bullet
  of MEMORY.md (one holding 80% of its words of four letters or more, and not the later
  fact's; goal: at most 10%);
- *unrelated facts lost*: how many unrelated facts' texts are not in MEMORY.md (goal: 0);
- *later facts kept*: the share of pairs whose later fact made it into MEMORY.md.

Baseline in the same run: the same replay with replacement detection off (the pairs then
stay side by side, as before it was built).

The same three figures for the real pairs of ``tests/data/replacements/real.jsonl``
(sentences of ``../shared/data`` named by reference, :mod:`bench._replacement_labels`),
each replayed into the memory of its own owner (a tau-bench run, a LoCoMo sample, a
MemoryBank user) with the unrelated facts of that owner, in the order and on the days they
were said: each sentence as a message of its speaker (the agent's confirmations as the
assistant's; a field of the agent's list with the lines it hangs on: its list's lead-in
and the items it is nested in), a consolidation when the day changes; the pairs of split
``held-out-3`` (the last labelled; see the set's README for what was looked at) are
reported apart. Without the shared data these
rows are skipped, saying so.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench._flush_labels import SHARED
from bench._replacement_labels import RealSet, Said
from bench._replacement_labels import load as load_real
from bench._util import Row

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "replacements"
#: The days between the two sessions, as in issue 33's measure.
GAP_DAYS = 18


def load() -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The pairs and the unrelated facts."""

    def read(name: str) -> list[dict[str, str]]:
        lines = (DATA / name).read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    return read("own.jsonl"), read("unrelated.jsonl")


def _messages(texts: list[str], day: dt.datetime) -> list[dict[str, Any]]:
    """The user's statements, each acknowledged by the agent, a minute apart."""
    messages: list[dict[str, Any]] = []
    for number, text in enumerate(texts):
        moment = day + dt.timedelta(minutes=2 * number)
        stamp = moment.isoformat().replace("+00:00", "Z")
        messages.append({"role": "user", "content": text, "timestamp": stamp})
        messages.append({"role": "assistant", "content": "Noted.", "timestamp": stamp})
    return messages


def replay_pairs(
    root: Path, pairs: list[dict[str, str]], unrelated: list[dict[str, str]], detect: bool
) -> str:
    """MEMORY.md after both sessions (``detect``: replacement detection on)."""
    from harnessmem import MemoryHarness
    from harnessmem.replay import ReplayClock, replay

    first = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.UTC)
    later = first + dt.timedelta(days=GAP_DAYS)
    told = [p["earlier"] for p in pairs]
    mixed = [t for pair in zip(told, [u["text"] for u in unrelated], strict=False) for t in pair]
    mixed += told[len(unrelated) :]
    clock = ReplayClock()
    with (
        _detection(detect),
        MemoryHarness.open(
            root, clock=clock, maintenance={"enabled": False}, plugins={"autoload": False}
        ) as harness,
    ):
        replay(harness, _messages(mixed, first), session_id="s1", clock=clock, keep_dates=True)
        replay(
            harness,
            _messages([p["later"] for p in pairs], later),
            session_id="s2",
            clock=clock,
            keep_dates=True,
        )
        return harness.workspace.read_text("MEMORY.md")


@contextmanager
def _detection(on: bool) -> Iterator[None]:
    """Replacement detection as it is (``on``), or off: ``replaces`` always False, for the
    flush's and the offline consolidation's calls alike."""
    if on:
        yield
        return
    from unittest import mock

    from harnessmem.backends.extractive import _consolidate, _facts

    with (
        mock.patch.object(_facts, "replaces", return_value=False),
        mock.patch.object(_consolidate, "replaces", return_value=False),
    ):
        yield


def _share_row(name: str, found: list[Any], off: list[Any], total: int, about: str = "") -> Row:
    """A row of the share of ``total`` in ``found``, against detection off."""
    return Row(
        "replacement",
        name,
        round(len(found) / max(total, 1), 3),
        "share",
        baseline="replacement detection off",
        baseline_value=round(len(off) / max(total, 1), 3),
        notes=f"{about}{len(found)} of {total} (off: {len(off)})",
    )


def _words(text: str) -> set[str]:
    return {w.strip(".,;:!?'\"()").casefold() for w in text.split() if len(w) > 3} - _SAID_BY


#: Words the flush puts in or takes out when it words a user's sentence as a fact.
_SAID_BY = frozenset({"user", "user's", "the", "i'm", "i've"})


def _holds(bullet: set[str], fact: set[str]) -> bool:
    return bool(fact) and len(bullet & fact) >= 0.8 * len(fact)


def score(
    memory: str, pairs: list[dict[str, str]], unrelated: list[dict[str, str]]
) -> dict[str, Any]:
    """Which earlier facts are still a bullet of their own (one that holds most of the
    earlier fact's words and not the later's), which unrelated facts are gone, and which
    later facts are bullets."""
    bullets = [_words(line) for line in memory.splitlines() if line.lstrip().startswith("- ")]
    stale = [
        p
        for p in pairs
        if any(
            _holds(b, _words(p["earlier"])) and not _holds(b, _words(p["later"])) for b in bullets
        )
    ]
    lost = [u for u in unrelated if u["key"].casefold() not in memory.casefold()]
    kept = [p for p in pairs if any(_holds(b, _words(p["later"])) for b in bullets)]
    return {"stale": stale, "lost": lost, "kept": kept}


def _real_messages(said: list[Said]) -> list[dict[str, Any]]:
    """Each sentence as its speaker's message, answered (or prompted) by the other side; a
    field of the agent's list with the lead-in and the items it hangs on."""
    messages: list[dict[str, Any]] = []
    for fact in sorted(said, key=lambda f: f.when):
        stamp = fact.when.isoformat().replace("+00:00", "Z")
        text = "\n".join([*fact.context, fact.text])
        own: dict[str, Any] = {"role": fact.role, "content": text, "timestamp": stamp}
        if fact.name:
            own["name"] = fact.name
        if fact.role == "assistant":
            messages += [{"role": "user", "content": "Go on.", "timestamp": stamp}, own]
        else:
            messages += [own, {"role": "assistant", "content": "Noted.", "timestamp": stamp}]
    return messages


def replay_real(root: Path, real: RealSet, detect: bool) -> dict[str, str]:
    """Each owner's MEMORY.md after its sentences were told (``detect``: detection on)."""
    from harnessmem import MemoryHarness
    from harnessmem.replay import ReplayClock, replay

    told: dict[str, list[Said]] = {}
    for pair in real.pairs:
        told.setdefault(pair.earlier.owner, []).extend([pair.earlier, pair.later])
    for fact in real.unrelated:
        told.setdefault(fact.owner, []).append(fact)
    memories: dict[str, str] = {}
    with _detection(detect):
        for number, (owner, said) in enumerate(sorted(told.items())):
            clock = ReplayClock()
            with MemoryHarness.open(
                root / f"owner-{number}",
                clock=clock,
                maintenance={"enabled": False},
                plugins={"autoload": False},
            ) as harness:
                replay(harness, _real_messages(said), session_id="s1", clock=clock, keep_dates=True)
                # No MEMORY.md: the flush kept nothing of what was said.
                workspace = harness.workspace
                memories[owner] = (
                    workspace.read_text("MEMORY.md") if workspace.exists("MEMORY.md") else ""
                )
    return memories


def _terms(text: str) -> set[str]:
    """Stemmed content words (the flush rewords real sentences: "I like" -> "The user
    likes", "I don't" -> "the user doesn't"), without "user"."""
    from harnessmem.backends.extractive import term_set

    return {t.removesuffix("'s") for t in term_set(text)} - {"user"}


def score_real(memories: dict[str, str], real: RealSet) -> dict[str, Any]:
    """As :func:`score`, each pair and fact judged in its owner's MEMORY.md by stemmed
    content words (real sentences are reworded more than our own); an unrelated fact is
    lost when no bullet holds 80% of its words."""

    def bullets(owner: str) -> list[set[str]]:
        lines = memories.get(owner, "").splitlines()
        return [_terms(line) for line in lines if line.lstrip().startswith("- ")]

    stale = [
        p
        for p in real.pairs
        if any(
            _holds(b, _terms(p.earlier.text)) and not _holds(b, _terms(p.later.text))
            for b in bullets(p.earlier.owner)
        )
    ]
    lost = [
        f for f in real.unrelated if not any(_holds(b, _terms(f.text)) for b in bullets(f.owner))
    ]
    kept = [
        p
        for p in real.pairs
        if any(_holds(b, _terms(p.later.text)) for b in bullets(p.later.owner))
    ]
    return {"stale": stale, "lost": lost, "kept": kept}


#: A field of a list ("- **Cabin Class:** Economy", "- Current Cabin: Basic Economy"): a
#: fragment by the rule of tests/data/flush-labels/README.md, which the flush leaves out.
_LIST_FIELD = re.compile(r"^\s*(?:[-*]|\d+\.)?\s*\**[A-Z][\w ]{0,30}?\**\s*:\s*\**")


def real_rows() -> list[Row]:
    """The rows of the real pairs; none (and a note) without the shared data."""
    real = load_real()
    if not real.pairs:
        print(
            f"  bench replacement: real pairs skipped, shared data missing at {SHARED}",
            file=sys.stderr,
        )
        return []
    if real.missing or real.changed:
        print(
            f"  bench replacement: {len(real.missing)} references missing, "
            f"{len(real.changed)} changed",
            file=sys.stderr,
        )
    with tempfile.TemporaryDirectory(prefix="bench-replacement-real-") as tmp:
        ours = score_real(replay_real(Path(tmp) / "on", real, True), real)
        off = score_real(replay_real(Path(tmp) / "off", real, False), real)
    for pair in ours["stale"]:
        print(f"  bench replacement: real, still current: {pair.earlier.where}", file=sys.stderr)
    for fact in ours["lost"]:
        print(f"  bench replacement: real, unrelated lost: {fact.where}", file=sys.stderr)
    total = len(real.pairs)
    by_replacement = len([f for f in ours["lost"] if f not in off["lost"]])
    unseen = [p for p in real.pairs if p.split == "held-out-3"]
    unseen_stale = [p for p in ours["stale"] if p.split == "held-out-3"]
    unseen_off = [p for p in off["stale"] if p.split == "held-out-3"]
    return [
        _share_row(
            f"real pairs: replaced facts still current in MEMORY.md ({total} pairs)",
            ours["stale"],
            off["stale"],
            total,
        ),
        _share_row(
            f"real pairs of split held-out-3 ({len(unseen)}): still current",
            unseen_stale,
            unseen_off,
            len(unseen),
            "split held-out-3: ",
        ),
        Row(
            "replacement",
            f"real pairs: unrelated facts lost ({len(real.unrelated)} told beside them)",
            len(ours["lost"]),
            "facts",
            baseline="replacement detection off",
            baseline_value=len(off["lost"]),
            notes=f"lost by replacement (kept with detection off): {by_replacement}; the "
            "others are lost with detection off too (not written by the flush or merged); "
            f"{sum(1 for f in ours['lost'] if _LIST_FIELD.match(f.text))} of the lost are "
            "fields of an agent's list, which the flush labels' rule calls fragments",
        ),
        _share_row(
            "real pairs: later facts current in MEMORY.md", ours["kept"], off["kept"], total
        ),
    ]


def run(quick: bool) -> list[Row]:
    """Replaced facts still current, unrelated facts lost, against detection off."""
    pairs, unrelated = load()
    with tempfile.TemporaryDirectory(prefix="bench-replacement-") as tmp:
        ours = score(replay_pairs(Path(tmp) / "on", pairs, unrelated, True), pairs, unrelated)
        off = score(replay_pairs(Path(tmp) / "off", pairs, unrelated, False), pairs, unrelated)
    for pair in ours["stale"]:
        print(f"  bench replacement: still current: {pair['earlier']}", file=sys.stderr)
    for fact in ours["lost"]:
        print(f"  bench replacement: unrelated fact lost: {fact['text']}", file=sys.stderr)
    total = len(pairs)
    return [
        _share_row(
            f"replaced facts still current in MEMORY.md ({total} pairs, {GAP_DAYS} days apart)",
            ours["stale"],
            off["stale"],
            total,
        ),
        Row(
            "replacement",
            f"unrelated facts lost ({len(unrelated)} told beside the pairs)",
            len(ours["lost"]),
            "facts",
            baseline="replacement detection off",
            baseline_value=len(off["lost"]),
        ),
        Row(
            "replacement",
            "later facts current in MEMORY.md",
            round(len(ours["kept"]) / total, 3),
            "share",
            notes=f"{len(ours['kept'])} of {total}",
        ),
        *real_rows(),
    ]
