"""S3 requests per operation on an ``s3://`` workspace: what a deployment pays per turn.

Each operation runs against moto's S3 server on loopback (``S3TestServer``), through
s3fs exactly as a user's ``s3://`` URL and ``storage_options`` reach it, and the server
counts the requests it answers (retries included; there are none here). The baseline is
the fewest requests that give the same durability:

- *flush*: read today's log and write it back conditionally (GET + PUT ``If-Match``): 2.
  harnessmem spares the GET when it wrote the log last (the PUT's ``If-Match`` checks that
  nobody wrote since) and adds one PUT, the session's high-water mark, which is what makes
  a flush exactly-once across crashes, two GETs of the tombstones (what ``forget``
  removed) and the audit record's PUT. "steady" is a session's second and later flushes
  within ``index.refresh_interval``; "first" a session's first flush in a process (it
  reads the mark, and the index sweeps once).
- *memory_save*: GET + conditional PUT of MEMORY.md: 2.
- *consolidation*: read MEMORY.md and the new log, write MEMORY.md and the watermark: 4
  (harnessmem also takes and releases a lease, reads the watermark, lists ``memory/``
  and, when that listing shows one, the archive, keeps the previous MEMORY.md in
  ``memory/.history/`` and writes the watermark twice, "pending" before the replace and
  committed after it; a run whose watermark does not name the kept versions lists
  ``memory/.history/`` when it exists; the audit record adds a PUT).
- *search*: between sweeps nothing (baseline 0, no ratio); a sweep lists ``memory/`` and
  heads MEMORY.md, against one LIST; a changed file adds its GET to both sides.
- *eviction*: one create-if-absent PUT of the file.
- *before_reasoning* below the compaction triggers, with ``context.inject = "system"``:
  the memory block's change check, one HEAD of MEMORY.md, and its GET when it changed to
  a version this process did not write (here the change is this process's save);
  the baseline is one conditional GET (``If-None-Match``), which answers both.
- *compaction*: the offload of 20 messages to the session log: GET + PUT of the log and
  a PUT of its offload mark: 3. harnessmem adds the session's lease (PUT + DELETE) and,
  for a session this process has not offloaded yet, a GET of the mark; this session never
  flushed either, so the flush before compaction costs a first flush.
- *maintenance tick*: a lease (PUT + DELETE), one LIST per folder (memory/, sessions/,
  the evictions folder) and the state (PUT): 6. This tick also consolidates one log,
  deletes one evicted result and lets the index sweep; a second tick has nothing to do.
- *flush under contention*: 4 replicas flushing into one daily log at once; conflicting
  conditional PUTs are read again and retried, so a flush may cost more than 3.

Model calls are recorded in the usage ledger (``usage/<day>.jsonl``) in batches, a GET +
conditional PUT at most every ``UsageLedger.flush_interval``; the batch is written before
each measured operation, so that it is not counted in whichever operation it falls on.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench._util import Row

_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


@contextmanager
def _environment(cache: str) -> Iterator[None]:
    """Dummy credentials (nothing can reach AWS) and the index cache in a temp dir."""
    saved = {key: os.environ.get(key) for key in [*_ENV, "XDG_CACHE_HOME"]}
    os.environ.update({**_ENV, "XDG_CACHE_HOME": cache})
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _Replies:
    """The model's answers: one new fact per flush, a merge for consolidation."""

    count = 0  # shared by every harness: replicas never answer the same fact
    lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]], purpose: str) -> str:
        text = messages[-1]["content"]
        if purpose == "consolidation":
            prior = text.split("<memory_md>\n")[1].split("\n</memory_md>")[0].strip()
            logs = text.split("<daily_logs>")[1].split("</daily_logs>")[0]
            facts = [line for line in logs.splitlines() if line.startswith("- ")]
            return "\n".join([prior or "## Facts", *facts])
        if purpose == "summary":
            return (
                "SESSION INTENT\nbook a trip\n\nSUMMARY\nthe user talked about a trip\n\n"
                "ARTIFACTS\nnone\n\nNEXT STEPS\nbook it"
            )
        with _Replies.lock:
            _Replies.count += 1
            return f"- the benchmark fact number {_Replies.count} is remembered"


def _row(name: str, value: float, baseline: str, base: float, notes: str = "") -> Row:
    return Row(
        bench="s3",
        name=name,
        value=value,
        unit="requests",
        baseline=baseline,
        baseline_value=base,
        notes=notes,
    )


def run(quick: bool) -> list[Row]:
    """Requests per operation against the fewest that give the same durability."""
    try:
        from harnessmem.testing.s3_server import S3TestServer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        print(f"bench s3: skipped, {exc}", file=sys.stderr)
        return []
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with (
        tempfile.TemporaryDirectory() as cache,
        _environment(cache),
        S3TestServer() as server,
    ):
        return _measure(server, rounds=3 if quick else 10)


def _measure(server: Any, rounds: int) -> list[Row]:
    from harnessmem import MemoryHarness
    from harnessmem.testing import FakeClock, ScriptedModel
    from harnessmem.workspace import Workspace

    clock = FakeClock()
    url = f"s3://{server.create_bucket()}/ws"
    options = server.storage_options()

    def harness(**sections: Any) -> MemoryHarness:
        sections.setdefault("maintenance", {"enabled": False})
        workspace = {"storage_options": options, **sections.pop("workspace", {})}
        return MemoryHarness.open(
            url,
            workspace=workspace,
            model=ScriptedModel(_Replies()),
            clock=clock,
            **sections,
        )

    settle: list[Callable[[], object]] = []

    def count(operation: Callable[[], object]) -> int:
        for pending in settle:
            pending()  # the usage ledger's batch (see the module doc)
        with server.record() as requests:
            operation()
        return len(requests)

    def mean(counts: list[int]) -> float:
        return sum(counts) / len(counts)

    rows: list[Row] = []
    with harness(compaction={"trigger_messages": 30, "keep_messages": 10}) as h:
        settle.append(lambda: h.usage(days=1))
        messages: list[dict[str, Any]] = []

        def turn(session: str) -> Callable[[], object]:
            def flush() -> object:
                messages.append({"role": "user", "content": f"turn {len(messages)}"})
                return h.flush(messages, session_id=session)

            return flush

        first = [count(turn(f"first-{i}")) for i in range(rounds)]
        messages.clear()
        steady = [count(turn("steady")) for _ in range(rounds + 1)][1:]
        rows.append(_row("flush, steady", mean(steady), "GET + conditional PUT", 2))
        rows.append(_row("flush, first of a session", mean(first), "GET + conditional PUT", 2))
        saves = [count(lambda i=i: h.save(f"- saved fact {i}")) for i in range(rounds + 1)]
        rows.append(_row("memory_save", mean(saves[1:]), "GET + conditional PUT", 2))
        between = [count(lambda: h.search("fact")) for _ in range(rounds)]
        rows.append(
            _row("search, between sweeps", mean(between), "nothing", 0, "index.refresh_interval")
        )
        interval = h.kernel.refresh_interval

        def sweep() -> object:
            clock.advance(interval)
            return h.search("fact")

        rows.append(_row("search that sweeps, nothing changed", count(sweep), "LIST", 1))
        other = Workspace.open(url, options)  # another replica's write
        other.write_text("memory/notes.md", "- a note written by another replica\n")
        rows.append(_row("search that sweeps, 1 file changed", count(sweep), "LIST + GET", 2))
        rows.append(_row("consolidation", count(h.consolidate), "2 GET + 2 PUT", 4, "1 daily log"))
        big = "x" * 150_000
        call = {"id": "call_1", "type": "function", "function": {"name": "shell"}}
        rows.append(
            _row(
                "eviction of a 150 kB result",
                count(lambda: h.session("evict").after_tool(call, big)),
                "conditional PUT",
                1,
            )
        )
        unchanged, changed = _memory_block(h, count, rounds)
        rows.append(
            _row(
                "before_reasoning, memory unchanged",
                unchanged,
                "conditional GET (If-None-Match)",
                1,
                "context.inject = system: HEAD of MEMORY.md",
            )
        )
        rows.append(
            _row(
                "before_reasoning, memory changed",
                changed,
                "conditional GET (If-None-Match)",
                1,
                "HEAD; the GET only after another process's write",
            )
        )
        chat = [{"role": "system", "content": "You are a travel agent."}]
        for i in range(30):
            role = "user" if i % 2 == 0 else "assistant"
            chat.append({"role": role, "content": f"message {i} about the trip"})
        rows.append(
            _row(
                "compaction, 20 messages offloaded",
                count(lambda: h.session("compact").before_reasoning(chat)),
                "GET + PUT log, PUT mark",
                3,
                "flush before compaction included",
            )
        )
        steady_at = len(rows)  # measured after the ticks (its own harness, see below)
        clock.advance(3600)
        rows.append(
            _row(
                "maintenance tick",
                count(lambda: h.maintain(force=True)),
                "lease PUT + DELETE, 3 LIST, state PUT",
                6,
                "consolidates 1 log, deletes 1 evicted result; index sweep included",
            )
        )
        rows.append(
            _row(
                "maintenance tick, nothing to do",
                count(lambda: (clock.advance(3600), h.maintain(force=True))),
                "lease PUT + DELETE, 3 LIST, state PUT",
                6,
                "index sweep included",
            )
        )
    settle.clear()
    # Flushed after every call: flush.batch_tokens = 0 (by default small turns are batched,
    # and the flush before compaction writes the batch). Its own harness, after the ticks,
    # so that they find only the first harness's writes.
    index = os.path.join(os.environ["XDG_CACHE_HOME"], "steady.db")
    with harness(
        compaction={"trigger_messages": 30, "keep_messages": 10},
        flush={"batch_tokens": 0},
        workspace={"index_path": index},
    ) as steady:
        settle.append(lambda: steady.usage(days=1))
        row = _row(
            "compaction, steady",
            _steady_compaction(steady, count),
            "GET + PUT log, PUT mark",
            3,
            "a session flushed after every call (flush.batch_tokens = 0); its second compaction",
        )
        rows.insert(steady_at, row)
    settle.clear()
    rows += _contention(harness, server, rounds)
    return rows


def _memory_block(
    h: Any, count: Callable[[Callable[[], object]], int], rounds: int
) -> tuple[float, float]:
    """Mean requests of a before_reasoning below the compaction triggers whose only work
    is the memory block: MEMORY.md unchanged since the last turn, and changed (a save)."""
    session = h.session("memory-block")
    chat: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "where to?"},
    ]

    def reason() -> None:
        chat[:] = session.before_reasoning(chat)

    reason()
    unchanged = [count(reason) for _ in range(rounds)]
    changed = []
    for i in range(rounds):
        h.save(f"- block fact {i}")
        changed.append(count(reason))
    return sum(unchanged) / rounds, sum(changed) / rounds


def _steady_compaction(h: Any, count: Callable[[Callable[[], object]], int]) -> int:
    """Requests of a session's second compaction, the session flushed after every call
    (the flush before compaction then has nothing new)."""
    session = h.session("steady-compaction")
    chat: list[dict[str, Any]] = [{"role": "system", "content": "You are a travel agent."}]
    compactions: list[int] = []
    turn = 0

    def reason() -> None:
        chat[:] = session.before_reasoning(chat)

    while len(compactions) < 2:
        chat.append({"role": "user", "content": f"turn {turn} about the trip"})
        if len(chat) >= 30:  # the trigger: this call compacts
            compactions.append(count(reason))
        else:
            reason()
        chat.append({"role": "assistant", "content": f"answer {turn}"})
        session.after_call(chat)
        turn += 1
    return compactions[-1]


def _contention(harness: Callable[..., Any], server: Any, rounds: int) -> list[Row]:
    """4 replicas (own harness, own index cache) flush into one daily log at once: requests
    per flush, and the slowest flush against the median one (how evenly the replicas that
    lose a conditional write get their turn)."""
    replicas = [
        harness(workspace={"index_path": os.path.join(os.environ["XDG_CACHE_HOME"], f"r{i}.db")})
        for i in range(4)
    ]
    barrier = threading.Barrier(len(replicas))
    lock = threading.Lock()
    seconds: list[float] = []  # one per flush

    def work(index: int) -> None:
        h = replicas[index]
        messages: list[dict[str, Any]] = []
        barrier.wait()
        for turn in range(rounds):
            messages.append({"role": "user", "content": f"replica {index} turn {turn}"})
            started = time.perf_counter()
            h.flush(messages, session_id=f"replica-{index}")
            took = time.perf_counter() - started
            with lock:
                seconds.append(took)

    for h in replicas:  # warm: each session's first flush is measured above
        h.flush([{"role": "user", "content": "hello"}], session_id="warm")
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(replicas))]
    with server.record() as requests:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for h in replicas:
        h.close()
    return [
        _row(
            "flush under contention, 4 replicas",
            len(requests) / len(seconds),
            "GET + conditional PUT",
            2,
            "one daily log, conflicts retried",
        ),
        Row(
            bench="s3",
            name="flush under contention, 4 replicas, slowest flush",
            value=max(seconds),
            unit="s",
            baseline="the median flush under contention",
            baseline_value=statistics.median(seconds),
            notes=f"{len(seconds)} flushes; a writer that lost waits (jittered) and then reads "
            "again, so no replica's flushes wait much longer than the others'",
        ),
    ]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
