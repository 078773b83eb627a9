"""Chaos: a long replay under storage faults, model faults and SIGKILLs; nothing lost or leaked.

A child process replays a conversation turn by turn (``before_reasoning``, ``after_call``,
a ``save`` every few turns) and keeps the driver's own state (the list it would send next,
the saves that were acknowledged) in a file outside the workspace, as an agent loop would.
Its model fails at random (rate limits, timeouts, junk answers). It is killed with SIGKILL
at a seeded storage write (before or after the write lands), then started again from its
state; on S3, moto answers 500/503 or drops the connection on seeded requests meanwhile.
A last run without faults finishes the replay. Then:

- every acknowledged save is in MEMORY.md exactly once (none is lost, none doubled);
- every user turn is in the final context or in the session log, and none is logged twice;
- the secret said in some turns is nowhere on disk (workspace, index, caches).

The counts (runs, kills, faults, saves, logged turns) are printed and kept as the test's
user properties. Seeded (``HARNESSMEM_CHAOS_SEED``) and bounded: ``HARNESSMEM_CHAOS_TURNS``
turns (default 60), at most ``_KILLS`` kills, every child under a time limit.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from harnessmem.testing.s3_server import S3Fault

if TYPE_CHECKING:
    from conftest import WorkspaceTarget
    from harnessmem.testing.s3_server import S3TestServer

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="needs SIGKILL"),
    pytest.mark.slow,
]

SEED = int(os.environ.get("HARNESSMEM_CHAOS_SEED", "1717"))
TURNS = int(os.environ.get("HARNESSMEM_CHAOS_TURNS", "60"))
_KILLS = 6
SESSION = "chaos-1"
# Shaped like an OpenAI key: every redactor rule set catches it.
SECRET = "sk-proj-Q7vX2mN9pL4kR8tW3zY6bC1dF5gH0jKa"

CHILD = textwrap.dedent(
    """
    import json, os, random, signal, sys
    from harnessmem import MemoryHarness
    from harnessmem.backends.base import Completion, ModelBackend
    from harnessmem.errors import HarnessMemError, ModelUnavailableError
    from harnessmem.workspace import Workspace

    url, options, state_path, seed, turns, kill_at, kill_after = sys.argv[1:8]
    rng = random.Random(int(seed))
    SECRET, SESSION = {secret!r}, {session!r}
    SUMMARY = (
        "## SESSION INTENT\\nKeep notes.\\n## SUMMARY\\nThe user dictated notes.\\n"
        "## ARTIFACTS\\nNone\\n## NEXT STEPS\\nGo on."
    )
    try:
        with open(state_path) as file:
            state = json.load(file)
    except FileNotFoundError:
        state = {{"turn": 0, "messages": [{{"role": "system", "content": "You take notes."}}],
                 "acked": [], "model_faults": 0, "save_errors": 0, "postponed": 0}}

    class ChaosModel(ModelBackend):
        def complete(self, messages, *, purpose, max_tokens=None):
            roll = rng.random()
            if roll < 0.12:
                state["model_faults"] += 1
                raise ModelUnavailableError("429 Too Many Requests (chaos)")
            if roll < 0.2:
                state["model_faults"] += 1
                raise ModelUnavailableError("request timed out after 1s (chaos)")
            if roll < 0.28:
                state["model_faults"] += 1
                return Completion("}}{{ <<junk>> \\x00 ###", 0, 0, "chaos")
            text = SUMMARY if purpose == "summary" else "NO_REPLY"
            return Completion(text, 0, 0, "chaos")

    writes = [0]
    def killing(name):
        real = getattr(Workspace, name)
        def patched(self, *args, **kwargs):
            writes[0] += 1
            hit = writes[0] == int(kill_at)
            if hit and kill_after == "0":
                os.kill(os.getpid(), signal.SIGKILL)
            result = real(self, *args, **kwargs)
            if hit:
                os.kill(os.getpid(), signal.SIGKILL)
            return result
        setattr(Workspace, name, patched)
    if int(kill_at) > 0:
        for name in ("write_text", "write_bytes", "update_text", "append_text"):
            killing(name)

    harness = MemoryHarness.open(
        url, workspace={{"storage_options": json.loads(options)}},
        model=ChaosModel(ChaosModel.Options()),
        compaction={{"trigger_messages": 10, "keep_messages": 4, "trigger_tokens": 0}},
        flush={{"mode": "sync"}}, maintenance={{"enabled": False}},
        index={{"refresh_interval": 0}}, plugins={{"autoload": False}},
    )
    session = harness.session(SESSION)
    for turn in range(state["turn"], int(turns)):
        words = f"turn {{turn}}: note item-{{turn}}"
        if turn % 7 == 3:
            words += f" and my API key is {{SECRET}}"
        messages = [*state["messages"], {{"role": "user", "content": words}}]
        sent = session.before_reasoning(messages)
        sent.append({{"role": "assistant", "content": f"noted {{turn}}"}})
        session.after_call(sent)
        if turn % 4 == 0:
            try:
                harness.save(f"- chaos fact number {{turn}}")
                state["acked"].append(turn)
            except HarnessMemError:
                state["save_errors"] += 1
        state["turn"], state["messages"] = turn + 1, sent
        with open(state_path + ".tmp", "w") as file:
            json.dump(state, file)
        os.replace(state_path + ".tmp", state_path)
    harness.close()
    print("finished", flush=True)
    """
).format(secret=SECRET, session=SESSION)


def _run_child(
    target: WorkspaceTarget, state: Path, seed: int, kill_at: int, kill_after: bool
) -> int:
    args = [target.url, json.dumps(target.storage_options), str(state), str(seed)]
    args += [str(TURNS), str(kill_at), "1" if kill_after else "0"]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *args], capture_output=True, text=True, timeout=120
    )
    if done.returncode not in (0, -signal.SIGKILL):
        pytest.fail(f"the replay failed (not killed): {done.stderr[-3000:]}")
    return done.returncode


def _storage_faults(server: S3TestServer, rng: random.Random) -> list[S3Fault]:
    kinds = (S3Fault.internal_error, S3Fault.slowdown, S3Fault.drop)
    return [
        server.inject(
            rng.choice(kinds)(
                method=rng.choice(["GET", "PUT", None]),
                nth=rng.randint(1, 40),
                times=rng.randint(1, 2),
                after_apply=rng.random() < 0.3,
            )
        )
        for _ in range(rng.randint(1, 3))
    ]


def _logged_turns(target: WorkspaceTarget) -> list[int]:
    """The user turns in the session log, as its reader parses it (torn lines skipped)."""
    from harnessmem.memory.transcripts import SessionTranscript
    from harnessmem.workspace import Workspace

    ws = Workspace.open(target.url, target.storage_options)
    turns = []
    for record in SessionTranscript(ws, SESSION).records():
        content = record.message.get("content") or ""
        if record.message.get("role") == "user" and content.startswith("turn "):
            turns.append(int(content.split()[1].rstrip(":")))
    return turns


def test_chaos_replay_loses_nothing_doubles_nothing_leaks_nothing(
    workspace_target: WorkspaceTarget,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> None:
    target = workspace_target
    rng = random.Random(f"{SEED}-{target.kind}")
    state = tmp_path_factory.mktemp("driver") / "state.json"  # outside what is scanned
    server: S3TestServer | None = request.getfixturevalue("s3_faults") if target.is_s3 else None
    runs = kills = fired = 0
    while kills < _KILLS:
        faults = _storage_faults(server, rng) if server is not None else []
        code = _run_child(
            target, state, rng.randrange(1 << 30), rng.randint(3, 60), rng.random() < 0.5
        )
        runs += 1
        fired += sum(fault.fired for fault in faults)
        if server is not None:
            server.clear_faults()
        if code == 0:
            break
        kills += 1
    assert _run_child(target, state, rng.randrange(1 << 30), 0, False) == 0
    runs += 1
    driver = json.loads(state.read_text())
    assert driver["turn"] == TURNS

    from harnessmem.workspace import Workspace

    ws = Workspace.open(target.url, target.storage_options)
    memory = ws.read_text("MEMORY.md")
    for turn in driver["acked"]:
        assert memory.count(f"- chaos fact number {turn}\n") == 1, f"save of turn {turn}"
    saved = [t for t in range(0, TURNS, 4) if f"- chaos fact number {t}\n" in memory]
    assert all(memory.count(f"- chaos fact number {t}\n") == 1 for t in saved), "doubled"

    logged = _logged_turns(target)
    assert len(logged) == len(set(logged)), f"turns logged twice: {sorted(logged)}"
    in_context = {
        int(m["content"].split()[1].rstrip(":"))
        for m in driver["messages"]
        if m.get("role") == "user" and str(m.get("content", "")).startswith("turn ")
    }
    lost = set(range(TURNS)) - set(logged) - in_context
    assert not lost, f"turns neither in the context nor in the session log: {sorted(lost)}"

    stored = target.stored_bytes(tmp_path)
    leaks = [path for path, data in stored.items() if SECRET.encode() in data]
    assert not leaks, f"the secret reached disk: {leaks}"

    counts = {
        "workspace": target.kind,
        "turns": TURNS,
        "runs": runs,
        "kills": kills,
        "storage_faults": fired,
        "model_faults": driver["model_faults"],
        "saves_acked": len(driver["acked"]),
        "save_errors": driver["save_errors"],
        "turns_logged": len(logged),
        "files_scanned": len(stored),
    }
    request.node.user_properties.append(("chaos", counts))
    print(f"chaos counts: {counts}")
