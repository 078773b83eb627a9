"""Tool-result eviction and the maintenance tick against the raw operations they wrap.

- Evicting a 150,000-character result (``Session.after_tool``) against writing the same
  bytes with ``write`` + ``fsync`` and slicing head and tail: the difference is the
  lease, the redaction pass, the hash and the event; a second row without the redactor
  shows how much of it is redaction.
- Evicting it again (same content: nothing written) against hashing the text once.
- The secret redactor alone (``redact``) over the same 150,000 characters, over them with 40
  secrets spread through, and over the real tool outputs of the swe-agent trajectory in the
  shared data (skipped when missing), each against one ``str.find`` pass over the same text
  for a word it does not hold (the least any scan for a keyword must do).
- The ``pre_reasoning`` sweep of a 1,000-message conversation with nothing to evict against a
  loop that only measures each message's length (the least any sweep must do).
- One maintenance tick over 100 daily logs, 100 session logs and 100 evicted results
  (consolidate and reindex stubbed out: they have their own benchmarks) against listing the
  same folders with ``os.walk`` and ``os.stat`` on every file.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._util import Row, median_seconds, paired_medians
from harnessmem.events import TurnContext
from harnessmem.eviction import ToolResultEvictor
from harnessmem.harness import MemoryHarness
from harnessmem.memory.redaction import redact

# The shared data folder sits beside the checkout; SHARED_DATA_DIR points elsewhere.
SWE_AGENT = (
    Path(
        os.environ.get("SHARED_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    / "swe-agent"
    / "marshmallow-1867.function_calling.traj"
)
_SECRETS = (
    "OPENAI_API_KEY=sk-proj-AbCdEf1234567890abcdefGHIJ",
    "postgres://admin:hunter2@db.internal:5432/app",
    "Authorization: Bearer abcdef1234567890abcdef",
    "aws_access_key_id AKIAIOSFODNN7EXAMPLE",
    '"client_secret": "abcd1234efgh5678"',
    "the deploy password is hunter2.",
    "ghp_" + "a1" * 18,
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIB\n-----END EC PRIVATE KEY-----",
)


def _output(chars: int) -> str:
    line = "drwxr-xr-x  2 agent agent 4096 Nov 30 12:00 some/build/output/path.o\n"
    return (line * (chars // len(line) + 1))[:chars]


def _raw_evict(path: Path, text: str) -> str:
    with open(path, "wb") as f:
        f.write(text.encode())
        f.flush()
        os.fsync(f.fileno())
    return text[:2000] + str(path) + text[-2000:]


def _conversation(size: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(size // 3):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
        messages.append({"role": "user", "content": f"step {i}: list the build folder"})
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": _output(3_000)})
    return messages


def _with_secrets(text: str, count: int) -> str:
    """``text`` with ``count`` secrets put at the starts of evenly spaced lines."""
    lines = text.splitlines(keepends=True)
    step = len(lines) // count
    for i in range(count):
        lines[i * step] = _SECRETS[i % len(_SECRETS)] + "\n" + lines[i * step]
    return "".join(lines)


def _swe_agent_outputs() -> str | None:
    """The tool outputs of the swe-agent trajectory in the shared data, one after another."""
    if not SWE_AGENT.is_file():
        print(f"bench eviction: redaction of real output skipped, no {SWE_AGENT}", file=sys.stderr)
        return None
    trajectory = json.loads(SWE_AGENT.read_text(encoding="utf-8"))
    return "\n".join(step["observation"] for step in trajectory["trajectory"])


def _redaction_rows(text: str, repeat: int, number: int) -> list[Row]:
    """``redact`` over plain output, the same with secrets, and real output if there is some."""
    secret = _with_secrets(text, 40)
    assert redact(text) == text, "the plain output holds something the redactor takes"
    assert redact(secret).count("[REDACTED]") == 40, "a secret of _SECRETS is not redacted"
    texts = [
        (f"{len(text):,} chars, no secrets", text),
        (f"{len(secret):,} chars, 40 secrets", secret),
    ]
    if (real := _swe_agent_outputs()) is not None:
        texts.append((f"{len(real):,} chars of swe-agent tool output", real))
    rows = []
    for label, sample in texts:
        value, base = paired_medians(
            lambda sample=sample: redact(sample),
            lambda sample=sample: sample.find("passport"),
            repeat=repeat,
            number=number,
        )
        rows.append(
            Row("eviction", f"redact, {label}", value, "s", "str.find of a missing word", base)
        )
    return rows


def _raw_sweep(messages: list[dict[str, Any]], limit: int) -> int:
    return sum(
        1 for m in messages if m.get("role") == "tool" and len(m.get("content") or "") > limit
    )


def _raw_listing(root: Path) -> float:
    newest = 0.0
    for folder in ("memory", "sessions", "large_tool_results"):
        for directory, _, files in os.walk(root / folder):
            for name in files:
                newest = max(newest, os.stat(os.path.join(directory, name)).st_mtime)
    return newest


def run(quick: bool) -> list[Row]:
    """Rows for evicting, re-evicting, sweeping and one maintenance tick (local workspace)."""
    repeat, number = (5, 5) if quick else (9, 20)
    text = _output(150_000)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        harness = MemoryHarness.open(root / "ws", maintenance={"enabled": False})
        session = harness.session("bench")
        ids = itertools.count()

        def evict_new() -> str:
            call = {"id": f"call_{next(ids)}", "function": {"name": "shell"}}
            return session.after_tool(call, text)

        plain = MemoryHarness.open(
            root / "plain", maintenance={"enabled": False}, plugins={"disable": ["redaction"]}
        )
        plain_session = plain.session("bench")

        def evict_unredacted() -> str:
            call = {"id": f"call_{next(ids)}", "function": {"name": "shell"}}
            return plain_session.after_tool(call, text)

        def raw_evict() -> str:
            return _raw_evict(root / "raw.txt", text)

        value, base = paired_medians(evict_unredacted, raw_evict, repeat=repeat, number=number)
        rows.append(
            Row(
                "eviction",
                "after_tool, 150,000 chars (new file, redaction off)",
                value,
                "s",
                "write + fsync + slice",
                base,
            )
        )
        plain.close()
        same = {"id": "call_same", "function": {"name": "shell"}}
        session.after_tool(same, text)
        value, base = paired_medians(evict_new, raw_evict, repeat=repeat, number=number)
        rows.append(
            Row(
                "eviction",
                "after_tool, 150,000 chars (new file)",
                value,
                "s",
                "write + fsync + slice",
                base,
            )
        )
        rows.append(
            Row(
                "eviction",
                "after_tool, 150,000 chars (already stored)",
                median_seconds(
                    lambda: session.after_tool(same, text), repeat=repeat, number=number
                ),
                "s",
                "sha256 of the text",
                median_seconds(lambda: hashlib.sha256(text.encode()).digest(), repeat=repeat),
            )
        )

        rows += _redaction_rows(text, repeat, number)

        messages = _conversation(1_000)
        evictor = ToolResultEvictor()
        limit = harness.settings.eviction.max_result_chars

        def sweep() -> None:
            evictor.pre_reasoning(TurnContext(session=session, messages=list(messages)))

        rows.append(
            Row(
                "eviction",
                "pre_reasoning sweep, 1,000 messages, nothing to evict",
                median_seconds(sweep, repeat=repeat, number=number),
                "s",
                "length check of every message",
                median_seconds(lambda: _raw_sweep(messages, limit), repeat=repeat, number=number),
            )
        )
        harness.close()

        harness = MemoryHarness.open(root / "tick", maintenance={"enabled": False})
        harness.consolidate = lambda backoff=False: None  # type: ignore[assignment,method-assign]
        harness.reindex = lambda full=False: None  # type: ignore[assignment,method-assign]
        ws = harness.workspace
        for i in range(100):
            ws.write_text(f"memory/2099-01-{i % 28 + 1:02d}-{i}.md", "- x\n")  # never expires
            ws.write_text(f"sessions/s{i}.log.jsonl", "{}\n")
            ws.write_text(f"large_tool_results/s{i % 10}/call_{i}-abc.txt", "x\n")
        local = ws.local_root
        assert local is not None
        rows.append(
            Row(
                "maintenance",
                "tick, 300 files, nothing to do (forced)",
                median_seconds(lambda: harness.maintain(force=True), repeat=repeat),
                "s",
                "os.walk + os.stat of the same files",
                median_seconds(lambda: _raw_listing(local), repeat=repeat),
            )
        )
        harness.close()
    return rows
