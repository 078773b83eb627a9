"""Local workspace operations against the raw ``os`` calls they wrap.

The workspace adds path confinement, atomic replace (temp + fsync + rename + directory
fsync), a cross-process file lock for appends and JSON leases. Each row compares one
operation with the plain call that gives the same durability: ``write``+``fsync`` for
writes and appends, ``read`` for reads, ``O_EXCL`` create + fsync + unlink for a lease, and
``os.walk`` for listing. Operation and baseline are sampled in alternation, so a slow
patch of the disk slows both.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from bench._util import Row, paired_medians
from harnessmem.workspace import Workspace


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
    return rows
