"""What the flush sends its model: the new messages and the dedup reference.

The request itself is :func:`harnessmem.prompts.flush_request`'s, the builder the model
conformance suite and the benchmarks use too; this module chooses what goes into it. The
flush pays for every character it sends, on every flush of every conversation, so both
parts are kept to what fact extraction needs:

- the transcript (:func:`harnessmem.prompts.flush_conversation`), each message's day on
  its label where the messages span several days or are not from today (so that the
  model can write "yesterday" as the date it was); in its *lean* form
  (``flush.transcript = "lean"``, the default) JSON in tool results and tool-call
  arguments is compacted and long tool results are cut to their head and tail (their full
  text is in the session log or an eviction file already); user messages are kept whole
  up to a generous bound, since that is where most facts are said.
- :func:`related_reference` picks, from MEMORY.md and today's log, the entries that share
  the most content words with the new messages, within a character bound, instead of
  sending both files whole: the model needs the facts it might repeat, not all of them
  (exact repeats are dropped at write time anyway).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Final

from harnessmem import layout
from harnessmem.prompts import flush_conversation, flush_reference, flush_request

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from harnessmem.settings import FlushSettings, HarnessSettings

__all__ = ["dedup_reference", "flush_prompt", "related_reference", "render_transcript"]

Message = dict[str, Any]
#: Least score of a related entry: a shared word that at most four entries hold.
_MIN_SCORE: Final = 0.25


def render_transcript(
    messages: Sequence[Mapping[str, Any]],
    *,
    lean: bool = False,
    dates: Sequence[str | None] | None = None,
) -> str:
    """The messages as the flush model reads them, the full form by default
    (:func:`harnessmem.prompts.flush_conversation`); ``dates``: the day each was said, on
    its label (:func:`harnessmem.memory.grounding.transcript_dates`)."""
    return flush_conversation(messages, lean=lean, dates=dates)


def related_reference(text: str, transcript: str, limit: int) -> tuple[str, int]:
    """The lines of ``text`` (a memory file) most related to ``transcript``, within
    ``limit`` characters, in their order in the file; and how many entries were left out.

    An entry is a bullet line (``- ...``). Its score adds, for each content word it shares
    with the transcript (stemmed, stop words left out), one over the number of entries that
    hold the word: a shared name or identifier counts, a word half the entries use does not.
    Entries under ``_MIN_SCORE`` are not sent (they could hardly be repeated by the new
    facts), nor are headings (the model does not need them to avoid a repeat).
    """
    from harnessmem.backends.extractive import term_set

    entries = [
        (number, line)
        for number, line in enumerate(text.splitlines())
        if line.lstrip().startswith(("- ", "* "))
    ]
    if not entries or limit <= 0:
        return "", len(entries)
    wanted = term_set(transcript)
    terms = [term_set(line) for _, line in entries]
    counts = Counter(term for found in terms for term in found & wanted)
    scored = []
    for (number, line), found in zip(entries, terms, strict=True):
        score = sum(1 / counts[term] for term in found & wanted)
        if score >= _MIN_SCORE:
            scored.append((-score, number, line))
    scored.sort()
    chosen: list[tuple[int, str]] = []
    used = 0
    for _, number, line in scored:
        if used + len(line) + 1 > limit:
            continue
        chosen.append((number, line))
        used += len(line) + 1
    chosen.sort()
    return "\n".join(line for _, line in chosen), len(entries) - len(chosen)


def flush_prompt(
    settings: HarnessSettings,
    messages: Sequence[Mapping[str, Any]],
    transcript: str,
    reference: str,
    path: str,
    now: float,
) -> list[Message]:
    """The flush request for ``messages`` (rendered as ``transcript``) with ``reference``."""
    return flush_request(
        messages,
        today=layout.local_date(now, settings.workspace.timezone),
        log_path=path,
        template=settings.flush.prompt or None,
        lean=settings.flush.transcript == "lean",
        reference=reference,
        conversation=transcript,
    )


def dedup_reference(
    settings: FlushSettings, transcript: str, memory_text: str, today_text: str, path: str
) -> str:
    """The dedup reference for ``transcript`` ("" for none): with ``flush.reference =
    "related"`` the entries of MEMORY.md and today's log that relate to it, within
    ``flush.reference_chars`` in all; with ``"full"`` both files, each cut to it."""
    limit = settings.reference_chars
    if not limit:
        return ""
    if settings.reference == "related":
        memory, memory_left = related_reference(memory_text, transcript, limit)
        today, today_left = related_reference(today_text, transcript, limit - len(memory))
        return flush_reference(memory, today, log_path=path, unrelated=memory_left + today_left)
    return flush_reference(memory_text, today_text, log_path=path, max_chars=limit)
