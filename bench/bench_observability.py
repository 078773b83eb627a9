"""What observability costs: a turn with telemetry off and on, and the audit log's appends.

- *turn*: one agent turn through the session API (append a user message,
  ``before_reasoning``, a small ``after_tool``, append the answer, ``after_call``, whose
  flush holds the turn back under ``flush.batch_tokens`` as it does on most turns) of a
  200-message conversation; and a turn whose flush writes a fact (a scripted model), as
  each turn does with ``flush.batch_tokens = 0``. Telemetry on is the OpenTelemetry SDK as
  a program sets it up (a tracer provider with a batch span processor, a meter provider
  with a reader) with an exporter that drops everything: the cost of making the spans and
  metrics. Baseline, same run, alternating: the same turn with telemetry off (the
  default).
- *the no-op seam*: what an instrumented operation costs with telemetry off: entering and
  leaving ``kernel.telemetry.memory(...)`` (the shared no-op) against an empty ``with``.
- *audit*: a ``memory_save`` and a ``flush`` with the audit log on, against the same
  operation with it off (alternating, fresh facts each call): the record's append
  (``O_APPEND`` + fsync locally). On S3 (moto on loopback): a save's requests and time
  with the audit log on and off (its GET + conditional PUT).
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from bench._util import Row, median_seconds, paired_medians

Message = dict[str, Any]
SIZE = 200


def run(quick: bool) -> list[Row]:
    try:
        from opentelemetry.sdk.trace.export import SpanExporter  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        print(f"bench observability: skipped, {exc}", file=sys.stderr)
        return []
    repeat, number = (5, 5) if quick else (15, 20)
    rows = [*_turn(repeat, number), _seam(), *_audit(repeat, max(2, number // 4))]
    rows.extend(_audit_s3(rounds=3 if quick else 10))
    return rows


def _conversation(size: int) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": "You plan trips."}]
    for turn in range(size // 2):
        messages.append({"role": "user", "content": f"turn {turn}: where do we stay in Kyoto?"})
        messages.append({"role": "assistant", "content": f"turn {turn}: a ryokan near Gion."})
    return messages


@contextlib.contextmanager
def _sdk() -> Iterator[Any]:
    """An OpenTelemetry telemetry on the SDK, exporting to nowhere."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from harnessmem.telemetry import OpenTelemetry

    class Drop(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(Drop()))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    try:
        yield OpenTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    finally:
        tracer_provider.shutdown()
        meter_provider.shutdown()


def _turn(repeat: int, number: int) -> list[Row]:
    return [
        _one_turn(repeat, number, flushing=False),
        _one_turn(repeat, max(2, number // 4), flushing=True),
    ]


def _one_turn(repeat: int, number: int, *, flushing: bool) -> Row:
    """A turn below the triggers; ``flushing``: one whose ``after_call`` flushes (a scripted
    fact, written to the daily log: the ``create_memory``, ``chat`` and dedup
    ``search_memory`` spans), as every turn does with ``flush.batch_tokens = 0``."""
    from harnessmem import MemoryHarness
    from harnessmem.testing import ScriptedModel

    counter = itertools.count()
    facts = itertools.count()

    def fact(messages: list[Message], purpose: str) -> str:
        return f"- the benchmark fact number {next(facts)} is remembered"

    call = {"id": "call_1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
    with tempfile.TemporaryDirectory(prefix="bench-obs-") as tmp, _sdk() as telemetry:
        sessions = []
        for name, given in (("on", telemetry), ("off", None)):
            harness = MemoryHarness.open(
                Path(tmp) / name,
                model=ScriptedModel(fact),
                maintenance={"enabled": False},
                flush={"batch_tokens": 0} if flushing else {},
                telemetry=given,
            )
            session = harness.session("bench")
            state = {"messages": session.before_reasoning(_conversation(SIZE))}
            sessions.append((harness, session, state))

        def turn(session: Any, state: dict[str, list[Message]]) -> None:
            i = next(counter)
            messages = state["messages"]
            messages.append({"role": "user", "content": f"and turn {i}?"})
            messages = session.before_reasoning(messages)
            session.after_tool(call, "3 matches")
            messages.append({"role": "assistant", "content": f"answer {i}"})
            session.after_call(messages)
            del messages[-2:]  # the size stays put: the turn, not the growth, is measured
            state["messages"] = messages

        (on, on_session, on_state), (off, off_session, off_state) = sessions
        with on, off:
            per_on, per_off = paired_medians(
                lambda: turn(on_session, on_state),
                lambda: turn(off_session, off_state),
                repeat=repeat,
                number=number,
            )
    kind = "a turn that flushes" if flushing else "a turn"
    what = "a flush that writes a fact" if flushing else "a batched flush"
    return Row(
        bench="observability",
        name=f"{kind} with telemetry on (SDK, no-op exporter), {SIZE} msgs",
        value=per_on,
        unit="s",
        baseline="the same turn, telemetry off",
        baseline_value=per_off,
        notes=f"before_reasoning + after_tool + after_call ({what}); goal <= 1.10",
    )


def _seam() -> Row:
    from harnessmem.telemetry import Telemetry

    telemetry = Telemetry()
    empty = contextlib.nullcontext()

    def instrumented() -> None:
        with telemetry.memory("search_memory", session_id="s") as span:
            span.records(0)

    def bare() -> None:
        with empty:
            pass

    ours = median_seconds(instrumented, repeat=7, number=100_000)
    base = median_seconds(bare, repeat=7, number=100_000)
    return Row(
        bench="observability",
        name="an instrumented operation with telemetry off (the no-op span)",
        value=ours,
        unit="s",
        baseline="an empty with-block",
        baseline_value=base,
        notes="what telemetry off adds to each search, flush, save, compaction ...",
    )


def _audit(repeat: int, number: int) -> list[Row]:
    from harnessmem import MemoryHarness
    from harnessmem.testing import ScriptedModel

    facts = itertools.count()

    def fact(messages: list[Message], purpose: str) -> str:
        return f"- the benchmark fact number {next(facts)} is remembered"

    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-audit-") as tmp:
        harnesses = {
            name: MemoryHarness.open(
                Path(tmp) / name,
                model=ScriptedModel(fact),
                maintenance={"enabled": False},
                flush={"batch_tokens": 0, "dedup_search": False},
                audit={"enabled": name == "on"},
            )
            for name in ("on", "off")
        }
        with harnesses["on"], harnesses["off"]:

            def save(name: str) -> None:
                harnesses[name].save(f"- saved fact {next(facts)}")

            def flush(name: str) -> None:
                n = next(facts)
                harnesses[name].flush(
                    [{"role": "user", "content": f"fact {n}"}], session_id=f"s{n}"
                )

            for what, operation in (("memory_save", save), ("flush", flush)):
                ours, base = paired_medians(
                    lambda operation=operation: operation("on"),
                    lambda operation=operation: operation("off"),
                    repeat=repeat,
                    number=number,
                )
                rows.append(
                    Row(
                        bench="observability",
                        name=f"{what} with the audit log on, local folder",
                        value=ours,
                        unit="s",
                        baseline=f"{what}, audit log off",
                        baseline_value=base,
                        notes="one record: O_APPEND + fsync of audit/<day>.jsonl",
                    )
                )
    return rows


def _audit_s3(rounds: int) -> list[Row]:
    try:
        from harnessmem.testing.s3_server import S3TestServer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        print(f"bench observability: S3 rows skipped, {exc}", file=sys.stderr)
        return []
    import logging
    import os
    import statistics
    import time

    from harnessmem import MemoryHarness

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    saved = {key: os.environ.get(key) for key in [*env, "XDG_CACHE_HOME"]}
    facts = itertools.count()
    samples: dict[str, list[float]] = {"on": [], "off": []}
    requests: dict[str, list[int]] = {"on": [], "off": []}
    with tempfile.TemporaryDirectory() as cache:
        os.environ.update({**env, "XDG_CACHE_HOME": cache})
        try:
            with S3TestServer() as server:
                options = server.storage_options()
                harnesses = {
                    name: MemoryHarness.open(
                        f"s3://{server.create_bucket()}/ws",
                        workspace={"storage_options": options},
                        maintenance={"enabled": False},
                        model={"record_usage": False},
                        audit={"enabled": name == "on"},
                    )
                    for name in ("on", "off")
                }
                with harnesses["on"], harnesses["off"]:
                    for name in ("on", "off"):  # the first save creates MEMORY.md: not timed
                        harnesses[name].save(f"- warm up {next(facts)}")
                    for _ in range(rounds):
                        for name in ("on", "off"):
                            with server.record() as seen:
                                started = time.perf_counter()
                                harnesses[name].save(f"- saved fact {next(facts)}")
                                samples[name].append(time.perf_counter() - started)
                            requests[name].append(len(seen))
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return [
        Row(
            bench="observability",
            name="memory_save with the audit log on, S3 (moto): requests",
            value=statistics.median(requests["on"]),
            unit="requests",
            baseline="memory_save, audit log off",
            baseline_value=statistics.median(requests["off"]),
            notes="the record: a GET and a conditional PUT of audit/<day>.jsonl",
        ),
        Row(
            bench="observability",
            name="memory_save with the audit log on, S3 (moto): time",
            value=statistics.median(samples["on"]),
            unit="s",
            baseline="memory_save, audit log off",
            baseline_value=statistics.median(samples["off"]),
            notes=f"medians of {rounds} saves each, alternating",
        ),
    ]


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
