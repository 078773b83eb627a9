"""OpenTelemetry spans and metrics, read back with the SDK's in-memory exporters, and an
export over OTLP/HTTP to a receiver on loopback."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harnessmem import MemoryHarness, hookimpl
from harnessmem.agent import Agent
from harnessmem.audit import read_audit
from harnessmem.backends.base import Completion
from harnessmem.errors import ConfigError
from harnessmem.layout import public_url
from harnessmem.pool import HarnessPool
from harnessmem.telemetry import OpenTelemetry, names
from harnessmem.testing import FakeClock, FakeOpenAIServer, ScriptedModel

MODEL = "openai/gpt-4o-mini"
SUMMARY = (
    "SESSION INTENT\nplan the trip\n\nSUMMARY\nthe user talked about the trip\n\n"
    "ARTIFACTS\nnone\n\nNEXT STEPS\nbook it"
)
TEXT_ATTRIBUTES = (names.MEMORY_QUERY_TEXT, names.MEMORY_RECORDS)


def reply(messages: list[dict[str, Any]], purpose: str) -> str:
    """The upkeep model: a summary, a fact per flush, consolidations that keep the facts."""
    text = messages[-1]["content"]
    if purpose == "summary":
        return SUMMARY
    if purpose == "consolidation":
        return "\n".join(["## Facts", *sorted(set(re.findall(r"(?m)^- .+$", text)))])
    said = re.findall(r"user says (\d+)", text)
    return f"- trip fact number {said[-1]}" if said else "- the user likes green tea"


class CachingModel(ScriptedModel):
    """A scripted model whose provider says it served part of each prompt from its cache."""

    def complete(self, messages: Any, *, purpose: str, max_tokens: int | None = None) -> Completion:
        answer = super().complete(messages, purpose=purpose, max_tokens=max_tokens)
        return replace(answer, cache_read_tokens=7, model="cached-model-1")


@dataclass
class Otel:
    """The SDK's in-memory span exporter and metric reader, and a telemetry that uses them."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    telemetry: OpenTelemetry

    def caller(self, name: str = "invoke_agent assistant") -> Any:
        """The agent's own span, as its framework would open it."""
        return self.tracer_provider.get_tracer("agent").start_as_current_span(name)

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        found = sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
        return [s for s in found if name is None or s.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.spans(name)
        return span

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        if span.parent is None:
            return None
        return next(s for s in self.spans() if s.context.span_id == span.parent.span_id)

    def children(self, span: ReadableSpan) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.parent and s.parent.span_id == span.context.span_id]

    def points(self, metric: str) -> list[tuple[dict[str, Any], Any]]:
        """Each data point of ``metric``: its attributes and its sum (counters) or count."""
        found = []
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for item in scope.metrics:
                    if item.name == metric:
                        for point in item.data.data_points:
                            value = getattr(point, "value", None)
                            found.append(
                                (
                                    dict(point.attributes),
                                    value if value is not None else point.count,
                                )
                            )
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry = OpenTelemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    yield Otel(exporter, reader, tracer_provider, telemetry)
    tracer_provider.shutdown()
    meter_provider.shutdown()


@pytest.fixture
def harness_with(
    tmp_path: Path, otel: Otel, clock: FakeClock
) -> Iterator[Callable[..., MemoryHarness]]:
    opened: list[MemoryHarness] = []

    def open_one(telemetry: Any = None, model: Any = None, **sections: Any) -> MemoryHarness:
        sections.setdefault("maintenance", {"enabled": False})
        harness = MemoryHarness.open(
            tmp_path / f"ws{len(opened)}",
            model=model or ScriptedModel(reply),
            clock=clock,
            telemetry=otel.telemetry if telemetry is None else telemetry,
            **sections,
        )
        opened.append(harness)
        return harness

    yield open_one
    for harness in opened:
        harness.close()


def chat(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You plan trips."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"user says {turn} about the trip"})
        messages.append({"role": "assistant", "content": f"answer {turn}"})
    return messages


def tool_call(name: str, arguments: Mapping[str, Any], call_id: str) -> dict[str, Any]:
    return {
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ]
    }


# -- a turn of the reference agent ---------------------------------------------------------------


def test_a_turn_of_the_reference_agent_nests_the_memory_spans_under_the_caller(
    harness_with: Callable[..., MemoryHarness],
    otel: Otel,
    servers: Callable[[Any], FakeOpenAIServer],
) -> None:
    """A turn with a compaction (its flush and summary), a memory_search, an evicted tool
    result and the end-of-turn flush: every span in the caller's trace, each where it
    belongs, with the GenAI attributes; no text attribute (not opted in)."""
    harness = harness_with(
        compaction={"trigger_messages": 14, "keep_messages": 4, "facts_in_summary": False},
        eviction={"max_result_chars": 2_000, "preview_chars": 200},
    )
    harness.save("- the user likes green tea")
    otel.exporter.clear()

    def run_tests() -> str:
        """Run the tests."""
        return "test_x PASSED\n" * 2_000

    server = servers(
        [
            tool_call("memory_search", {"query": "green tea"}, "call_1"),
            tool_call("run_tests", {}, "call_2"),
            "All done.",
        ]
    )
    agent = Agent(
        harness.session("trip"),
        MODEL,
        tools=[run_tests],
        api_base=server.base_url,
        api_key="sk-test",
        num_retries=0,
    )
    agent.messages = chat(8)
    with otel.caller() as caller:
        reply_ = agent.run("user says 99 about the trip: book it")
    assert reply_.text == "All done."
    root = otel.one("invoke_agent assistant")
    assert root.context.span_id == caller.get_span_context().span_id
    assert {s.context.trace_id for s in otel.spans()} == {root.context.trace_id}

    compact = otel.one(names.COMPACT)
    assert otel.parent(compact) is root
    assert compact.attributes[names.TRIGGER] == "messages"
    assert compact.attributes[names.DROPPED] > 0
    assert compact.attributes[names.CONVERSATION_ID] == "trip"
    inside = otel.children(compact)
    summary = [s for s in inside if s.attributes.get(names.PURPOSE) == "summary"]
    assert len(summary) == 1, [s.name for s in inside]
    assert summary[0].attributes[names.OPERATION_NAME] == names.CHAT
    flushed_before = [s for s in inside if s.name == names.CREATE_MEMORY]
    assert len(flushed_before) == 1
    assert any(s.attributes.get(names.PURPOSE) == "flush" for s in otel.children(flushed_before[0]))

    calls = otel.spans(f"chat {MODEL}")
    assert len(calls) == 3
    assert all(otel.parent(s) is root for s in calls)
    assert calls[0].attributes[names.CONVERSATION_COMPACTED] is True  # after the compaction
    assert names.CONVERSATION_COMPACTED not in calls[1].attributes
    assert calls[0].attributes[names.PROVIDER_NAME] == "openai"
    assert calls[0].attributes[names.USAGE_INPUT_TOKENS] > 0

    searched = otel.one("execute_tool memory_search")
    (search,) = otel.children(searched)
    assert search.name == names.SEARCH_MEMORY
    assert search.attributes[names.SEARCH_VIA] == "memory_search"
    assert search.attributes[names.MEMORY_RECORD_COUNT] >= 1
    assert search.attributes[names.MEMORY_STORE_ID] == public_url(harness.workspace.url)

    tool = otel.one("execute_tool run_tests")
    (event,) = tool.events
    assert event.name == names.EVICTED
    assert event.attributes[names.TOOL_NAME] == "run_tests"
    assert event.attributes[names.ORIGINAL_CHARS] == len(run_tests())

    flushes = [s for s in otel.spans(names.CREATE_MEMORY) if otel.parent(s) is root]
    assert len(flushes) == 1  # after_call's
    flush = flushes[0]
    assert flush.attributes[names.CONVERSATION_ID] == "trip"
    assert flush.attributes[names.MEMORY_RECORD_COUNT] == 1
    model_calls = [
        s for s in otel.children(flush) if s.attributes.get(names.OPERATION_NAME) == "chat"
    ]
    assert [s.attributes[names.PURPOSE] for s in model_calls] == ["flush"]

    # The span of a change names its audit record, and the record names the span.
    records = {r.id: r for r in read_audit(harness.workspace)}
    record = records[flush.attributes[names.AUDIT_RECORD_ID]]
    assert record.op == "flush"
    assert record.trace_id == format(flush.context.trace_id, "032x")
    assert record.span_id == format(flush.context.span_id, "016x")

    for span in otel.spans():
        assert not set(TEXT_ATTRIBUTES) & set(span.attributes), span.name


# -- each memory operation -----------------------------------------------------------------------


def test_each_memory_operation_has_its_genai_span(
    harness_with: Callable[..., MemoryHarness], otel: Otel
) -> None:
    harness = harness_with()
    with otel.caller():
        harness.save("- the user likes green tea")
        harness.search("green tea")
        harness.forget("green tea", replace_with="the user likes black coffee")
        harness.forget("black coffee")
        harness.flush(chat(1), session_id="s")
        harness.consolidate()
    operations = [
        (s.name, s.attributes.get(names.OPERATION))
        for s in otel.spans()
        if s.name in (names.CREATE_MEMORY, names.UPDATE_MEMORY, names.DELETE_MEMORY)
    ]
    assert operations == [
        (names.CREATE_MEMORY, "save"),
        (names.UPDATE_MEMORY, "edit"),
        (names.DELETE_MEMORY, "forget"),
        (names.CREATE_MEMORY, "flush"),
        (names.UPDATE_MEMORY, "consolidate"),
    ]
    audited = {r.id for r in read_audit(harness.workspace)}
    for span in otel.spans():
        if span.name in (names.CREATE_MEMORY, names.UPDATE_MEMORY, names.DELETE_MEMORY):
            assert span.attributes[names.OPERATION_NAME] == span.name
            assert span.attributes[names.AUDIT_RECORD_ID] in audited
            assert names.MEMORY_RECORD_COUNT in span.attributes or span.name == names.UPDATE_MEMORY
    consolidated = otel.spans(names.UPDATE_MEMORY)[-1]
    assert consolidated.attributes[names.STATUS] == "consolidated"
    assert otel.one(names.DELETE_MEMORY).attributes[names.MEMORY_RECORD_COUNT] == 1
    assert otel.points(names.CONSOLIDATIONS) == [({names.OUTCOME: "consolidated"}, 1)]


def test_text_is_captured_only_when_opted_in_and_then_redacted(
    harness_with: Callable[..., MemoryHarness], otel: Otel, tmp_path: Path
) -> None:
    class Muzzle:
        """A user's own transform: names no animal in what telemetry sends."""

        @hookimpl
        def transform_memory_text(self, text: str, source: str) -> str | None:
            return text.replace("otter", "[animal]") if source == "telemetry" else None

    secret = "sk-proj-" + "a1B2c3D4e5" * 4
    quiet = harness_with()
    quiet.save("- the otter naps at noon")
    quiet.search(f"otter {secret}")
    for span in otel.spans():
        assert not set(TEXT_ATTRIBUTES) & set(span.attributes)
    otel.exporter.clear()
    telling = OpenTelemetry(
        tracer_provider=otel.tracer_provider,
        meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]),
        capture_text=True,
    )
    harness = harness_with(telemetry=telling, plugins=[Muzzle()])
    harness.save("- the otter naps at noon")
    harness.search(f"otter {secret}")
    harness.forget("otter naps")
    (search,) = otel.spans(names.SEARCH_MEMORY)
    query = search.attributes[names.MEMORY_QUERY_TEXT]
    assert "[animal]" in query
    assert secret not in query  # the secret redactor ran too
    assert "otter" not in search.attributes[names.MEMORY_RECORDS]
    assert "[animal] naps at noon" in otel.one(names.CREATE_MEMORY).attributes[names.MEMORY_RECORDS]
    forgot = otel.one(names.DELETE_MEMORY)
    assert not set(TEXT_ATTRIBUTES) & set(forgot.attributes)  # a forget's query never
    assert not any("naps" in str(v) for v in forgot.attributes.values())


# -- across threads and tasks --------------------------------------------------------------------


def test_a_background_flush_nests_under_the_span_that_queued_it(
    harness_with: Callable[..., MemoryHarness], otel: Otel
) -> None:
    harness = harness_with(flush={"mode": "background"})
    session = harness.session("trip")
    with otel.caller() as caller:
        ctx = session.after_call(chat(2))
    assert ctx.outcomes["flush"].status == "queued"
    harness.kernel.flusher.drain(30)
    flush = otel.one(names.CREATE_MEMORY)
    assert flush.parent is not None
    assert flush.parent.span_id == caller.get_span_context().span_id
    (record,) = read_audit(harness.workspace)
    assert record.actor == "session:trip"
    assert record.span_id == format(flush.context.span_id, "016x")


def test_a_maintenance_tick_and_its_steps_nest_under_the_caller(
    harness_with: Callable[..., MemoryHarness], otel: Otel
) -> None:
    harness = harness_with()
    harness.flush(chat(1), session_id="s")
    otel.exporter.clear()
    with otel.caller("cron job"):
        harness.maintain(force=True)
    tick = otel.one(names.MAINTENANCE)
    assert otel.parent(tick) is otel.one("cron job")
    assert tick.attributes[names.TRIGGER] == "manual"
    steps = [s.name for s in otel.children(tick)]
    assert steps == [names.MAINTENANCE_STEP + s.name for s in harness.kernel.maintenance.steps]
    consolidate = otel.one(names.MAINTENANCE_STEP + "consolidate")
    (update,) = [s for s in otel.children(consolidate) if s.name == names.UPDATE_MEMORY]
    assert update.attributes[names.STATUS] == "consolidated"
    counted = {p["harnessmem.step"]: v for p, v in otel.points(names.MAINTENANCE_STEPS)}
    assert counted["consolidate"] == 1


def test_a_tick_a_flush_asked_for_runs_in_the_flush_s_trace(
    harness_with: Callable[..., MemoryHarness], otel: Otel
) -> None:
    """The maintenance thread runs the requested tick in the context of the request."""
    harness = harness_with(maintenance={"enabled": True}, consolidation={"min_new_tokens": 1})
    with otel.caller() as caller:
        harness.flush(chat(1), session_id="s")
    scheduler = harness.kernel.maintenance
    assert scheduler.wait_for_ticks(1, timeout=30)
    tick = otel.one(names.MAINTENANCE)
    assert tick.attributes[names.TRIGGER] == "request"
    assert tick.context.trace_id == caller.get_span_context().trace_id
    assert otel.parent(tick) is otel.one(names.CREATE_MEMORY)


def test_async_session_calls_nest_under_the_caller(
    harness_with: Callable[..., MemoryHarness], otel: Otel
) -> None:
    harness = harness_with(compaction={"trigger_messages": 10, "keep_messages": 4})
    session = harness.session("trip")

    async def turn() -> int:
        with otel.caller("invoke_agent async"):
            messages = await session.abefore_reasoning(chat(8))
            await session.aafter_call(messages)
        return threading.get_ident()

    asyncio.run(turn())
    root = otel.one("invoke_agent async")
    compact = otel.one(names.COMPACT)
    assert otel.parent(compact) is root
    assert compact.attributes[names.TRIGGER] == "messages"
    assert root.attributes[names.CONVERSATION_COMPACTED] is True  # the caller's span
    assert all(s.context.trace_id == root.context.trace_id for s in otel.spans())
    assert [otel.parent(s) for s in otel.spans(names.CREATE_MEMORY)][-1] is root


# -- model calls and metrics ---------------------------------------------------------------------


def test_upkeep_model_calls_carry_the_usage_and_the_metrics_count_by_purpose(
    harness_with: Callable[..., MemoryHarness], otel: Otel
) -> None:
    harness = harness_with(
        model=CachingModel(reply),
        compaction={"trigger_messages": 10, "keep_messages": 4, "facts_in_summary": False},
        eviction={"max_result_chars": 1_000, "preview_chars": 100},
    )
    session = harness.session("trip")
    messages = session.before_reasoning(chat(8))
    session.after_tool({"id": "c1", "function": {"name": "grep", "arguments": "{}"}}, "x" * 5_000)
    session.after_call([*messages, {"role": "user", "content": "user says 42"}])
    harness.consolidate()
    (flush_call, *_) = [s for s in otel.spans() if s.attributes.get(names.PURPOSE) == "flush"]
    attributes = flush_call.attributes
    assert flush_call.name == "chat"  # the scripted model has no name
    assert attributes[names.OPERATION_NAME] == "chat"
    assert attributes[names.PROVIDER_NAME] == "scripted"
    assert attributes[names.RESPONSE_MODEL] == "cached-model-1"
    assert attributes[names.USAGE_CACHE_READ_TOKENS] == 7
    assert attributes[names.USAGE_INPUT_TOKENS] > 0
    assert attributes[names.USAGE_OUTPUT_TOKENS] > 0
    tokens = otel.points(names.TOKEN_USAGE)
    purposes = {(p[names.PURPOSE], p[names.TOKEN_TYPE]) for p, _ in tokens}
    assert purposes == {
        (purpose, kind)
        for purpose in ("summary", "flush", "consolidation")
        for kind in ("input", "output")
    }
    assert all(p[names.RESPONSE_MODEL] == "cached-model-1" for p, _ in tokens)
    durations = {p[names.OPERATION_NAME] for p, _ in otel.points(names.OPERATION_DURATION)}
    assert {"chat", names.CREATE_MEMORY, names.UPDATE_MEMORY} <= durations
    assert otel.points(names.COMPACTIONS) == [
        ({names.TRIGGER: "messages", names.OUTCOME: "compacted"}, 1)
    ]
    assert otel.points(names.EVICTIONS) == [({names.EVICTION_STAGE: "post_acting"}, 1)]
    assert {p[names.OUTCOME]: v for p, v in otel.points(names.FLUSHES)} == {"written": 2}


def test_a_failed_model_call_is_an_error_span_and_a_failed_flush(
    harness_with: Callable[..., MemoryHarness], otel: Otel
) -> None:
    from harnessmem.errors import ModelUnavailableError

    harness = harness_with(model=ScriptedModel([ModelUnavailableError("the model is down")]))
    with pytest.raises(ModelUnavailableError):
        harness.flush(chat(1), session_id="s")
    (call,) = [s for s in otel.spans() if s.attributes.get(names.PURPOSE) == "flush"]
    assert call.attributes[names.ERROR_TYPE] == "ModelUnavailableError"
    assert not call.status.is_ok
    flush = otel.one(names.CREATE_MEMORY)
    assert flush.attributes[names.ERROR_TYPE] == "ModelUnavailableError"
    assert {p[names.OUTCOME]: v for p, v in otel.points(names.FLUSHES)} == {"failed": 1}


def test_a_pool_s_tenants_share_one_telemetry_and_name_their_store(
    tmp_path: Path, otel: Otel
) -> None:
    with HarnessPool(
        str(tmp_path / "{tenant}"), telemetry=otel.telemetry, maintenance={"enabled": False}
    ) as pool:
        pool.harness("acme").save("- acme likes tea")
        pool.harness("globex").save("- globex likes coffee")
    stores = [s.attributes[names.MEMORY_STORE_ID] for s in otel.spans(names.CREATE_MEMORY)]
    assert stores == ["acme", "globex"]


def test_the_store_id_never_carries_credentials() -> None:
    assert public_url("s3://key:secret@bucket/agents/x?token=abc#y") == "s3://bucket/agents/x"
    assert public_url("/srv/agents/x") == "/srv/agents/x"
    assert public_url("file:///srv/x") == "file:///srv/x"


# -- configuration -------------------------------------------------------------------------------


def test_with_telemetry_off_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    code = """
import sys
from harnessmem import MemoryHarness
with MemoryHarness.open(sys.argv[1], maintenance={"enabled": False}) as harness:
    harness.save("- the user likes tea")
    harness.search("tea")
    harness.session("s").before_reasoning([{"role": "user", "content": "hi"}])
print(sorted(m for m in sys.modules if m.startswith(("opentelemetry", "harnessmem.telemetry."))))
"""
    env = {"PYTHONPATH": str(Path(__file__).parents[1] / "core"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip().splitlines()[-1]
        == "['harnessmem.telemetry.base', 'harnessmem.telemetry.names']"
    )


def test_an_exporter_without_the_sdk_is_a_config_error_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with pytest.raises(ConfigError) as caught:
        MemoryHarness.open(tmp_path / "ws", telemetry={"enabled": True, "exporter": "otlp"})
    assert caught.value.message.startswith(
        "telemetry.exporter: 'otlp' needs opentelemetry-sdk, which is not installed"
    )
    assert "harnessmem[otel-export]" in (caught.value.hint or "")
    assert not (tmp_path / "ws").exists()
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    with pytest.raises(ConfigError, match=r"needs opentelemetry-api") as caught:
        MemoryHarness.open(tmp_path / "ws", telemetry={"enabled": True})
    assert "harnessmem[otel]" in (caught.value.hint or "")
    assert not (tmp_path / "ws").exists()


# -- OTLP/HTTP -----------------------------------------------------------------------------------


class _Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP receiver on loopback: keeps each request's path, headers and body."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        super().__init__(("127.0.0.1", 0), _Handler)
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(10)


class _Handler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        self.server.received.append((self.path, dict(self.headers.items()), body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_spans_and_metrics_go_over_otlp_http_as_documented(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The configuration docs/observability.md shows, against a receiver on loopback; the
    protobuf is decoded with opentelemetry-proto."""
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    from harnessmem.testing.recorders import loopback_only

    for proxy in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"):
        monkeypatch.delenv(proxy, raising=False)
    refused = loopback_only(monkeypatch)
    receiver = _Receiver()
    try:
        with MemoryHarness.open(
            tmp_path / "ws",
            maintenance={"enabled": False},
            telemetry={
                "enabled": True,
                "exporter": "otlp",
                "endpoint": receiver.endpoint,
                "headers": {"x-api-key": "collector-key"},
                "service_name": "support-agent",
            },
        ) as harness:
            harness.save("- the user likes tea")
            harness.search("tea")
    finally:
        receiver.close()
    assert refused == []
    traces = [r for r in receiver.received if r[0] == "/v1/traces"]
    metrics = [r for r in receiver.received if r[0] == "/v1/metrics"]
    assert traces, receiver.received
    assert metrics, receiver.received
    assert all(headers.get("x-api-key") == "collector-key" for _, headers, _ in traces)
    spans = []
    for _, _, body in traces:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_spans:
            service = {a.key: a.value.string_value for a in resource.resource.attributes}
            assert service["service.name"] == "support-agent"
            for scope in resource.scope_spans:
                assert scope.scope.name == "harnessmem"
                spans.extend(scope.spans)
    by_name = {span.name: {a.key: a.value for a in span.attributes} for span in spans}
    assert set(by_name) == {names.CREATE_MEMORY, names.SEARCH_MEMORY}
    assert by_name[names.CREATE_MEMORY][names.MEMORY_RECORD_COUNT].int_value == 1
    assert by_name[names.SEARCH_MEMORY][names.OPERATION_NAME].string_value == "search_memory"
    exported = set()
    for _, _, body in metrics:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource in request.resource_metrics:
            for scope in resource.scope_metrics:
                exported.update(metric.name for metric in scope.metrics)
    assert names.OPERATION_DURATION in exported
