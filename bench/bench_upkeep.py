"""What memory upkeep costs next to the agent's own model calls (issue 18).

The scenario is one workspace for one agent's day: 50 tau-bench airline runs, a session per
run, ``compaction.trigger_tokens = 4000``, ``after_call`` at the end of every user turn and
``close()`` at the end of each run (session end). The agent's model calls are the
assistant messages of the runs; what the loop sends at each one (after ``before_reasoning``)
is the agent's spend. Upkeep is every request the harness sends to its own model: the flush,
the compaction summary and consolidation (maintenance ticks run in the loop's clock).

The stand-in model answers as a real one does when there are facts: one new fact for each
user message the flush request shows (so the daily log and MEMORY.md grow through the day and
a batched flush is not credited with facts it never saw), a summary of about 250 words, and
a consolidation that keeps MEMORY.md's bullets plus the new ones within the budget.

Rows, one per variant of the flush (each also in tokens): characters sent to upkeep against
characters sent to the agent model, and the facts that reached the daily logs against the
facts the stand-in produced in the per-call design of the same run. A second part replays
LoCoMo conversations (one session a day, ``after_call`` after every exchange) on the default
offline model and reports the observation recall of the daily logs per variant.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._util import Row
from harnessmem import MemoryHarness
from harnessmem.compaction._summary import parse_anchor
from harnessmem.memory.transcripts import SessionTranscript
from harnessmem.models.usage import UsageTotals
from harnessmem.testing import ScriptedModel
from harnessmem.tokens import TokenCounter

DATA = Path(
    os.environ.get("SHARED_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
TAU = DATA / "tau-bench" / "gpt-4o-airline-dev.json"
LOCOMO = DATA / "locomo-dev" / "locomo-dev.json"
Message = dict[str, Any]

_BEFORE_FLUSH = {"batch_tokens": 0, "reference": "full", "reference_chars": 16_000}
#: The designs compared, each adding one step to the one before; the last is the default.
#: Settings sections; what a row leaves out is at its default. (The shorter flush prompt
#: of issue 18 is in every row: it is not a setting.)
VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "per call, full reference, two calls at compaction (before issue 18)": {
        "flush": {**_BEFORE_FLUSH, "transcript": "full"},
        "compaction": {"facts_in_summary": False},
        "consolidation": {"min_new_tokens": 0},
    },
    "+ batched flush": {
        "flush": {"reference": "full", "reference_chars": 16_000, "transcript": "full"},
        "compaction": {"facts_in_summary": False},
        "consolidation": {"min_new_tokens": 0},
    },
    "+ related reference": {
        "flush": {"transcript": "full"},
        "compaction": {"facts_in_summary": False},
        "consolidation": {"min_new_tokens": 0},
    },
    "+ lean transcript": {
        "compaction": {"facts_in_summary": False},
        "consolidation": {"min_new_tokens": 0},
    },
    "+ one call at compaction": {"consolidation": {"min_new_tokens": 0}},
    "default (+ consolidation once 2,000 new tokens wait)": {},
}
_NO_CALLS = UsageTotals()
_USER = re.compile(r"^\[user(?: [^\]]*)?\]: (.+)$", re.MULTILINE | re.IGNORECASE)
_BLOCK = re.compile(r"<(\w+)>\n(.*?)\n</\1>", re.DOTALL)


def chars(messages: list[Message]) -> int:
    """Characters of a request as a provider receives it (JSON of each message)."""
    return sum(len(json.dumps(m, ensure_ascii=False)) for m in messages)


def stand_in(messages: list[Message], purpose: str) -> str:
    """One fact per user message shown to the flush; a ~250-word summary; a growing MEMORY.md."""
    request = str(messages[-1].get("content") or "")
    blocks = dict(_BLOCK.findall(request))
    said = _USER.findall(blocks.get("conversation", ""))
    facts = "\n".join(f"- The user said: {line[:100]}" for line in said) or "NO_REPLY"
    if purpose == "flush":
        return facts
    if purpose == "summary":
        words = " ".join(said[-12:] or ["the user's request"]).split()
        body = " ".join(words[:220])
        summary = (
            f"## SESSION INTENT\n{body[:300]}\n## SUMMARY\n{body}\n"
            "## ARTIFACTS\nNone\n## NEXT STEPS\nContinue with the user's latest request."
        )
        asks_for_facts = "## NEW FACTS" in str(messages[0].get("content") or "")
        return f"{summary}\n\n## NEW FACTS\n{facts}" if asks_for_facts else summary
    memory = [ln for ln in blocks.get("memory_md", "").splitlines() if ln.startswith("- ")]
    new = [ln for ln in blocks.get("daily_logs", "").splitlines() if ln.startswith("- ")]
    kept = list(dict.fromkeys(memory + new))
    while kept and sum(len(line) for line in kept) > 12_000:
        kept.pop(0)
    return "## Facts\n" + "\n".join(kept) if kept else "NO_REPLY"


def _runs(limit: int) -> list[list[Message]]:
    runs = json.loads(TAU.read_text(encoding="utf-8"))
    return [[dict(m) for m in run["traj"]] for run in runs[:limit]]


def day(runs: list[list[Message]], variant: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One agent's day on a fresh workspace with the settings sections of ``variant``."""
    counter = TokenCounter()
    model = ScriptedModel(stand_in)
    agent_chars = agent_tokens = unlogged = 0
    clock = [1_796_112_000.0]  # 2026-12-01T08:00:00Z; each model call takes a minute
    with tempfile.TemporaryDirectory() as folder:
        harness = MemoryHarness.open(
            Path(folder) / "ws",
            model=model,
            clock=lambda: clock[0],
            **{
                **variant,
                "compaction": {
                    **variant.get("compaction", {}),
                    "trigger_tokens": 4_000,
                    "trigger_messages": 0,
                },
            },
        )
        with harness:
            for number, run in enumerate(runs):
                session = harness.session(f"run-{number}")
                context: list[Message] = []
                for message in run:
                    if message["role"] == "user" and context and context[-1]["role"] == "assistant":
                        session.after_call(context)  # the user's turn ended
                    if message["role"] == "assistant" and context:
                        context = session.before_reasoning(context)
                        agent_chars += chars(context)
                        agent_tokens += counter.count_messages(context)
                        clock[0] += 60
                    context.append(message)
                session.after_call(context)
                session.close()
                # Every message that left the context is in the session log, once.
                anchor = parse_anchor(context[1]) if len(context) > 1 else None
                covers = anchor.covers if anchor is not None else 0
                logged = SessionTranscript(harness.workspace, f"run-{number}").records()
                unlogged += abs(covers - len(logged)) + sum(
                    r.message != m for r, m in zip(logged, run[1 : 1 + covers], strict=False)
                )
            logs = sorted((Path(folder) / "ws" / "memory").glob("*.md"))
            facts = {
                line
                for path in logs
                for line in path.read_text(encoding="utf-8").splitlines()
                if line.startswith("- The user said: ")
            }
    upkeep = {
        purpose: (
            sum(chars(c.messages) for c in model.calls_for(purpose)),
            sum(counter.count_messages(c.messages) for c in model.calls_for(purpose)),
            len(model.calls_for(purpose)),
        )
        for purpose in ("flush", "summary", "consolidation")
    }
    return {
        "agent_chars": agent_chars,
        "agent_tokens": agent_tokens,
        "upkeep": upkeep,
        "facts": facts,
        "unlogged": unlogged,
    }


def locomo_recall(
    conversations: list[Any], variant: dict[str, dict[str, Any]]
) -> tuple[int, int, int]:
    """Observations matched by a daily-log bullet, observations, and model calls, over the
    conversations replayed live on the default offline model (``after_call`` after every
    exchange of two turns, ``close()`` at the end of each session, a day per session)."""
    from bench.bench_extractive import THRESHOLD, overlap
    from harnessmem.backends.extractive._text import term_set

    matched = total = calls = 0
    for conversation in conversations:
        clock = [1_796_112_000.0]
        with tempfile.TemporaryDirectory() as folder:
            with MemoryHarness.open(
                Path(folder) / "ws",
                clock=lambda clock=clock: clock[0],
                **{**variant, "maintenance": {"enabled": False}},
            ) as harness:
                for session in conversation.sessions:
                    clock[0] += 86_400
                    chat = harness.session(f"{conversation.sample_id}-{session.key}")
                    messages: list[Message] = []
                    for number, turn in enumerate(session.messages, start=1):
                        messages.append(dict(turn))
                        if number % 2 == 0:
                            chat.after_call(messages)
                    chat.close(messages)
                calls = harness.usage().by_purpose().get("flush", _NO_CALLS).calls + calls
            bullets = [
                term_set(line[2:]) - conversation.names
                for path in (Path(folder) / "ws" / "memory").glob("*.md")
                for line in path.read_text(encoding="utf-8").splitlines()
                if line.startswith("- ")
            ]
        for session in conversation.sessions:
            for fact in session.observations:
                terms = term_set(fact) - conversation.names
                total += 1
                matched += any(overlap(terms, bullet) >= THRESHOLD for bullet in bullets)
    return matched, total, calls


def run(quick: bool) -> list[Row]:
    if not TAU.is_file():
        print(f"bench upkeep: skipped, tau-bench data missing at {TAU}", file=sys.stderr)
        return []
    runs = _runs(10 if quick else 50)
    rows: list[Row] = []
    conversations: list[Any] = []
    if LOCOMO.is_file():
        from bench.bench_extractive import load

        conversations = load(LOCOMO, limit=1 if quick else None)
    else:
        print(f"bench upkeep: LoCoMo rows skipped, data missing at {LOCOMO}", file=sys.stderr)
    reference_facts: set[str] | None = None
    for name, variant in VARIANTS.items():
        seen = day(runs, variant)
        upkeep = seen["upkeep"]
        up_chars = sum(u[0] for u in upkeep.values())
        up_tokens = sum(u[1] for u in upkeep.values())
        parts = ", ".join(
            f"{purpose} {u[0] / seen['agent_chars']:.3f}x ({u[2]} calls)"
            for purpose, u in upkeep.items()
        )
        if reference_facts is None:
            reference_facts = seen["facts"]
        rows.append(
            Row(
                bench="upkeep",
                name=f"upkeep characters, {name}",
                value=up_chars,
                unit="chars",
                baseline="characters sent to the agent model",
                baseline_value=seen["agent_chars"],
                notes=(
                    f"{len(runs)} airline runs; {parts}; messages removed from the context "
                    f"and missing from the session logs: {seen['unlogged']}"
                ),
            )
        )
        rows.append(
            Row(
                bench="upkeep",
                name=f"upkeep tokens, {name}",
                value=up_tokens,
                unit="tokens",
                baseline="tokens sent to the agent model",
                baseline_value=seen["agent_tokens"],
            )
        )
        rows.append(
            Row(
                bench="upkeep",
                name=f"facts in the daily logs, {name}",
                value=len(seen["facts"] & reference_facts),
                unit="facts",
                baseline="facts of the per-call design",
                baseline_value=len(reference_facts),
                notes=f"{len(seen['facts'])} facts in all",
            )
        )
        if conversations:
            matched, total, calls = locomo_recall(conversations, variant)
            rows.append(
                Row(
                    bench="upkeep",
                    name=f"LoCoMo observation recall of the flush, {name}",
                    value=matched,
                    unit="observations",
                    baseline="annotated observations",
                    baseline_value=total,
                    notes=(
                        f"{len(conversations)} conversations replayed live on the offline "
                        f"model; {calls} flush calls"
                    ),
                )
            )
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
