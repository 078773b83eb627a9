"""The fleet benchmark's checks: double ticks, lost facts, its plan and its journal."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench/_fleet.py``, imported from the checkout (bench/ is not installed)."""
    monkeypatch.syspath_prepend(str(ROOT))
    return importlib.import_module("bench._fleet")


def test_ticks_one_after_another_outside_the_window_are_not_double(fleet: ModuleType) -> None:
    step = fleet.StepRun
    runs = [
        step("t1", "consolidate", "a", 0.0, 1.0),
        step("t1", "reindex", "a", 1.0, 2.0),
        step("t1", "consolidate", "b", 5.0, 6.0),  # 5 s later, window 3 s
        step("t2", "consolidate", "c", 0.5, 1.5),  # another tenant at the same time
    ]
    assert fleet.double_ticks(runs, 3.0) == []


def test_two_ticks_of_one_tenant_at_once_are_double(fleet: ModuleType) -> None:
    step = fleet.StepRun
    runs = [
        step("t1", "archive", "a", 0.0, 2.0),
        step("t1", "prune_audit", "b", 1.0, 1.5),  # runs while a's step runs
        step("t1", "reindex", "a", 2.0, 3.0),
    ]
    assert fleet.double_ticks(runs, 0.5) == [("t1", "a", "b")]


def test_a_step_repeated_inside_the_window_is_double(fleet: ModuleType) -> None:
    step = fleet.StepRun
    runs = [
        step("t1", "consolidate", "b", 10.0, 11.0),
        step("t1", "consolidate", "a", 0.0, 1.0),
        step("t1", "consolidate", "c", 12.0, 13.0),  # 2 s after b: inside 3 s
    ]
    assert fleet.double_ticks(runs, 3.0) == [("t1", "b", "c")]


def test_a_fact_is_lost_when_no_bullet_of_its_tenant_holds_it(fleet: ModuleType) -> None:
    files = {
        "t1": [
            "## Memory Flush\n- The user   flies to Seattle\n",
            "# MEMORY\n- Likes window seats\n",
        ],
        "t2": ["- Pays with a gift card\n"],
    }
    claims = [
        ("t1", "The user flies to Seattle"),  # whitespace differs: the same bullet
        ("t1", "Likes window seats"),
        ("t1", "Pays with a gift card"),  # another tenant's file does not count
        ("t3", "Anything"),  # a tenant without files
    ]
    assert fleet.lost_facts(claims, files) == [
        ("t1", "Pays with a gift card"),
        ("t3", "Anything"),
    ]


def test_a_tenants_conversations_run_on_different_workers(fleet: ModuleType) -> None:
    shares = fleet.plan(tenants=10, workers=4, conversations=2, runs=150)
    conversations = [c for share in shares.values() for c in share]
    assert len(conversations) == 20
    by_tenant: dict[str, set[int]] = {}
    for c in conversations:
        by_tenant.setdefault(c.tenant, set()).add(c.worker)
    assert all(len(workers) == 2 for workers in by_tenant.values())
    assert len({fleet.marker(n) for n in range(500)}) == 500


def test_turns_end_at_each_model_answer(fleet: ModuleType) -> None:
    run = [
        {"role": "system", "content": "policy"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
        {"role": "tool", "tool_call_id": "1", "content": "{}"},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "bye"},
    ]
    turns = fleet.agent_turns(run, limit=2)
    assert [[m["role"] for m in turn] for turn in turns] == [
        ["user", "assistant"],
        ["tool", "assistant"],
    ]


def test_a_line_torn_by_a_kill_is_skipped(fleet: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = fleet.Journal(str(path))
    journal.add("turn", n=1)
    journal.close()
    with open(path, "a", encoding="utf-8") as f:
        f.write('{"kind":"turn","n":')  # the write a SIGKILL cut short
    lines = path.read_text(encoding="utf-8").splitlines()
    assert list(fleet.read_journal(lines)) == [{"kind": "turn", "n": 1}]
