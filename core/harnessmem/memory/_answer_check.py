"""What a consolidation model's answer must keep: every prior fact (unless a newer entry
replaces it) and every date, checked before MEMORY.md is replaced."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from harnessmem.memory import files as mf
from harnessmem.memory._watermark import Segment

__all__ = ["KEPT_WORD_SHARE", "entry_loss", "restore_dates", "unreplaced", "unwrap"]

#: A prior entry counts as kept when this share of its words is still in the new file.
KEPT_WORD_SHARE = 0.6


def unwrap(text: str) -> str:
    """The answer without a code fence around the whole of it."""
    lines = text.strip().splitlines()
    if len(lines) >= 2 and lines[0].lstrip().startswith(("```", "~~~")):
        closed = lines[-1].strip() in ("```", "~~~")
        lines = lines[1:-1] if closed else lines[1:]
    return "\n".join(lines).strip()


def entry_loss(prior: str, candidate: str) -> tuple[int, list[str]]:
    """How many prior entries are judged, and those the candidate lost.

    A model merges and rephrases, so an entry counts as kept when most
    (``KEPT_WORD_SHARE``) of its distinctive words appear in the new text. Distinctive:
    words that are not in a quarter or more of the prior entries ("user", "prefers" say
    little about which fact it is). Entries of fewer than two words are too short to judge.
    """
    words = mf.significant_words(candidate)
    entries = [own for own in map(mf.significant_words, mf.entry_lines(prior)) if len(own) >= 2]
    frequency: Counter[str] = Counter(word for own in entries for word in own)
    common = {w for w, n in frequency.items() if n > 1 and n * 4 >= len(entries)}
    lost = []
    for line, own in zip(
        (line for line in mf.entry_lines(prior) if len(mf.significant_words(line)) >= 2),
        entries,
        strict=True,
    ):
        distinctive = own - common or own
        if len(distinctive & words) / len(distinctive) < KEPT_WORD_SHARE:
            lost.append(line)
    return len(entries), lost


_DAY = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")
#: Share of a fact's words an answer's bullet must hold to take that fact's date.
DATE_MATCH_SHARE = 0.6


def _dated_facts(prior: str, segments: Sequence[Segment]) -> list[tuple[set[str], str]]:
    """The input's facts with the day each was learned: MEMORY.md's (own stamp, or the
    day heading that encloses it) and the new entries' (their log's day)."""
    facts: list[tuple[set[str], str]] = []
    lines = prior.splitlines()
    for line, heading in zip(lines, mf.heading_days(lines), strict=True):
        if line.startswith("#"):
            continue
        stamp = mf.DAY_STAMP.search(line)
        date = stamp.group(1) if stamp else heading
        if line.strip() and date:
            facts.append((mf.significant_words(line), date))
    for segment in segments:
        day = _DAY.search(segment.path)
        if day is None:
            continue
        for line in mf.entry_lines(segment.text):
            facts.append((mf.significant_words(line), day.group(1)))
    return facts


def restore_dates(candidate: str, prior: str, segments: Sequence[Segment]) -> str:
    """A model's new MEMORY.md with the dates it lost put back.

    Facts carry the day they were learned (a day heading that encloses them, or a
    stamp, ``- fact (2026-11-20)``). A bullet of the answer with neither gets the stamp of
    the input fact whose words it holds the most of (at least ``DATE_MATCH_SHARE`` of
    them; the newest such day); a bullet that matches no input fact keeps no date rather
    than a made-up one. The offline consolidation keeps its dates itself: nothing changes.
    """
    facts = _dated_facts(prior, segments)
    if not facts:
        return candidate
    lines = candidate.splitlines()
    for number, (line, heading) in enumerate(zip(lines, mf.heading_days(lines), strict=True)):
        if line.startswith("#"):
            continue
        if heading or not line.lstrip().startswith(("- ", "* ")) or mf.DAY_STAMP.search(line):
            continue
        words = mf.significant_words(line)
        best: tuple[float, str] | None = None
        for own, date in facts:
            if len(own) < 2:
                continue
            share = len(own & words) / len(own)
            if share >= DATE_MATCH_SHARE and (best is None or (share, date) > best):
                best = (share, date)
        if best is not None:
            lines[number] = f"{line.rstrip()} ({best[1]})"
    return "\n".join(lines) + ("\n" if candidate.endswith("\n") else "")


def unreplaced(lost: list[str], segments: Sequence[Segment]) -> list[str]:
    """The facts of ``lost`` that no new entry replaces
    (:func:`harnessmem.backends.extractive.replaces`: the same thing, a change said)."""
    if not lost:
        return lost
    from harnessmem.backends.extractive import replaces

    newer = [line for s in segments for line in mf.entry_lines(s.text)]
    return [old for old in lost if not any(replaces(new, old) for new in newer)]
