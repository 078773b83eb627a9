"""The fleet benchmark's plan, journal and checks (``bench/bench_fleet.py`` runs them).

Pure logic, no harnessmem import: which worker replays which conversation of which tenant,
how a replayed conversation splits into agent turns, the journal lines a worker appends,
and the three checks of a run: ticks that ran twice for one tenant, facts a flush reported
written that are missing from the tenant's files, and searches that found another tenant's
marker.
"""

from __future__ import annotations

import json
import random
import string
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Message = dict[str, Any]


# ------------------------------------------------------------------------------ plan


@dataclass(frozen=True)
class Conversation:
    """One conversation of one tenant: the worker that replays it and the tau-bench run."""

    tenant: str
    session: str
    run: int
    worker: int


def tenant_name(number: int) -> str:
    return f"t{number:04d}"


def plan(
    tenants: int, workers: int, conversations: int, runs: int
) -> dict[int, list[Conversation]]:
    """Each worker's conversations, by tenant: tenant ``n``'s ``k``-th conversation replays
    run ``(n * conversations + k) % runs`` on worker ``(n + k) % workers``, so a tenant's
    conversations run on different workers (two replicas write its files at once)."""
    out: dict[int, list[Conversation]] = {w: [] for w in range(workers)}
    for n in range(tenants):
        for k in range(conversations):
            worker = (n + k) % workers
            out[worker].append(
                Conversation(
                    tenant_name(n), f"{tenant_name(n)}-c{k}", (n * conversations + k) % runs, worker
                )
            )
    return out


def marker(number: int, seed: int = 35) -> str:
    """Tenant ``number``'s unique word (letters only: every index keeps it one token)."""
    rng = random.Random(seed * 1_000_003 + number)
    return "fleet" + "".join(rng.choice(string.ascii_lowercase) for _ in range(10))


def agent_turns(run: Sequence[Message], limit: int) -> list[list[Message]]:
    """The messages that arrive before each of the first ``limit`` model calls of ``run``.

    ``run`` starts with its system message (not part of any turn). A turn is what reaches
    the loop between two model calls (the user's message, tool results) followed by the
    model's answer, the assistant message that ends it.
    """
    turns: list[list[Message]] = []
    current: list[Message] = []
    for message in run[1:]:
        current.append(message)
        if message["role"] == "assistant":
            turns.append(current)
            current = []
            if len(turns) == limit:
                break
    return turns


# ------------------------------------------------------------------------------ journal


class Journal:
    """A worker's journal: JSON lines appended with one ``write`` each (O_APPEND), so a
    SIGKILL loses at most the line being written, and :func:`read_journal` skips it."""

    def __init__(self, path: str) -> None:
        import os
        import threading

        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()
        self._write = os.write

    def add(self, kind: str, **fields: Any) -> None:
        line = (json.dumps({"kind": kind, **fields}, separators=(",", ":")) + "\n").encode()
        with self._lock:
            self._write(self._fd, line)

    def close(self) -> None:
        import os

        os.close(self._fd)


def read_journal(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The records of a journal; a line torn by a kill is skipped."""
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "kind" in record:
            yield record


# ------------------------------------------------------------------------------ checks


@dataclass(frozen=True)
class StepRun:
    """One maintenance step that ran (not skipped) for a tenant, in wall-clock seconds."""

    tenant: str
    step: str
    tick: str
    start: float
    end: float


def double_ticks(steps: Iterable[StepRun], min_gap: float) -> list[tuple[str, str, str]]:
    """Pairs of ticks of one tenant that ran at once or repeated a step inside its window.

    Two ticks ran at once when a step of one ran while a step of the other was running
    (steps run only under the maintenance lease). A step ran twice when two ticks ran it
    less than ``min_gap`` apart (``maintenance.min_gap``: a later tick skips a step that
    ran within it). Each pair ``(tenant, tick, tick)`` is listed once.
    """
    by_tenant: dict[str, list[StepRun]] = defaultdict(list)
    for run in steps:
        by_tenant[run.tenant].append(run)
    pairs: set[tuple[str, str, str]] = set()
    for tenant, runs in by_tenant.items():
        runs.sort(key=lambda r: r.start)
        for i, first in enumerate(runs):
            for second in runs[i + 1 :]:
                if second.tick == first.tick:
                    continue
                at_once = second.start < first.end
                repeated = second.step == first.step and second.start - first.start < min_gap
                if at_once or repeated:
                    a, b = sorted((first.tick, second.tick))
                    pairs.add((tenant, a, b))
                if second.start - first.start >= min_gap and second.start >= first.end:
                    break  # sorted by start: no later run can clash with ``first``
    return sorted(pairs)


def lost_facts(
    claims: Iterable[tuple[str, str]], files: Mapping[str, Sequence[str]]
) -> list[tuple[str, str]]:
    """The claims ``(tenant, fact)`` found as a bullet in none of the tenant's memory files
    (``files``: each tenant's file texts). A fact is written as ``- <fact>`` on one line,
    its whitespace runs made single spaces."""
    bullets: dict[str, set[str]] = {}
    missing = []
    for tenant, fact in claims:
        if tenant not in bullets:
            bullets[tenant] = {
                _words(line[2:])
                for text in files.get(tenant, ())
                for line in text.splitlines()
                if line.startswith("- ")
            }
        if _words(fact) not in bullets[tenant]:
            missing.append((tenant, fact))
    return missing


def _words(text: str) -> str:
    return " ".join(text.split())
