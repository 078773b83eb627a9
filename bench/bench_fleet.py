"""A fleet: several replicas, each a ``HarnessPool``, over one S3 bucket and one PostgreSQL index.

Each replica is a process (``bench/_fleet_worker.py``) with one ``HarnessPool`` of at most
50 open tenants (``max_open``), ``s3://<bucket>/fleet/{tenant}`` workspaces on moto's S3
server on loopback (``S3TestServer``: one request at a time, counted) and the ``postgres``
index (plugins/harnessmem-postgres) in a schema of its own, the offline ``extractive``
model, maintenance on. The tenants' conversations are tau-bench airline runs (two a
tenant, on two different replicas, so two processes write a tenant's files at once),
replayed turn by turn through the session API (``after_tool``, ``after_call``,
``before_reasoning``, ``close`` at the end), 40 conversations at a time per replica, in
turn, by two threads. The first conversation of a tenant saves its marker first (a unique
word, through the ``memory_save`` tool). Halfway through its share, replica 0 is killed
(SIGKILL) and started again; it goes on from each conversation's last finished turn.
Then one process per replica searches every tenant for its own marker and for two other
tenants' markers.

Figures, at 100 and 500 tenants on 4 replicas (20 tenants on 2 replicas, at most 8 open,
in a quick run), each conversation cut to its first turns (the wall time of a run on two
cores; the tenants and processes are the issue's):

- *time per agent turn*, p50 and p95: what a replica's loop spends on one turn (the
  messages that arrived since the last model call, then the request it sends) with the
  harness, against the same loop without it in the same process (the messages appended
  to a plain list, the request serialised). The harness side includes getting the tenant's
  harness from the pool (opening it on a miss), the flushes, compactions and evictions the
  turn sets off, and waiting for S3 and PostgreSQL; the marker save is not timed. The
  notes say which calls the slowest turns spent their time in.
- *end of a conversation*: ``after_call`` and ``close`` after its last answer (the flush
  of what batching held back), timed apart from the turns.
- *S3 requests per turn*: every request the server answered while the replicas ran
  (flushes, compactions, maintenance, opening and closing harnesses) over the turns.
- *PostgreSQL statements per turn*: statements the replicas' SQLAlchemy engines sent
  (counted in each process), over the turns.
- *double ticks*: pairs of maintenance ticks of one tenant that ran steps at once, or ran
  the same step less than ``maintenance.min_gap`` apart (from each step's span; goal 0).
- *facts lost*: facts a flush reported written (``on_memory_flushed``) that no memory file
  of the tenant holds at the end, read straight from the bucket (goal 0).
- *cross-tenant hits*: search hits of one tenant holding another tenant's marker (goal 0);
  the notes say how many tenants found their own marker.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._fleet import StepRun, agent_turns, double_ticks, lost_facts, marker, plan, read_journal
from bench._util import Row, percentile
from bench.bench_postgres import _schema, find_server
from bench.bench_s3 import _environment
from bench.bench_tokens import TAU_FILE

ROOT = Path(__file__).resolve().parents[1]
CONVERSATIONS = 2  # per tenant, on two replicas
WINDOW = 40  # conversations a replica serves at once
LANES = 2  # threads a replica serves them with
# A tick per tenant about every time it stays open (a few turns), as 6 h is for a tenant
# of a few dozen turns a day.
MAINTENANCE = {"interval": 30.0, "min_gap": 10.0, "lease_ttl": 15.0}
SECTIONS: dict[str, Any] = {
    "maintenance": {"enabled": True, **MAINTENANCE},
    # Small enough that a conversation of a few turns compacts and consolidates.
    "compaction": {"trigger_messages": 16, "keep_messages": 6},
    "consolidation": {"min_new_tokens": 50},
    "plugins": {"autoload": False},
}


_UPKEEP_KEYS = ("/.locks/maintenance.lease", "/memory/.maintenance_state")


@dataclass
class Scale:
    tenants: int
    workers: int
    max_open: int
    turns: int  # model calls replayed per conversation


@dataclass
class Outcome:
    """What one fleet run measured."""

    scale: Scale
    turns: int = 0
    ours: list[float] = field(default_factory=list)
    plain: list[float] = field(default_factory=list)
    parts: list[dict[str, float]] = field(default_factory=list)
    ends: list[float] = field(default_factory=list)
    requests: Counter[str] = field(default_factory=Counter)
    statements: int = 0
    ticks: int = 0
    steps: int = 0
    doubles: int = 0
    claimed: int = 0
    lost: int = 0
    searches: int = 0
    leaked: int = 0
    found: int = 0
    killed_after: int = 0
    seconds: float = 0.0
    opened: int = 0
    s3_bytes: int = 0
    upkeep_requests: int = 0  # on maintenance's own files: its lease and its state
    entries: int = 0
    pg_bytes: int = 0


def run(quick: bool) -> list[Row]:
    """The fleet at 100 and 500 tenants (20 in a quick run); rows of both and the growth."""
    if not TAU_FILE.is_file():
        print(f"bench fleet: skipped, tau-bench data missing at {TAU_FILE}", file=sys.stderr)
        return []
    url, why = find_server()
    if url is None:
        print(f"bench fleet: skipped, {why}", file=sys.stderr)
        return []
    try:
        from harnessmem.testing.s3_server import S3TestServer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        print(f"bench fleet: skipped, {exc}", file=sys.stderr)
        return []
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    scales = [Scale(20, 2, 8, 4)] if quick else [Scale(100, 4, 50, 3), Scale(500, 4, 50, 3)]
    outcomes = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-fleet-") as tmp,
        _environment(str(Path(tmp) / "cache")),
        S3TestServer() as server,
    ):
        for scale in scales:
            with _schema(url) as schema:
                outcome = _fleet(server, url, schema, scale, Path(tmp) / f"n{scale.tenants}")
            print(f"   {scale.tenants} tenants: {outcome.turns} turns in {outcome.seconds:.1f} s")
            outcomes.append(outcome)
    rows: list[Row] = []
    for outcome in outcomes:
        rows += _rows(outcome, outcomes[0] if outcome is not outcomes[0] else None)
    return rows


# ------------------------------------------------------------------------------ one run


def _fleet(server: Any, url: str, schema: str, scale: Scale, scratch: Path) -> Outcome:
    scratch.mkdir(parents=True)
    runs = json.loads(TAU_FILE.read_text(encoding="utf-8"))
    bucket = server.create_bucket()
    shares = plan(scale.tenants, scale.workers, CONVERSATIONS, len(runs))
    base = {
        "template": f"s3://{bucket}/fleet/{{tenant}}",
        "storage_options": server.storage_options(),
        "index": {"backend": "postgres", "options": {"url": url, "schema": schema}},
        "sections": SECTIONS,
        "max_open": scale.max_open,
        "data": str(TAU_FILE),
        "turns": scale.turns,
        "window": min(WINDOW, scale.max_open - 2),
        "lanes": LANES,
    }
    planned = {
        w: sum(len(agent_turns(runs[c.run]["traj"], scale.turns)) for c in share)
        for w, share in shares.items()
    }
    outcome = Outcome(scale)
    started = time.perf_counter()
    with server.record() as requests:
        journals, outcome.killed_after = _replicas(scratch, base, shares, planned)
    outcome.seconds = time.perf_counter() - started
    outcome.requests = Counter(r.operation for r in requests)
    outcome.upkeep_requests = sum(r.key.endswith(_UPKEEP_KEYS) for r in requests)
    _read_replay(journals, outcome)
    _print_requests(requests, outcome)
    _verify(scratch, base, scale, outcome)
    claims = _claims(journals)
    outcome.claimed = len(claims)
    files, outcome.s3_bytes = _memory_files(server, bucket)
    outcome.lost = len(lost_facts(claims, files))
    outcome.entries, outcome.pg_bytes = _index_size(url, schema)
    return outcome


def _index_size(url: str, schema: str) -> tuple[int, int]:
    """Rows in the index's entries table, and the bytes of every table of the schema
    (indexes and TOAST included)."""
    import psycopg

    from bench.bench_postgres import _libpq

    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        entries = conn.execute(f'SELECT count(*) FROM "{schema}".entries').fetchone()
        size = conn.execute(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchone()
    return int(entries[0] if entries else 0), int(size[0] or 0 if size else 0)


def _print_requests(requests: list[Any], outcome: Outcome) -> None:
    """The requests per turn by operation and kind of file, biggest first."""
    kinds = Counter(
        (
            r.operation,
            re.sub(r"[0-9a-f]{8,}|\d{4}-\d{2}-\d{2}|t\d{4}-c\d", "*", r.key.split("/", 2)[-1]),
        )
        for r in requests
    )
    for (operation, key), count in kinds.most_common(15):
        print(f"     {count / max(outcome.turns, 1):6.2f} {operation} {key}")


def _worker(scratch: Path, config: dict[str, Any], name: str) -> subprocess.Popen[bytes]:
    path = scratch / f"{name}.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    log = open(scratch / f"{name}.log", "wb")  # noqa: SIM115 - the child holds it
    return subprocess.Popen(
        [sys.executable, "-m", "bench._fleet_worker", str(path)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _replicas(
    scratch: Path,
    base: dict[str, Any],
    shares: dict[int, list[Any]],
    planned: dict[int, int],
) -> tuple[list[Path], int]:
    """Run the replay workers; kill worker 0 halfway and start it again. Its journals, and
    the turns worker 0 had finished when it was killed."""
    journals: dict[int, list[Path]] = {w: [scratch / f"replay-{w}-0.jsonl"] for w in shares}

    def start(w: int) -> subprocess.Popen[bytes]:
        config = {
            **base,
            "mode": "replay",
            "conversations": [[c.tenant, c.session, c.run, c.worker] for c in shares[w]],
            "journal": str(journals[w][-1]),
            "previous": [str(p) for p in journals[w][:-1]],
        }
        return _worker(scratch, config, journals[w][-1].stem)

    processes = {w: start(w) for w in shares}
    killed_after = 0
    deadline = time.monotonic() + 900
    with ExitStack() as stack:
        stack.callback(lambda: [p.kill() for p in processes.values() if p.poll() is None])
        while any(p.poll() is None for p in processes.values()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the fleet did not finish in 900 s; logs in {scratch}")
            time.sleep(0.2)
            if not killed_after:
                finished = _count(journals[0][-1], "turn")
                if finished >= planned[0] // 2:
                    processes[0].send_signal(signal.SIGKILL)
                    processes[0].wait()
                    killed_after = _count(journals[0][-1], "turn")
                    journals[0].append(scratch / "replay-0-1.jsonl")
                    processes[0] = start(0)
        for w, process in processes.items():
            if process.returncode != 0:
                log = (scratch / f"{journals[w][-1].stem}.log").read_text(errors="replace")
                raise RuntimeError(f"replica {w} failed ({process.returncode}):\n{log[-3000:]}")
    if not killed_after:
        raise RuntimeError("replica 0 finished before it could be killed halfway")
    return [p for paths in journals.values() for p in paths], killed_after


def _count(path: Path, kind: str) -> int:
    if not path.exists():
        return 0
    with open(path, encoding="utf-8") as f:
        return sum(1 for r in read_journal(f) if r["kind"] == kind)


def _records(paths: list[Path]) -> list[dict[str, Any]]:
    records: list[dict[str, Any]] = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            records += list(read_journal(f))
    return records


def _read_replay(journals: list[Path], outcome: Outcome) -> None:
    steps = []
    for path in journals:
        statements = 0
        for record in _records([path]):
            kind = record["kind"]
            if kind == "turn":
                outcome.turns += 1
                outcome.ours.append(record["ours"])
                outcome.plain.append(record["plain"])
                outcome.parts.append(record["parts"])
                if record["end"] is not None:
                    outcome.ends.append(record["end"])
                statements = max(statements, record["statements"])
            elif kind == "done":
                statements = max(statements, record["statements"])
                outcome.opened += record["opened"]
            elif kind == "tick":
                outcome.ticks += 1
            elif kind == "step" and record["status"] in ("done", "failed"):
                steps.append(
                    StepRun(
                        record["tenant"],
                        record["step"],
                        record["tick"],
                        record["start"],
                        record["end"],
                    )
                )
        outcome.statements += statements  # a killed life's count up to its last turn
    outcome.steps = len(steps)
    outcome.doubles = len(double_ticks(steps, MAINTENANCE["min_gap"]))


def _claims(journals: list[Path]) -> list[tuple[str, str]]:
    return [
        (r["tenant"], entry)
        for r in _records(journals)
        if r["kind"] == "fact"
        for entry in r["entries"]
    ]


def _memory_files(server: Any, bucket: str) -> tuple[dict[str, list[str]], int]:
    """Each tenant's memory files (MEMORY.md, daily logs, archive), read from the bucket,
    and the bytes of every object of the fleet."""
    files: dict[str, list[str]] = defaultdict(list)
    stored = 0
    client = server.client()
    try:
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix="fleet/"
        ):
            for item in page.get("Contents", ()):
                stored += item["Size"]
                _, tenant, rest = item["Key"].split("/", 2)
                if rest == "MEMORY.md" or (rest.startswith("memory/") and rest.endswith(".md")):
                    body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
                    files[tenant].append(body.decode("utf-8"))
    finally:
        client.close()
    return files, stored


def _verify(scratch: Path, base: dict[str, Any], scale: Scale, outcome: Outcome) -> None:
    """One process per replica searches its tenants for their markers and two others'."""
    n = scale.tenants
    processes = []
    journals = []
    for w in range(scale.workers):
        searches = {
            f"t{t:04d}": [marker((t + 1) % n), marker((t + n // 2) % n)]
            for t in range(w, n, scale.workers)
        }
        journals.append(scratch / f"verify-{w}.jsonl")
        config = {**base, "mode": "verify", "searches": searches, "journal": str(journals[-1])}
        processes.append(_worker(scratch, config, journals[-1].stem))
    for w, process in enumerate(processes):
        if process.wait(timeout=600) != 0:
            log = (scratch / f"verify-{w}.log").read_text(errors="replace")
            raise RuntimeError(f"verifier {w} failed:\n{log[-3000:]}")
    for record in _records(journals):
        outcome.searches += record["searched"]
        outcome.leaked += record["leaked"]
        outcome.found += bool(record["found"])


# ------------------------------------------------------------------------------ rows


def _rows(outcome: Outcome, smaller: Outcome | None) -> list[Row]:
    """The rows of one size; ``smaller`` (the first size of the run) gives the growth."""
    scale = outcome.scale
    at = f"{scale.tenants} tenants"
    where = (
        f"{scale.workers} replicas x HarnessPool(max_open={scale.max_open}), "
        f"{CONVERSATIONS} conversations a tenant cut to {scale.turns} model calls each"
    )
    rows = []
    for label, q in (("p50", 0.5), ("p95", 0.95)):
        added = [ours - plain for ours, plain in zip(outcome.ours, outcome.plain, strict=True)]
        grown = (
            ""
            if smaller is None
            else f"; {percentile(smaller.ours, q) * 1e3:.1f} ms at {smaller.scale.tenants} tenants"
        )
        rows.append(
            Row(
                bench="fleet",
                name=f"time per agent turn {label}, {at}",
                value=percentile(outcome.ours, q),
                unit="s",
                baseline="the same loop without harnessmem",
                baseline_value=percentile(outcome.plain, q),
                notes=f"harnessmem adds {percentile(added, q) * 1e3:.1f} ms ({label} of the "
                f"difference); {_where_time_goes(outcome, percentile(outcome.ours, q))}; "
                f"{outcome.turns:,} turns; {where}{grown}",
            )
        )
    rows.append(
        Row(
            bench="fleet",
            name=f"end of a conversation p50, {at}",
            value=percentile(outcome.ends, 0.5),
            unit="s",
            notes=f"after_call and close after the last answer (the flush of what batching "
            f"held back), once a conversation, not in the turns above; p95 "
            f"{percentile(outcome.ends, 0.95) * 1e3:.0f} ms; {len(outcome.ends):,} conversations",
        )
    )
    requests = sum(outcome.requests.values())
    kinds = ", ".join(
        f"{name} {count / outcome.turns:.2f}" for name, count in outcome.requests.most_common(5)
    )
    per_turn = [
        (
            f"S3 requests per turn, {at}",
            lambda o: sum(o.requests.values()),
            "",
            f"{requests:,} requests ({kinds}); moto on loopback; flushes, compactions, "
            f"{outcome.ticks:,} maintenance ticks ({outcome.ticks / outcome.turns:.2f} a turn; "
            f"{outcome.upkeep_requests / outcome.turns:.2f} requests a turn on their lease and "
            f"state), {outcome.opened:,} harness opens included",
        ),
        (
            f"PostgreSQL statements per turn, {at}",
            lambda o: o.statements,
            "",
            f"{outcome.statements:,} statements sent by the replicas' engines (a killed "
            "replica's up to its last finished turn)",
        ),
        (
            f"PostgreSQL index bytes per turn, {at}",
            lambda o: o.pg_bytes,
            "bytes",
            f"{outcome.pg_bytes / 2**20:.1f} MiB of tables, indexes and TOAST for "
            f"{outcome.entries:,} entries ({outcome.entries / outcome.turns:.2f} a turn); "
            f"S3 holds {outcome.s3_bytes / outcome.turns:,.0f} bytes a turn",
        ),
    ]
    for name, total, unit, notes in per_turn:
        rows.append(
            Row(
                bench="fleet",
                name=name,
                value=total(outcome) / outcome.turns,
                unit=unit,
                baseline="" if smaller is None else "the same at the smaller size (growth)",
                baseline_value=None if smaller is None else total(smaller) / smaller.turns,
                notes=notes,
            )
        )
    checks = [
        (
            "double maintenance ticks",
            lambda o: o.doubles,
            f"{outcome.ticks:,} ticks, {outcome.steps:,} steps run; window "
            f"{MAINTENANCE['min_gap']:g} s, interval {MAINTENANCE['interval']:g} s, lease "
            f"{MAINTENANCE['lease_ttl']:g} s",
        ),
        (
            "facts lost",
            lambda o: o.lost,
            f"{outcome.claimed:,} facts reported written; replica 0 killed after "
            f"{outcome.killed_after} turns and started again",
        ),
        (
            "cross-tenant hits",
            lambda o: o.leaked,
            f"{outcome.searches:,} searches for another tenant's marker; "
            f"{outcome.found}/{scale.tenants} tenants found their own",
        ),
    ]
    for name, figure, notes in checks:
        grown = "" if smaller is None else f"; {figure(smaller)} at {smaller.scale.tenants}"
        rows.append(
            Row(
                bench="fleet",
                name=f"{name}, {at}",
                value=figure(outcome),
                unit="",
                notes=f"goal 0; {notes}{grown}",
            )
        )
    return rows


def _where_time_goes(outcome: Outcome, floor: float) -> str:
    """The shares of the calls in the time of the turns that took ``floor`` or longer."""
    spent: Counter[str] = Counter()
    for ours, parts in zip(outcome.ours, outcome.parts, strict=True):
        if ours >= floor:
            spent.update(parts)
    total = sum(spent.values()) or 1.0
    shares = ", ".join(f"{name} {seconds / total:.0%}" for name, seconds in spent.most_common())
    return f"in the turns at or above it: {shares} (pool: getting the tenant's harness)"


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
