"""Working out one compaction: where to cut, what is dropped, what the summary stands for.

:func:`plan_compaction` turns the list about to be sent (after the truncate_args
pre-pass) into a :class:`Plan`: the cut (:func:`harnessmem.compaction._cutoff.choose_cut`, with
the tail bounded so that the result fits under the triggers or the overflow budget,
room left for the summary message), the dropped messages with their positions in the
conversation and their originals, and the previous summary the new one continues. It
reads no file and calls no model; :class:`harnessmem.compaction.ConversationCompactor`
carries the plan out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harnessmem.compaction._cutoff import choose_cut
from harnessmem.compaction._summary import (
    Anchor,
    build_anchor,
    first_user_text,
    last_user_text,
    parse_anchor,
)
from harnessmem.tokens import REPLY_PRIMING

if TYPE_CHECKING:
    from harnessmem.compaction._shrink import Originals
    from harnessmem.settings import CompactionSettings
    from harnessmem.tokens import TokenCounter

__all__ = ["Plan", "plan_compaction", "summary_tokens"]

Message = dict[str, Any]


@dataclass
class Plan:
    """One compaction being worked out."""

    head: int
    anchor: Anchor | None
    cut: int  # in the conversation (messages[head:])
    positions: list[int]  # conversation positions of the dropped raw messages
    dropped: list[Message]  # the dropped raw messages as sent
    originals: list[Message]  # the same, with truncated/masked/shrunk copies undone
    previous: str  # previous summary body ("" if none)
    covered: int  # conversation messages the previous summary stands for
    first_request: str | None
    limit: int | None  # token count the result must stay under
    forced: bool  # overflow recovery: the limit must be met


def summary_tokens(settings: CompactionSettings, limit: int | None) -> int:
    """The size bound of a summary: the setting, and a quarter of the token limit."""
    bound = settings.summary_max_tokens
    return min(bound, max(64, limit // 4)) if limit else bound


def plan_compaction(
    work: list[Message],
    head: int,
    budget: int | None,
    *,
    settings: CompactionSettings,
    counter: TokenCounter,
    log_path: str,
    memory: Anchor | None,
    originals: Originals,
) -> Plan:
    """The plan for ``work`` (``head`` pinned system messages); ``budget`` forces it.

    ``memory`` is the last summary made for this session, used when ``work`` carries
    no summary message (a caller that keeps sending its raw history); ``log_path`` is
    the session log the summary message will name.
    """
    conversation = work[head:]
    anchor = parse_anchor(conversation[0]) if conversation else None
    start = 1 if anchor else 0
    sums = counter.count_prefix_sums(work)
    conv_sums = [total - sums[head] for total in sums[head:]]
    limit = budget if budget is not None else (settings.trigger_tokens or None)
    memory = None if anchor else memory
    first_request = anchor.first_request if anchor else first_user_text(conversation)
    if first_request is None and memory is not None:
        first_request = memory.first_request
    max_tail_tokens = None
    if limit is not None:
        probe = build_anchor(
            covers=10**9,
            body="",
            log_path=log_path,
            first_request=first_request,
            latest_user=last_user_text(conversation[start:]),
        )
        reserve = counter.count_message(probe) + summary_tokens(settings, limit) + 2
        max_tail_tokens = limit - 1 - REPLY_PRIMING - sums[head] - reserve
    max_tail_messages = None
    if settings.trigger_messages and budget is None:
        max_tail_messages = settings.trigger_messages - head - 2
    cut = choose_cut(
        conversation,
        conv_sums,
        keep_messages=settings.keep_messages,
        keep_tokens=settings.keep_tokens,
        max_tail_messages=max_tail_messages,
        max_tail_tokens=max_tail_tokens,
    )
    covers = anchor.covers if anchor else 0
    dropped = conversation[start:cut] if cut > start else []
    positions = [covers + i for i in range(start, start + len(dropped))]
    if not anchor:
        positions = [i + 1 for i in range(len(dropped))]
    previous, covered = "", covers
    if anchor:
        previous = anchor.body
    elif memory is not None and memory.covers <= len(dropped):
        previous, covered = memory.body, memory.covers
    return Plan(
        head=head,
        anchor=anchor,
        cut=cut,
        positions=positions,
        dropped=dropped,
        originals=[originals.original(m) for m in dropped],
        previous=previous,
        covered=covered,
        first_request=first_request,
        limit=limit,
        forced=budget is not None,
    )
