"""One replica of the fleet benchmark: ``python -m bench._fleet_worker CONFIG.json``.

``bench/bench_fleet.py`` starts several of these. A ``replay`` worker serves its share of
the tenants' conversations through one ``HarnessPool`` (S3 workspaces, the PostgreSQL
index, maintenance on), turn by turn, a window of conversations at a time, and appends
what it saw to its journal (``bench/_fleet.py``): each turn's time with the harness and
without it, every fact a flush reported written, every maintenance step and tick. Started
again after a kill, it reads the journals of its earlier lives and goes on from the last
turn each conversation finished, with the plain transcript so far, as a client that keeps
its own transcript would. A ``verify`` worker searches each of its tenants for the
tenant's own marker and for other tenants' markers.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from bench._fleet import Conversation, Journal, Message, agent_turns, marker, read_journal
from harnessmem import HarnessPool, MemoryHarness, hookimpl
from harnessmem.events import MemoryFlushedEvent
from harnessmem.telemetry import Span, Telemetry, names
from harnessmem.tokens import TokenCounter


class _Statements:
    """SQL statements sent by every SQLAlchemy engine of this process."""

    def __init__(self) -> None:
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        self.count = 0
        self._lock = threading.Lock()
        event.listen(Engine, "before_cursor_execute", self._seen)

    def _seen(self, *args: Any) -> None:
        with self._lock:
            self.count += 1


class _FactRecorder:
    """Journals the facts of every flush (the facts a flush reported written)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    @hookimpl
    def on_memory_flushed(self, event: MemoryFlushedEvent) -> None:
        tenant = event.session_id.rsplit("-c", 1)[0]
        self.journal.add("fact", tenant=tenant, path=event.path, entries=list(event.entries))


class _Recorded(Span):
    """A span that keeps the attributes set on it."""

    def __init__(self) -> None:
        self.attributes: dict[str, Any] = {}

    def set(self, key: str, value: Any) -> None:
        if value is not None:
            self.attributes[key] = value


class _TickRecorder(Telemetry):
    """Telemetry that journals each maintenance tick and each step run, per tenant
    (``gen_ai.memory.store.id`` names the tenant in a pool); every other span is a no-op."""

    _tick = threading.local()

    def __init__(self, journal: Journal, store_id: Callable[[], str] | None = None) -> None:
        self.journal = journal
        self._store_id = store_id

    def bind(self, store_id: Callable[[], str], redact: Callable[[str], str]) -> Telemetry:
        return _TickRecorder(self.journal, store_id)

    def span(
        self,
        name: str,
        *,
        kind: str = "internal",
        attributes: Mapping[str, Any] | None = None,
    ) -> AbstractContextManager[Span]:
        if self._store_id is not None and name == names.MAINTENANCE:
            return self._recorded("tick", None)
        if self._store_id is not None and name.startswith(names.MAINTENANCE_STEP):
            return self._recorded("step", name.removeprefix(names.MAINTENANCE_STEP))
        return super().span(name, kind=kind, attributes=attributes)

    @contextmanager
    def _recorded(self, kind: str, step: str | None) -> Iterator[Span]:
        assert self._store_id is not None
        span = _Recorded()
        if kind == "tick":
            self._tick.id = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        start = time.time()
        try:
            yield span
        finally:
            self.journal.add(
                kind,
                tenant=self._store_id(),
                tick=getattr(self._tick, "id", ""),
                step=step,
                start=start,
                end=time.time(),
                status=span.attributes.get(names.STATUS),
                skipped=span.attributes.get(names.SKIPPED_REASON),
            )


class _Replay:
    """One conversation replayed turn by turn, with the harness and without it."""

    def __init__(
        self, conversation: Conversation, run: list[Message], limit: int, done: int
    ) -> None:
        self.conversation = conversation
        self.turns = agent_turns(run, limit)
        self.next = done
        before = [m for turn in self.turns[:done] for m in turn]
        self.context: list[Message] = [run[0], *before]  # what the loop sends, with harnessmem
        self.plain: list[Message] = [run[0], *before]  # the same loop without it

    @property
    def finished(self) -> bool:
        return self.next >= len(self.turns)

    def plain_turn(self) -> float:
        """The loop without harnessmem: take in the turn's messages, send the request."""
        started = time.perf_counter()
        *incoming, answer = self.turns[self.next]
        self.plain.extend(incoming)
        json.dumps(self.plain)  # the request the model call sends
        self.plain.append(answer)
        return time.perf_counter() - started

    def harness_turn(self, harness: MemoryHarness, parts: dict[str, float]) -> float:
        """The same turn through the harness's session API; ``parts`` gets each call's
        seconds, by name."""
        started = time.perf_counter()
        *incoming, answer = self.turns[self.next]
        session = harness.session(self.conversation.session)

        def timed(name: str, call: Callable[..., Any], *args: Any) -> Any:
            begun = time.perf_counter()
            try:
                return call(*args)
            finally:
                parts[name] = parts.get(name, 0.0) + time.perf_counter() - begun

        for message in incoming:
            if message["role"] == "user" and self.context[-1]["role"] == "assistant":
                timed("after_call", session.after_call, self.context)  # the agent's call ended
                self.context.append(message)
            elif message["role"] == "tool":
                call = _call_of(self.context, message.get("tool_call_id"))
                text = timed(
                    "after_tool", session.after_tool, call, str(message.get("content") or "")
                )
                self.context.append({**message, "content": text})
            else:
                self.context.append(message)
        self.context = timed("before_reasoning", session.before_reasoning, self.context)
        json.dumps(self.context)
        self.context.append(answer)
        return time.perf_counter() - started

    def end(self, harness: MemoryHarness) -> float:
        """The conversation ends with the last answer: its ``after_call``, then ``close``."""
        started = time.perf_counter()
        session = harness.session(self.conversation.session)
        session.after_call(self.context)
        session.close(self.context)
        return time.perf_counter() - started


def _call_of(context: list[Message], call_id: str | None) -> dict[str, Any]:
    for message in reversed(context):
        for call in message.get("tool_calls") or ():
            if call.get("id") == call_id:
                return dict(call)
    return {"id": call_id or "", "type": "function", "function": {"name": "", "arguments": "{}"}}


def _resume(paths: list[str]) -> tuple[dict[str, int], set[str]]:
    """From earlier lives' journals: turns each conversation finished, tenants marked."""
    done: dict[str, int] = {}
    marked: set[str] = set()
    for path in paths:
        if not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            for record in read_journal(f):
                if record["kind"] == "turn":
                    done[record["session"]] = max(done.get(record["session"], 0), record["n"] + 1)
                elif record["kind"] == "marked":
                    marked.add(record["tenant"])
    return done, marked


def _pool(config: dict[str, Any], **extra: Any) -> HarnessPool:
    sections = dict(config["sections"])
    sections["workspace"] = {"storage_options": config["storage_options"]}
    return HarnessPool(
        config["template"],
        max_open=config["max_open"],
        index=config["index"],
        **{**sections, **extra},
    )


def replay(config: dict[str, Any]) -> None:
    """Replay this worker's conversations; ``lanes`` threads, each serving its part of the
    window in turn (a server answering several tenants at once)."""
    runs = [r["traj"] for r in json.loads(Path(config["data"]).read_text(encoding="utf-8"))]
    done, marked = _resume(config["previous"])
    journal = Journal(config["journal"])
    statements = _Statements()
    waiting = [
        Conversation(*c)
        for c in config["conversations"]
        if done.get(c[1], 0) < len(agent_turns(runs[c[2]], config["turns"]))
    ]
    waiting.reverse()
    lock = threading.Lock()
    pool = _pool(config, plugins=[_FactRecorder(journal)], telemetry=_TickRecorder(journal))

    def lane() -> None:
        active: list[_Replay] = []
        while True:
            with lock:
                while waiting and len(active) < config["window"] // config["lanes"]:
                    c = waiting.pop()
                    active.append(_Replay(c, runs[c.run], config["turns"], done.get(c.session, 0)))
            if not active:
                return
            for replay in list(active):
                tenant, session = replay.conversation.tenant, replay.conversation.session
                started = time.perf_counter()
                with pool.use(tenant) as harness:
                    parts = {"pool": time.perf_counter() - started}  # a miss opens the harness
                    if tenant not in marked and session.endswith("-c0"):
                        # The tenant's unique word, saved as the agent's memory_save would.
                        text = f"The fleet marker of this tenant is {marker(int(tenant[1:]))}"
                        harness.session(session).call_tool("memory_save", {"text": text})
                        marked.add(tenant)
                        journal.add("marked", tenant=tenant)
                    plain = replay.plain_turn()
                    ours = parts["pool"] + replay.harness_turn(harness, parts)
                    last = replay.next == len(replay.turns) - 1
                    end = replay.end(harness) if last else None
                journal.add(
                    "turn",
                    session=session,
                    n=replay.next,
                    ours=ours,
                    plain=plain,
                    parts=parts,
                    end=end,
                    statements=statements.count,
                )
                replay.next += 1
                if replay.finished:
                    active.remove(replay)

    try:
        if waiting:  # start-up is not a turn: imports, the index's engine, the S3 client
            pool.harness(waiting[-1].tenant)
            TokenCounter().count_text("warm up")
        _in_threads(lane, config["lanes"])
    finally:
        pool.close()
    journal.add("done", statements=statements.count, opened=pool.opened, evicted=pool.evicted)
    journal.close()


def _in_threads(work: Callable[[], None], count: int) -> None:
    """Run ``work`` in ``count`` threads; raise the first error any of them raised."""
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            work()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=guarded) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def verify(config: dict[str, Any]) -> None:
    """Search each tenant for its own marker and for the others' (none may be found)."""
    journal = Journal(config["journal"])
    searches = list(config["searches"].items())
    lock = threading.Lock()

    def lane() -> None:
        while True:
            with lock:
                if not searches:
                    return
                tenant, others = searches.pop()
            with pool.use(tenant) as harness:
                own = marker(int(tenant[1:]))
                found = any(own in hit.content for hit in harness.search(own, limit=5))
                leaked = sum(
                    other in hit.content
                    for other in others
                    for hit in harness.search(other, limit=5)
                )
            journal.add("verify", tenant=tenant, found=found, leaked=leaked, searched=len(others))

    with _pool(config, maintenance={"enabled": False}) as pool:
        _in_threads(lane, config["lanes"])
    journal.close()


def main(argv: list[str]) -> None:
    config = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    {"replay": replay, "verify": verify}[config["mode"]](config)


if __name__ == "__main__":
    main(sys.argv[1:])
