"""Several replicas on one S3 workspace: 4 processes flush, save and maintain together.

Each process is a replica with its own harness and its own local index cache, on one
``s3://`` workspace (moto on loopback). Each flushes 50 turns of its own conversation,
saves a note with ``memory_save`` and runs a maintenance tick (consolidation included)
every 10 turns, and consolidates directly every 10 turns too. Afterwards nothing is lost
and nothing is doubled, in the daily logs and in MEMORY.md, and no two consolidations ever
ran at the same time.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.layout import is_daily_log
from harnessmem.testing import ScriptedModel

if TYPE_CHECKING:
    from conftest import RunTogether

pytestmark = pytest.mark.s3

REPLICAS = 4
TURNS = 50
CODE = re.compile(r"ZETA-\d+-\d+")
NOTE = re.compile(r"NOTE-\d+-\d+")

_CHILD = r"""
import json, os, re, sys, time
from harnessmem import MemoryHarness
from harnessmem.testing import ScriptedModel

url, options, replica, turns, trace = (
    sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
)
CODE = re.compile(r"ZETA-\d+-\d+")

def note(event):
    # One small O_APPEND write per line: lines of several processes never interleave.
    with open(trace, "a") as f:
        f.write(f"{event} {replica} {time.monotonic_ns()}\n")

def reply(messages, purpose):
    text = messages[-1]["content"]
    if purpose == "flush":
        said = text.split("<conversation>")[1]
        return "\n".join(f"- {code} belongs to replica {replica}" for code in CODE.findall(said))
    note("start")
    time.sleep(0.02)  # a model takes a while: an overlapping run would show in the trace
    prior = text.split("<memory_md>\n")[1].split("\n</memory_md>")[0].strip()
    logs = text.split("<daily_logs>")[1].split("</daily_logs>")[0] if "<daily_logs>" in text else ""
    facts = [line for line in logs.splitlines() if line.startswith("- ")]
    note("end")
    return "\n".join([prior or "## Facts", *facts])

harness = MemoryHarness.open(
    url,
    workspace={"storage_options": options},
    model=ScriptedModel(reply),
    maintenance={"enabled": False},
    consolidation={"max_memory_tokens": 50_000},
)
session = harness.session(f"replica-{replica}")
print("ready", flush=True)
sys.stdin.readline()  # start together, so that the replicas really compete
messages, results = [], []
for turn in range(turns):
    messages.append({"role": "user", "content": f"remember ZETA-{replica}-{turn}"})
    messages.append({"role": "assistant", "content": "noted"})
    results.append(session.after_call(messages).outcomes["flush"].status)
    if turn % 10 == 4:
        harness.consolidate()  # as an API caller would, outside any maintenance tick
    if turn % 10 == 9:
        session.call_tool("memory_save", {"text": f"- NOTE-{replica}-{turn} is saved"})
        harness.maintain(force=True)
harness.close()
print(json.dumps(results), flush=True)
"""


def test_four_replicas_lose_nothing_double_nothing_and_consolidate_one_at_a_time(
    s3_workspace_url: str,
    s3_storage_options: dict[str, Any],
    tmp_path: Path,
    run_together: RunTogether,
) -> None:
    trace = tmp_path / "consolidations.log"
    options = json.dumps(s3_storage_options)
    statuses = run_together(
        _CHILD,
        [[s3_workspace_url, options, str(r), str(TURNS), str(trace)] for r in range(REPLICAS)],
        # Each replica keeps its own index cache, as separate machines would.
        envs=[
            {**os.environ, "XDG_CACHE_HOME": str(tmp_path / f"cache-{r}")} for r in range(REPLICAS)
        ],
        timeout=600,
    )

    assert statuses == [["written"] * TURNS] * REPLICAS, "every turn flushed its one new fact"
    codes = {f"ZETA-{r}-{t}" for r in range(REPLICAS) for t in range(TURNS)}
    notes = {f"NOTE-{r}-{t}" for r in range(REPLICAS) for t in range(9, TURNS, 10)}

    # One more consolidation, now that nobody writes: every fact reaches MEMORY.md.
    def merge(messages: list[dict[str, Any]], purpose: str) -> str:
        text = messages[-1]["content"]
        prior = text.split("<memory_md>\n")[1].split("\n</memory_md>")[0].strip()
        logs = text.split("<daily_logs>")[1].split("</daily_logs>")[0]
        return "\n".join([prior, *(line for line in logs.splitlines() if line.startswith("- "))])

    with MemoryHarness.open(
        s3_workspace_url,
        workspace={"storage_options": s3_storage_options},
        model=ScriptedModel(merge),
        maintenance={"enabled": False},
        consolidation={"max_memory_tokens": 50_000},
    ) as check:
        check.consolidate()
        ws = check.workspace
        logs = "".join(
            ws.read_text(path)
            for path in ws.list("memory")
            if is_daily_log(path.rsplit("/", 1)[-1])
        )
        memory = ws.read_text("MEMORY.md")

    assert Counter(CODE.findall(logs)) == Counter(codes), "each fact in the daily logs once"
    assert Counter(CODE.findall(memory)) == Counter(codes), "each fact in MEMORY.md once"
    assert Counter(NOTE.findall(memory)) == Counter(notes), "each memory_save kept, once"

    events = sorted(
        (int(at), kind, replica)
        for kind, replica, at in (line.split() for line in trace.read_text().splitlines())
    )
    assert len(events) >= 4, "consolidations did run"
    running = 0
    for _, kind, _ in events:
        running += 1 if kind == "start" else -1
        assert running in (0, 1), "two consolidations overlapped"
