"""Per-turn ``Session.before_reasoning`` when nothing needs compacting, against a full recount.

Each turn an agent loop appends a message and calls ``before_reasoning`` with the whole
conversation. Below the triggers that call must stay cheap: it runs the eviction sweep and
the compaction plugin, which counts the conversation's tokens to check ``trigger_tokens``.
This bench drives a real harness (default plugins: eviction, compaction, flush, redaction;
compaction enabled, its triggers set above the conversation so that it never fires) through
200, 1,000 and 5,000-message conversations (tau-bench airline runs concatenated, cycled
past their 3,916 messages) and times one turn: append one new tool message (a real tool
output made unique) and call ``before_reasoning`` on the list it returned last turn.
Turns and recounts are sampled in alternation (medians of 15 samples of 5 turns each).

Baseline, same run: one full tiktoken recount of the same conversation (every text of every
message encoded afresh, the framing of ``TokenCounter``), the least a loop without an
incremental counter must do before each call. The ratio staying flat and far below 1 as the
conversation grows is what shows the turn is incremental: only the new message is encoded,
and only the messages that changed since the previous turn are checked, swept and counted.
The session compares the list with its copy of the previous call's once (``ctx.changes``);
the eviction sweep and the compactor follow that comparison instead of redoing it. What
still grows with the length is the session's one C-level comparison (the price of seeing a
change made in place at any depth; slower right after the recount has cooled the caches) and
a few list copies and identity comparisons of the list.
"""

from __future__ import annotations

import itertools
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._util import Row, paired_medians
from bench.bench_tokens import SIZES, TAU_FILE, _full_recount, _pool
from harnessmem import MemoryHarness
from harnessmem.tokens import TokenCounter

Message = dict[str, Any]


def run(quick: bool) -> list[Row]:
    """Rows of one ``before_reasoning`` turn at each conversation size."""
    if not TAU_FILE.is_file():
        print(f"bench turn: skipped, tau-bench data missing at {TAU_FILE}", file=sys.stderr)
        return []
    repeat, number = (5, 3) if quick else (15, 5)
    pool = _pool(max(SIZES))
    tool_outputs = [m for m in pool if m["role"] == "tool" and len(m["content"]) > 200]
    counter = TokenCounter()
    import tiktoken  # the counter loads it from litellm's bundled files on first use

    counter.count_text("warm up")
    encoding = tiktoken.get_encoding(counter.encoding_name)
    turn = itertools.count()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-turn-") as tmp:
        for size in SIZES:
            conversation: list[Message] = [dict(m) for m in pool[:size]]
            tokens = _full_recount(encoding, conversation)
            # Triggers well above what the conversation reaches while it is timed.
            compaction = {"trigger_messages": 10 * size, "trigger_tokens": 10 * tokens}
            with MemoryHarness.open(
                Path(tmp) / f"ws-{size}",
                compaction=compaction,
                maintenance={"enabled": False},
            ) as harness:
                session = harness.session(f"turn-{size}")
                state = {"messages": session.before_reasoning(conversation)}  # counted last turn

                def next_turn(
                    state: dict[str, list[Message]] = state, session: Any = session
                ) -> None:
                    i = next(turn)
                    source = tool_outputs[i % len(tool_outputs)]
                    messages = state["messages"]
                    messages.append({**source, "content": f"{source['content']} [turn {i}]"})
                    state["messages"] = session.before_reasoning(messages)

                per_turn, full = paired_medians(
                    next_turn,
                    lambda state=state: _full_recount(encoding, state["messages"]),
                    repeat=repeat,
                    number=number,
                )
                grown = state["messages"]
                if len(grown) != size + repeat * number or any(
                    m.get("name") == "__compaction_summary__" for m in grown
                ):
                    raise AssertionError("compaction fired or the list changed: not a plain turn")
                rows.append(
                    Row(
                        bench="turn",
                        name=f"before_reasoning per turn, {size:,} msgs, below the triggers",
                        value=per_turn,
                        unit="s",
                        baseline="full tiktoken recount",
                        baseline_value=full,
                        notes=(
                            f"{tokens:,} tokens; compaction on (triggers {10 * size:,} msgs / "
                            f"{10 * tokens:,} tokens), eviction sweep, default plugins"
                        ),
                    )
                )
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
