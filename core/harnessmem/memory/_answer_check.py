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
    stamp, ``- fact (2026-11-20)``). A bullet of the answer with neither gets the day of
    the input fact whose words it holds the most of (at least ``DATE_MATCH_SHARE`` of
    them; the newest such day); a bullet that matches no input fact keeps no date rather
    than a made-up one. Where every bullet of a run between two headings gets the same
    day, one day heading goes above the run (``### 2026-11-20`` under ``## People``): a
    stamp on each would cost about 8 tokens a bullet in every system prompt. Elsewhere
    each such bullet gets a stamp. The offline consolidation keeps its dates itself:
    nothing changes.
    """
    facts = _dated_facts(prior, segments)
    if not facts:
        return candidate
    lines = candidate.splitlines()
    days = mf.heading_days(lines)
    found: dict[int, str | None] = {}  # bullet line -> its day, for bullets without one
    for number, (line, heading) in enumerate(zip(lines, days, strict=True)):
        if line.startswith("#") or heading or not line.lstrip().startswith(("- ", "* ")):
            continue
        if not mf.DAY_STAMP.search(line):
            found[number] = _best_day(mf.significant_words(line), facts)
    out: list[str] = []
    for start, end, level in _runs(lines):
        run = [n for n in range(start, end) if lines[n].strip()]
        wanted = {found.get(n, "") for n in run}  # "": a line with a day, or no bullet
        depth = max(2, level + 1)
        # The heading must end where the run does: at the next heading, none deeper.
        closes = end == len(lines) or mf.heading_level(lines[end]) <= depth
        if len(run) > 1 and depth <= 6 and closes and len(wanted) == 1 and not {"", None} & wanted:
            out += [*lines[start : run[0]], f"{'#' * depth} {wanted.pop()}", *lines[run[0] : end]]
            continue
        for number in range(start, end):
            day = found.get(number)
            out.append(f"{lines[number].rstrip()} ({day})" if day else lines[number])
    return "\n".join(out) + ("\n" if candidate.endswith("\n") else "")


def _best_day(words: set[str], facts: list[tuple[set[str], str]]) -> str | None:
    best: tuple[float, str] | None = None
    for own, date in facts:
        if len(own) < 2:
            continue
        share = len(own & words) / len(own)
        if share >= DATE_MATCH_SHARE and (best is None or (share, date) > best):
            best = (share, date)
    return best[1] if best is not None else None


def _runs(lines: Sequence[str]) -> list[tuple[int, int, int]]:
    """``(start, end, level)`` of each stretch of lines: a heading line alone, or the lines
    between two headings with the level of the heading above them (0 at the top)."""
    runs: list[tuple[int, int, int]] = []
    start, level = 0, 0
    for number, line in enumerate(lines):
        heading = mf.heading_level(line)
        if heading:
            if number > start:
                runs.append((start, number, level))
            runs.append((number, number + 1, level))
            start, level = number + 1, heading
    if start < len(lines):
        runs.append((start, len(lines), level))
    return runs


def unreplaced(lost: list[str], segments: Sequence[Segment]) -> list[str]:
    """The facts of ``lost`` that no new entry replaces
    (:func:`harnessmem.backends.extractive.replaces`: the same thing, a change said)."""
    if not lost:
        return lost
    from harnessmem.backends.extractive import replaces

    newer = [line for s in segments for line in mf.entry_lines(s.text)]
    return [old for old in lost if not any(replaces(new, old) for new in newer)]
