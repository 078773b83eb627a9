"""Per-turn token counting: ``TokenCounter.count_messages`` against a full tiktoken recount.

An agent recounts its whole conversation before every model call. The counter
caches per message, so after one message was appended only that message is
encoded; the baseline encodes every message's texts afresh with the same
tiktoken encoding (the raw operation a counter without a cache performs).
Conversations are tau-bench airline runs concatenated (cycled past their 3,916
messages for the 5,000-message case).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench._util import Row, paired_medians
from harnessmem.tokens import TokenCounter

# The shared data folder sits beside the checkout; SHARED_DATA_DIR points elsewhere.
TAU = (
    Path(
        os.environ.get("SHARED_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    / "tau-bench"
)
TAU_FILE = TAU / "gpt-4o-airline-dev.json"
SIZES = (200, 1000, 5000)


def _pool(size: int) -> list[dict[str, Any]]:
    runs = json.loads(TAU_FILE.read_text(encoding="utf-8"))
    messages = [m for run in runs for m in run["traj"]]
    # Copies, so the cycled part holds distinct dicts as a real conversation would.
    return [dict(m) for m in itertools.islice(itertools.cycle(messages), size)]


def _full_recount(encoding: Any, messages: Sequence[Mapping[str, Any]]) -> int:
    """Baseline: encode every text of every message, no cache (same framing as the counter)."""
    encode = encoding.encode_ordinary
    total = 3
    for message in messages:
        total += 3 + len(encode(message["role"]))
        for key in ("content", "name", "tool_call_id"):
            if message.get(key):
                total += len(encode(message[key])) + (key == "name")
        for call in message.get("tool_calls") or ():
            function = call["function"]
            total += 3 + len(encode(function["name"])) + len(encode(function["arguments"]))
    return total


def run(quick: bool) -> list[Row]:
    """Rows for per-turn (incremental) and cold counts at several conversation sizes."""
    if not TAU_FILE.is_file():
        print(f"bench tokens: skipped, tau-bench data missing at {TAU_FILE}", file=sys.stderr)
        return []
    repeat = 5 if quick else 15
    pool = _pool(max(SIZES) + 1)
    tool_outputs = [m for m in pool if m["role"] == "tool" and len(m["content"]) > 200]
    counter = TokenCounter()
    if counter.backend != "tiktoken":
        print("bench tokens: tiktoken unavailable; figures are for the estimate", file=sys.stderr)
    import tiktoken  # the counter has just loaded it from litellm's bundled files

    encoding = tiktoken.get_encoding(counter.encoding_name)
    rows: list[Row] = []
    turn = itertools.count()

    for size in SIZES:
        counter = TokenCounter()
        conversation = pool[:size]
        counter.count_messages(conversation)  # the conversation so far was counted last turn

        def next_turn(
            conversation: list[dict[str, Any]] = conversation, counter: TokenCounter = counter
        ) -> None:
            # A real tool output made unique, so it misses the cache as a new message does.
            i = next(turn)
            source = tool_outputs[i % len(tool_outputs)]
            conversation.append({**source, "content": f"{source['content']} [turn {i}]"})
            counter.count_messages(conversation)

        incremental, full = paired_medians(
            next_turn,
            lambda c=conversation: _full_recount(encoding, c),
            repeat=repeat,
            number=3,
        )
        rows.append(
            Row(
                bench="tokens",
                name=f"per-turn count, {size} msgs",
                value=incremental,
                unit="s",
                baseline="full tiktoken recount",
                baseline_value=full,
                notes=f"one new tool message appended per turn; backend {counter.backend}",
            )
        )

    conversation = pool[:1000]
    # Same figure both ways, or the comparison would be between different work.
    if _full_recount(encoding, conversation) != TokenCounter().count_messages(conversation):
        raise AssertionError("baseline and counter disagree on the token count")
    cold, full = paired_medians(
        lambda: TokenCounter().count_messages(conversation),
        lambda: _full_recount(encoding, conversation),
        repeat=repeat,
    )
    rows.append(
        Row(
            bench="tokens",
            name="cold count, 1000 msgs (empty cache)",
            value=cold,
            unit="s",
            baseline="full tiktoken recount",
            baseline_value=full,
            notes="first count of a conversation: key building and caching on top of encoding",
        )
    )
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
