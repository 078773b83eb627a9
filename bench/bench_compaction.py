"""Token economics of compaction: the tau-bench replay with and without the harness.

All 150 tau-bench airline runs are concatenated into one session (plus a synthetic turn
of three parallel tool calls every five runs, as in the acceptance test) and replayed
through an agent loop: before each assistant message the loop calls
``before_reasoning`` and "sends" what it returns; when the agent's turn ends (the next
message is the user's) it calls ``after_call``, which runs the per-call memory flush.
The model is a ``ScriptedModel`` whose answers have a realistic size: a summary of about
250 words built from the request, and one fact bullet per flush.

Reported per configuration (the two of the acceptance test):

- tokens sent to the agent's model, summed over every call, with the harness; the
  baseline is the same loop without it (the whole conversation so far at every call);
- upkeep: the input tokens of every summary and flush call the harness made, against
  the tokens sent with the harness (the ratio is the upkeep's share).

Token counts are the harness's own ``TokenCounter`` (tiktoken ``o200k_base``), tool
schemas excluded. ``--quick`` replays the first 30 runs.

A second part replays the same stream with ``messages 30 / keep 10`` and summarisers that
misbehave as real ones do: one that answers in inline labels (``SESSION INTENT: ...``),
one that never follows the format, and one whose every call fails. For each it reports
the largest context sent (conversation messages, against the trigger) and how often the
summariser was asked (against the model calls), next to the well-behaved one.

The run also returns the context size at every model call, with each configuration and
without the harness, as a ``Series``: a full run draws it to ``docs/img/context-tokens.png``.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._util import Row, Series
from harnessmem import MemoryHarness
from harnessmem.errors import ModelUnavailableError
from harnessmem.testing import ScriptedModel
from harnessmem.tokens import TokenCounter

TAU = (
    Path(
        os.environ.get("SHARED_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    / "tau-bench"
    / "gpt-4o-airline-dev.json"
)
CONFIGS = {
    "messages 30 / keep 10": {"trigger_messages": 30, "keep_messages": 10, "trigger_tokens": 0},
    "tokens 4,000 / keep 10": {"trigger_messages": 0, "keep_messages": 10, "trigger_tokens": 4_000},
}
Message = dict[str, Any]


def stream(runs: list[dict[str, Any]]) -> list[Message]:
    """The runs concatenated, with a 3-parallel-call turn every 5 runs (results shuffled)."""
    rng = random.Random(42)
    out: list[Message] = []
    for number, run in enumerate(runs):
        out.extend(dict(m) for m in run["traj"])
        if number % 5 == 0:
            ids = [f"parallel-{number}-{k}" for k in range(3)]
            calls = [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": "get_flight_status", "arguments": json.dumps({"id": i})},
                }
                for i in ids
            ]
            results = [{"role": "tool", "tool_call_id": i, "content": f"{i}: on time"} for i in ids]
            rng.shuffle(results)
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            out.extend(results)
            out.append({"role": "assistant", "content": "All three flights are on time."})
    return out


def _reply(messages: list[Message], purpose: str) -> str:
    """Summaries of ~250 words from the request's user lines; one fact per flush."""
    request = str(messages[-1].get("content") or "")
    users = re.findall(r"^\[user\]: (.+)$", request, flags=re.MULTILINE)
    if purpose == "flush":
        return f"- The user said: {users[-1][:200]}" if users else "NO_REPLY"
    words = " ".join(users[-12:]).split()[:220]
    body = " ".join(words) or "None"
    return (
        f"## SESSION INTENT\n{body[:300]}\n## SUMMARY\n{body}\n"
        "## ARTIFACTS\nNone\n## NEXT STEPS\nContinue with the user's latest request."
    )


def _inline_labels(messages: list[Message], purpose: str) -> str:
    """The same answer as ``_reply``, its sections written as inline labels."""
    answer = _reply(messages, purpose)
    if purpose == "flush":
        return answer
    labels = {"SESSION INTENT": "SESSION INTENT:", "SUMMARY": "**Summary:**"}
    labels |= {"ARTIFACTS": "1. Artifacts -", "NEXT STEPS": "NEXT STEPS:"}
    return re.sub(r"^## (.+)\n", lambda m: labels[m.group(1)] + " ", answer, flags=re.MULTILINE)


def _off_format(messages: list[Message], purpose: str) -> str:
    """Prose that never follows the format (a small local model)."""
    if purpose == "flush":
        return _reply(messages, purpose)
    return "The user and the agent discussed flights, reservations and a few refunds."


def _failing(messages: list[Message], purpose: str) -> str:
    if purpose == "flush":
        return _reply(messages, purpose)
    raise ModelUnavailableError("the summariser is down")


SUMMARISERS = {
    "well-formed": _reply,
    "inline labels": _inline_labels,
    "off-format prose": _off_format,
    "always failing": _failing,
}


def misbehaving(messages: list[Message], reply: Any) -> dict[str, int]:
    """The largest context and the summariser's call count for one summariser."""
    model = ScriptedModel(reply)
    largest = calls = degraded = compactions = 0
    with (
        tempfile.TemporaryDirectory() as folder,
        MemoryHarness.open(
            Path(folder) / "ws",
            model=model,
            compaction=CONFIGS["messages 30 / keep 10"],
            maintenance={"enabled": False},
        ) as harness,
    ):
        session = harness.session("tau")
        compactor = harness.kernel.hooks.pm.get_plugin("compaction").compactor(
            harness.kernel, "tau"
        )
        context: list[Message] = []
        for message in messages:
            if message["role"] == "user" and context and context[-1]["role"] == "assistant":
                session.after_call(context)
            if message["role"] == "assistant" and context:
                before = compactor.last_result
                context = session.before_reasoning(context)
                result = compactor.last_result
                if result is not before and result is not None and result.compacted:
                    compactions += 1
                    degraded += result.degraded
                calls += 1
                largest = max(largest, len(context) - 1)  # conversation messages
            context.append(message)
    return {
        "largest": largest,
        "calls": calls,
        "summaries": len(model.calls_for("summary")),
        "compactions": compactions,
        "degraded": degraded,
    }


def replay(messages: list[Message], compaction: dict[str, int]) -> dict[str, Any]:
    """Token totals of one replay (see the module docstring), and the per-call sizes.

    ``per_call_with`` and ``per_call_without`` hold the tokens sent at each model call
    with and without the harness; the totals are their sums.
    """
    counter = TokenCounter()
    model = ScriptedModel(_reply)
    per_call_with: list[int] = []
    per_call_without: list[int] = []
    with (
        tempfile.TemporaryDirectory() as folder,
        MemoryHarness.open(
            Path(folder) / "ws",
            model=model,
            compaction=compaction,
            maintenance={"enabled": False},
        ) as harness,
    ):
        session = harness.session("tau")
        context: list[Message] = []
        full: list[Message] = []
        for message in messages:
            if message["role"] == "user" and context and context[-1]["role"] == "assistant":
                session.after_call(context)  # the agent's turn ended
            if message["role"] == "assistant" and context:
                context = session.before_reasoning(context)
                per_call_with.append(counter.count_messages(context))
                per_call_without.append(counter.count_messages(full))
            context.append(message)
            full.append(message)
    upkeep = {
        purpose: sum(counter.count_messages(c.messages) for c in model.calls_for(purpose))
        for purpose in ("summary", "flush")
    }
    return {
        "calls": len(per_call_with),
        "with": sum(per_call_with),
        "without": sum(per_call_without),
        "per_call_with": per_call_with,
        "per_call_without": per_call_without,
        "summary": upkeep["summary"],
        "summaries": len(model.calls_for("summary")),
        "flush": upkeep["flush"],
        "flushes": len(model.calls_for("flush")),
    }


def run(quick: bool) -> list[Row | Series]:
    """Rows for tokens sent and upkeep share, per configuration; the per-call sizes."""
    if not TAU.is_file():
        print(f"bench compaction: skipped, tau-bench data missing at {TAU}", file=sys.stderr)
        return []
    runs = json.loads(TAU.read_text(encoding="utf-8"))
    messages = stream(runs[:30] if quick else runs)
    rows: list[Row | Series] = []
    curves: dict[str, list[float]] = {}
    for name, compaction in CONFIGS.items():
        totals = replay(messages, compaction)
        curves.setdefault("without the harness (whole conversation)", totals["per_call_without"])
        curves[f"with the harness, {name}"] = totals["per_call_with"]
        upkeep = totals["summary"] + totals["flush"]
        rows.append(
            Row(
                bench="compaction",
                name=f"tokens sent, {name}",
                value=totals["with"],
                unit="tokens",
                baseline="same loop without the harness",
                baseline_value=totals["without"],
                notes=f"{totals['calls']:,} model calls over {len(messages):,} messages",
            )
        )
        rows.append(
            Row(
                bench="compaction",
                name=f"upkeep (summary + flush inputs), {name}",
                value=upkeep,
                unit="tokens",
                baseline="tokens sent with the harness",
                baseline_value=totals["with"],
                notes=(
                    f"{totals['summaries']:,} summaries ({totals['summary']:,} tokens), "
                    f"{totals['flushes']:,} flushes ({totals['flush']:,} tokens)"
                ),
            )
        )
    trigger = CONFIGS["messages 30 / keep 10"]["trigger_messages"]
    for label, reply in SUMMARISERS.items():
        seen = misbehaving(messages, reply)
        notes = (
            f"{seen['compactions']:,} compactions, {seen['degraded']:,} degraded "
            "(automatic summary)"
        )
        rows.append(
            Row(
                bench="compaction",
                name=f"largest context, {label} summariser, messages 30 / keep 10",
                value=seen["largest"],
                unit="messages",
                baseline="trigger_messages",
                baseline_value=trigger,
                notes=notes,
            )
        )
        rows.append(
            Row(
                bench="compaction",
                name=f"summariser calls, {label} summariser, messages 30 / keep 10",
                value=seen["summaries"],
                unit="calls",
                baseline="agent model calls",
                baseline_value=seen["calls"],
                notes=notes,
            )
        )
    peaks = "; ".join(f"{label}: peak {max(values):,.0f}" for label, values in curves.items())
    rows.append(
        Series(
            bench="compaction",
            slug="context-tokens",
            title=(
                f"Context sent per model call: tau-bench airline replay, {len(messages):,} "
                f"messages, {len(next(iter(curves.values()))):,} calls"
            ),
            x_label="model call",
            y_label="tokens sent",
            lines=curves,
            log_y=True,
            zoom=150,
            notes=f"Largest context sent: {peaks}.",
        )
    )
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
