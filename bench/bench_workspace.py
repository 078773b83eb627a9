"""Local workspace operations against the raw ``os`` calls they wrap.

The workspace adds path confinement, atomic replace (temp + fsync + rename + directory
fsync), a cross-process file lock for appends and JSON leases. Each row compares one
operation with the plain call that gives the same durability: ``write``+``fsync`` for
writes and appends, ``read`` for reads, ``O_EXCL`` create + fsync + unlink for a lease, and
``os.walk`` for listing. Operation and baseline are sampled in alternation, so a slow
patch of the disk slows both.

The ``system_context`` rows render the memory block of a 30 MB MEMORY.md (far over
``context.max_tokens``): read at its two ends, its lines counted in chunks. They compare
it with reading those same two ends raw (time, and peak memory by ``tracemalloc``) and,
for time, with a raw read of the whole file that counts its lines (the least work that
gives the line numbers the marker names).
"""

from __future__ import annotations

import logging
import os
import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from bench._util import Row, paired_medians
from harnessmem import MemoryHarness
from harnessmem.memory.context import BYTES_PER_TOKEN
from harnessmem.workspace import Workspace

_BIG_MEMORY = 30_000_000


def _raw_write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _raw_append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _raw_lease(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    os.write(fd, b'{"owner": "x"}')
    os.fsync(fd)
    os.close(fd)
    os.unlink(path)


def _raw_list(root: Path) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files
    )


def _raw_ends(path: Path, window: int) -> bytes:
    with open(path, "rb") as f:
        head = f.read(window)
        f.seek(-window, os.SEEK_END)
        return head + f.read(window)


def _raw_count(path: Path) -> int:
    lines = 0
    with open(path, "rb") as f:
        while chunk := f.read(4 << 20):
            lines += chunk.count(b"\n")
    return lines


def _peak_bytes(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        fn()
        return float(tracemalloc.get_traced_memory()[1])
    finally:
        tracemalloc.stop()


def _context_rows(tmp: Path, repeat: int) -> list[Row]:
    """system_context() on a 30 MB MEMORY.md against raw reads of what it needs."""
    harness = MemoryHarness.open(tmp / "big", maintenance={"enabled": False})
    try:
        session = harness.session("bench")
        path = tmp / "big" / "MEMORY.md"
        path.write_text("- warm-up\n", encoding="utf-8")
        session.system_context()  # loads the tokenizer, which is no part of the figure
        line = "- fact number {} about the user and their many preferences, with detail\n"
        with open(path, "w", encoding="utf-8") as f:
            written = number = 0
            while written < _BIG_MEMORY:
                written += f.write(line.format(number))
                number += 1
        window = harness.settings.context.max_tokens * BYTES_PER_TOKEN
        state = {"n": 0}

        def render() -> str:
            # A new version each time (the block is cached per version): same size, one
            # byte changed in the middle.
            state["n"] += 1
            with open(path, "r+b") as f:
                f.seek(_BIG_MEMORY // 2)
                f.write(b"0123456789"[state["n"] % 10 : state["n"] % 10 + 1])
            return session.system_context()

        # Every render is a new version over budget, hence a warning each: not wanted here.
        quiet = logging.getLogger("harnessmem.memory.context")
        level, quiet.level = quiet.level, logging.ERROR
        try:
            value, ends = paired_medians(render, lambda: _raw_ends(path, window), repeat=repeat)
            _, whole = paired_medians(render, lambda: _raw_count(path), repeat=repeat)
            peak, raw_peak = _peak_bytes(render), _peak_bytes(lambda: _raw_ends(path, window))
        finally:
            quiet.setLevel(level)
    finally:
        harness.close()
    what = f"system_context(), {_BIG_MEMORY // 1_000_000} MB MEMORY.md"
    before = "whole-file render before (34a485e^): 3.0 s, +284 MB RSS on this file"
    return [
        Row("workspace", what, value, "s", "read both ends raw", ends, notes=before),
        Row(
            "workspace",
            f"{what}, against counting its lines",
            value,
            "s",
            "read the whole file raw, count newlines",
            whole,
        ),
        Row(
            "workspace",
            f"{what}, peak memory",
            peak,
            "bytes",
            "read both ends raw",
            raw_peak,
            notes="tracemalloc peak; one 4 MiB chunk of the line count at a time",
        ),
    ]


def run(quick: bool) -> list[Row]:
    """Rows for write, append, read, lease and list on a local workspace."""
    repeat, number = (5, 20) if quick else (9, 100)
    text = "- a remembered fact, about one line long, as flushes write them\n" * 40
    data = text.encode()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.open(Path(tmp) / "ws")
        raw = Path(tmp) / "raw"
        raw.mkdir()
        cases = [
            (
                "write_text (atomic)",
                lambda: ws.write_text("memory/day.md", text),
                "write + fsync",
                lambda: _raw_write(raw / "day.md", data),
            ),
            (
                "append_text (locked)",
                lambda: ws.append_text("memory/log.md", "- entry\n"),
                "append + fsync",
                lambda: _raw_append(raw / "log.md", b"- entry\n"),
            ),
            (
                "read_text",
                lambda: ws.read_text("memory/day.md"),
                "read",
                lambda: (raw / "day.md").read_bytes().decode(),
            ),
            (
                "lock + release",
                lambda: ws.lock("maintenance").release(),
                "O_EXCL create + fsync + unlink",
                lambda: _raw_lease(raw / "x.lease"),
            ),
        ]
        for name, op, baseline, raw_op in cases:
            op()
            raw_op()
            value, base = paired_medians(op, raw_op, repeat=repeat, number=number)
            rows.append(
                Row(
                    bench="workspace",
                    name=name,
                    value=value,
                    unit="s",
                    baseline=baseline,
                    baseline_value=base,
                )
            )
        for i in range(500):
            ws.write_bytes(f"sessions/s{i % 20}/{i}.txt", b"x")
            (raw / f"s{i % 20}").mkdir(exist_ok=True)
            (raw / f"s{i % 20}" / f"{i}.txt").write_bytes(b"x")
        value, base = paired_medians(ws.list, lambda: _raw_list(raw), repeat=repeat)
        rows.append(
            Row(
                bench="workspace",
                name="list, 500 files",
                value=value,
                unit="s",
                baseline="os.walk",
                baseline_value=base,
            )
        )
        rows.extend(_context_rows(Path(tmp), 3 if quick else 7))
    return rows
