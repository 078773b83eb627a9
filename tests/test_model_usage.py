"""Per-purpose routing, the usage and cost ledger, and the daily upkeep budget."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from harnessmem import HarnessSettings, MemoryHarness, hookimpl
from harnessmem.backends.extractive import ExtractiveBackend
from harnessmem.errors import ModelUnavailableError
from harnessmem.events import BudgetExceededEvent
from harnessmem.models.usage import UsageLedger, UsageRecord, UsageTotals
from harnessmem.testing import FakeClock, FakeOpenAIServer, ScriptedModel
from harnessmem.testing.model_suite import job_request

NOON = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def open_harness(
    path: Path,
    clock: FakeClock,
    instance: ScriptedModel | None = None,
    plugins: Sequence[object] = (),
    **sections: Any,
) -> MemoryHarness:
    """A harness on ``path``; ``instance`` serves every purpose under the ``model`` settings."""
    settings = HarnessSettings.load(
        workspace={"url": str(path)}, maintenance={"enabled": False}, **sections
    )
    return MemoryHarness(settings, model=instance, clock=clock, plugins=plugins)


class BudgetWatcher:
    def __init__(self) -> None:
        self.events: list[BudgetExceededEvent] = []

    @hookimpl
    def on_budget_exceeded(self, event: BudgetExceededEvent) -> None:
        self.events.append(event)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOON)


@pytest.fixture
def harness(tmp_path: Path, clock: FakeClock) -> Iterator[MemoryHarness]:
    with open_harness(tmp_path / "ws", clock) as opened:
        yield opened


# -- routing ------------------------------------------------------------------------------------


def test_with_no_configuration_every_purpose_is_served_offline(harness: MemoryHarness) -> None:
    for purpose in ("summary", "flush", "consolidation"):
        model = harness.kernel.model_for(purpose)
        assert isinstance(model.backend, ExtractiveBackend)
        answer = model.complete(job_request(purpose), purpose=purpose)
        assert answer.model == "extractive"
        assert answer.cost == 0.0


def test_each_purpose_reaches_its_own_model(tmp_path: Path, clock: FakeClock) -> None:
    with FakeOpenAIServer(lambda body: f"answered by {body['model']}") as server:
        options = {"api_base": server.base_url, "api_key": "sk-test"}
        with open_harness(
            tmp_path / "ws",
            clock,
            model={
                "name": "openai/gpt-4o",
                "options": options,
                "flush": {"name": "openai/gpt-4o-mini", "max_tokens": 300},
            },
        ) as harness:
            answers = {
                purpose: harness.kernel.model_for(purpose).complete(
                    job_request(purpose), purpose=purpose
                )
                for purpose in ("summary", "flush", "consolidation")
            }
            report = harness.usage()

    assert answers["summary"].text == "answered by gpt-4o"
    assert answers["flush"].text == "answered by gpt-4o-mini"
    assert answers["consolidation"].text == "answered by gpt-4o"
    caps = {r.body["model"] + ":" + str(r.body["max_tokens"]) for r in server.requests}
    # model.max_tokens 2000 for summaries; the flush's own cap; consolidation gets room for
    # the whole 4,000-token MEMORY.md (plus a quarter).
    assert caps == {"gpt-4o:2000", "gpt-4o-mini:300", "gpt-4o:5000"}
    assert set(report.purposes) == {"summary", "flush", "consolidation"}
    assert set(report.purposes["flush"]) == {"gpt-4o-mini"}
    assert report.total.calls == 3
    assert report.total.cost > 0


def test_a_purpose_may_use_another_backend(tmp_path: Path, clock: FakeClock) -> None:
    with (
        FakeOpenAIServer("llm summary") as server,
        open_harness(
            tmp_path / "ws",
            clock,
            model={
                "name": "openai/gpt-4o-mini",
                "options": {"api_base": server.base_url, "api_key": "sk-test"},
                "flush": {"backend": "extractive", "options": {"max_facts": 5}},
            },
        ) as harness,
    ):
        flush = harness.kernel.model_for("flush")
        flushed = flush.complete(job_request("flush"), purpose="flush")
        summary = harness.kernel.model_for("summary").complete(
            job_request("summary"), purpose="summary"
        )

    assert isinstance(flush.backend, ExtractiveBackend)
    assert flush.backend.options.max_facts == 5, "model.options are litellm's, not merged"
    assert flushed.model == "extractive"
    assert summary.text == "llm summary"
    assert len(server.requests) == 1


def test_bad_options_of_a_purpose_are_config_errors_at_open(tmp_path: Path) -> None:
    from harnessmem.errors import ConfigError

    with pytest.raises(ConfigError, match=r"model\.flush\.options\.max_facts"):
        MemoryHarness.open(
            tmp_path / "ws", model={"flush": {"backend": "extractive", "options": {"max_facts": 0}}}
        )


# -- usage --------------------------------------------------------------------------------------


def test_usage_counts_calls_tokens_and_cost_per_purpose_and_model(
    tmp_path: Path, clock: FakeClock
) -> None:
    model = ScriptedModel("- The user likes tea.", model="scripted-1")
    with open_harness(tmp_path / "ws", clock, model) as harness:
        flush = harness.kernel.model_for("flush")
        answers = [flush.complete(job_request("flush"), purpose="flush") for _ in range(3)]
        harness.kernel.model_for("summary").complete(job_request("summary"), purpose="summary")
        model.fail_with = ModelUnavailableError("down")
        with pytest.raises(ModelUnavailableError):
            flush.complete(job_request("flush"), purpose="flush")
        report = harness.usage()

    flush_totals = report.purposes["flush"]["scripted-1"]
    assert flush_totals.calls == 4
    assert flush_totals.failures == 1
    assert flush_totals.prompt_tokens == 3 * answers[0].prompt_tokens
    assert flush_totals.completion_tokens == 3 * answers[0].completion_tokens
    assert report.by_purpose()["summary"].calls == 1
    assert report.by_model()["scripted-1"].calls == 5
    assert report.total.cost == 0.0
    assert report.days == ("2027-01-15",)
    assert report.as_dict()["purposes"]["flush"]["scripted-1"]["failures"] == 1


def test_usage_is_kept_in_the_workspace_for_other_processes(
    tmp_path: Path, clock: FakeClock
) -> None:
    with open_harness(tmp_path / "ws", clock, ScriptedModel("ok")) as first:
        first.kernel.model_for("flush").complete(job_request("flush"), purpose="flush")
    clock.advance(86_400)
    with open_harness(tmp_path / "ws", clock, ScriptedModel("ok")) as second:
        second.kernel.model_for("summary").complete(job_request("summary"), purpose="summary")
        everything = second.usage()
        today = second.usage(days=1)

    lines = (tmp_path / "ws" / "usage" / "2027-01-15.jsonl").read_text().splitlines()
    assert [json.loads(line)["purpose"] for line in lines] == ["flush"]
    assert everything.days == ("2027-01-15", "2027-01-16")
    assert everything.total.calls == 2
    assert today.days == ("2027-01-16",)
    assert set(today.purposes) == {"summary"}


def test_usage_can_stay_in_memory(tmp_path: Path, clock: FakeClock) -> None:
    with open_harness(
        tmp_path / "ws", clock, ScriptedModel("ok"), model={"record_usage": False}
    ) as harness:
        harness.kernel.model_for("flush").complete(job_request("flush"), purpose="flush")
        assert harness.usage().total.calls == 1
    assert not (tmp_path / "ws" / "usage").exists()


def test_torn_ledger_lines_are_skipped(tmp_path: Path, clock: FakeClock) -> None:
    with open_harness(tmp_path / "ws", clock, ScriptedModel("ok")) as harness:
        harness.kernel.model_for("flush").complete(job_request("flush"), purpose="flush")
        assert harness.usage().total.calls == 1  # a report writes what is pending first
        path = tmp_path / "ws" / "usage" / "2027-01-15.jsonl"
        path.write_text(path.read_text() + '{"at": 1, "purp\n')
        assert harness.usage().total.calls == 1


def test_records_are_written_in_batches_and_on_close(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "ws" / "usage" / "2027-01-15.jsonl"
    with open_harness(tmp_path / "ws", clock, ScriptedModel("ok")) as harness:
        flush = harness.kernel.model_for("flush")
        for _ in range(3):
            flush.complete(job_request("flush"), purpose="flush")
        assert not path.exists(), "one write per batch, not per call"
        clock.advance(UsageLedger.flush_interval)
        flush.complete(job_request("flush"), purpose="flush")
        assert len(path.read_text().splitlines()) == 4
        flush.complete(job_request("flush"), purpose="flush")
    assert len(path.read_text().splitlines()) == 5, "close() writes what is pending"


def test_a_failed_write_keeps_the_usage_in_memory(
    tmp_path: Path,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with open_harness(tmp_path / "ws", clock, ScriptedModel("ok")) as harness:

        def broken(path: str, text: str) -> None:
            raise OSError("disk full")

        monkeypatch.setattr(harness.workspace, "append_text", broken)
        with caplog.at_level(logging.WARNING, logger="harnessmem.models"):
            for _ in range(2):
                harness.kernel.model_for("flush").complete(job_request("flush"), purpose="flush")
                report = harness.usage()

    assert report.total.calls == 2
    assert report.days == ("2027-01-15",)
    assert [r.getMessage().split(" failed")[0] for r in caplog.records] == [
        "recording model usage in usage/2027-01-15.jsonl"
    ]


def test_async_calls_are_recorded_too(harness: MemoryHarness) -> None:
    model = harness.kernel.model_for("flush")
    asyncio.run(model.acomplete(job_request("flush"), purpose="flush"))

    assert harness.usage().purposes["flush"]["extractive"].calls == 1


def test_usage_totals_add_up() -> None:
    record = UsageRecord(1.0, "flush", "m", "b", 10, 5, None)
    totals = UsageTotals().add(record).add(record)

    assert totals == UsageTotals(calls=2, prompt_tokens=20, completion_tokens=10, unpriced=2)
    assert (totals + totals).total_tokens == 60
    assert UsageRecord.from_json(record.to_json()) == record
    assert UsageRecord.from_json("not json") is None


# -- budget -------------------------------------------------------------------------------------


def test_past_the_daily_budget_upkeep_runs_offline_and_says_so(
    tmp_path: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel("- The user likes tea.", model="paid-model")
    watcher = BudgetWatcher()
    with open_harness(
        tmp_path / "ws", clock, model, [watcher], model={"budget": {"daily_tokens": 1_000}}
    ) as harness:
        flush = harness.kernel.model_for("flush")
        spent = 0
        while spent < 1_000:
            spent += flush.complete(job_request("flush"), purpose="flush").total_tokens
        paid_calls = len(model.calls)
        with caplog.at_level(logging.WARNING, logger="harnessmem.models"):
            offline = flush.complete(job_request("flush"), purpose="flush")
            consolidated = harness.kernel.model_for("consolidation").complete(
                job_request("consolidation"), purpose="consolidation"
            )
            summary = harness.kernel.model_for("summary").complete(
                job_request("summary"), purpose="summary"
            )
        report = harness.usage()
        clock.advance(86_400)
        next_day = flush.complete(job_request("flush"), purpose="flush")

    assert offline.model == "extractive"
    assert offline.text != "- The user likes tea."
    assert consolidated.model == "extractive"
    assert summary.model == "paid-model", "compaction is never held back by the budget"
    assert len(model.calls) == paid_calls + 2  # the summary, then the next day's flush
    assert next_day.model == "paid-model"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1, "one warning per day"
    assert "daily model budget reached (2027-01-15:" in warnings[0]
    assert "flush and consolidation use the offline extractive backend" in warnings[0]
    assert report.fallbacks == 2
    assert report.budget is not None
    assert report.budget.exceeded
    assert report.budget.tokens >= 1_000
    assert report.purposes["flush"]["extractive"].calls == 1
    (event,) = watcher.events  # once per day, like the warning
    assert event.day == "2027-01-15"
    assert event.tokens >= 1_000
    assert event.daily_tokens == 1_000
    assert event.diverted == ("consolidation", "flush")


def test_the_cost_budget_counts_every_process(tmp_path: Path, clock: FakeClock) -> None:
    with FakeOpenAIServer("- The user likes tea.") as server:
        settings = {
            "name": "openai/gpt-4o-mini",
            "options": {"api_base": server.base_url, "api_key": "sk-test"},
            "budget": {"daily_cost": 1e-9},
        }
        with open_harness(tmp_path / "ws", clock, model=settings) as first:
            first.kernel.model_for("flush").complete(job_request("flush"), purpose="flush")
        with open_harness(tmp_path / "ws", clock, model=settings) as second:
            answer = second.kernel.model_for("flush").complete(
                job_request("flush"), purpose="flush"
            )
            status = second.usage().budget

    assert len(server.requests) == 1, "the second process saw the first one's spending"
    assert answer.model == "extractive"
    assert status is not None
    assert status.cost > 1e-9


def test_without_a_budget_there_is_no_budget_status(harness: MemoryHarness) -> None:
    assert harness.usage().budget is None


def test_the_ledger_reads_other_processes_at_most_every_refresh(
    tmp_path: Path, clock: FakeClock
) -> None:
    from harnessmem.settings import ModelBudgetSettings
    from harnessmem.workspace import Workspace

    workspace = Workspace.open(tmp_path / "ws")
    budget = ModelBudgetSettings(daily_tokens=100)
    mine = UsageLedger(workspace, clock=clock, budget=budget)
    other = UsageLedger(workspace, clock=clock, budget=budget)
    assert mine.status() is not None
    other.record(UsageRecord(clock(), "flush", "m", "litellm", 80, 40))
    other.flush()

    first = mine.status()
    clock.advance(UsageLedger.refresh)
    later = mine.status()

    assert first is not None
    assert later is not None
    assert not first.exceeded, "the other process's call is not read again at once"
    assert later.exceeded


# -- the command line ---------------------------------------------------------------------------


def test_the_usage_command_shows_the_ledger(tmp_path: Path, clock: FakeClock) -> None:
    from click.testing import CliRunner

    from harnessmem.cli import main

    workspace = tmp_path / "ws"
    (workspace / "memory").mkdir(parents=True)  # a workspace (read commands create none)
    runner = CliRunner()
    empty = runner.invoke(main, ["usage", "-w", str(workspace)])
    with open_harness(workspace, clock, ScriptedModel("- fact", model="small-model")) as harness:
        harness.kernel.model_for("flush").complete(job_request("flush"), purpose="flush")
    shown = runner.invoke(main, ["usage", "-w", str(workspace)])
    as_json = runner.invoke(main, ["usage", "-w", str(workspace), "--json"])

    assert empty.exit_code == 0
    assert "no model calls recorded" in empty.output
    assert shown.exit_code == 0, shown.output
    assert "flush" in shown.output
    assert "small-model" in shown.output
    assert json.loads(as_json.output)["purposes"]["flush"]["small-model"]["calls"] == 1
