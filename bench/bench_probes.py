"""Probe retention after a replay: which facts of a conversation memory can still give back.

Each part replays a transcript as ``harnessmem replay`` does (default settings: the offline
extractive model, a local workspace, consolidation at each day change and at the end), then
asks its probes with :func:`harnessmem.probes.run_probes`: a probe is found when its
expected text (case and whitespace aside) is in MEMORY.md or in one of the first
``LIMIT`` search hits for its question, as ``harnessmem replay --probes`` reports it.

- **The example**: ``tidewater-week.jsonl`` with the probes file that ships next to it.
- **tau-bench**: the first ``RUNS`` airline runs of ``gpt-4o-airline-dev.json`` joined into
  one transcript (as ``harnessmem replay`` reads a file of runs). The probes are taken from
  the runs by a rule, not written by hand (:func:`tau_probes`): each user's name, as the
  ``get_user_details`` tool result gives it (``"Mia Li"``), asked as "Who is user
  mia_li_3668?"; and each reservation id that the user writes (six capitals and digits,
  with a digit and a letter, not a flight number ``HAT123``) or a tool result carries as
  ``reservation_id``, asked as "Which reservation does Mia Li have?" (the user id when the
  run gives no name: the ``get_user_details`` argument, else the first ``name_name_1234`` the
  user writes; "the user" when there is none). Each fact is asked once.

Rows: found / asked (the ratio is the retention), and how many of the missing ones no
memory file holds at all (lost by the flush or the consolidation, not merely ranked out).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._util import Row
from harnessmem import MemoryHarness
from harnessmem.examples import example_path
from harnessmem.probes import LIMIT, Probe, ProbeReport, ProbeResult, read_probes, run_probes
from harnessmem.replay import ReplayClock, read_transcript, replay
from harnessmem.settings import HarnessSettings

DATA = Path(
    os.environ.get("SHARED_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
TAU = DATA / "tau-bench" / "gpt-4o-airline-dev.json"
#: The probes file that ships next to the example transcript.
EXAMPLE_PROBES = "tidewater-week.probes"
#: tau-bench runs replayed (quick: fewer).
RUNS = 30
QUICK_RUNS = 8

_RESERVATION = re.compile(r"\b(?=[A-Z0-9]*\d)(?=[A-Z0-9]*[A-Z])[A-Z0-9]{6}\b")
_FLIGHT = re.compile(r"^HAT\d{3}$")
_USER_ID = re.compile(r"\b[a-z]+(?:_[a-z]+)+_\d+\b")


def replay_and_probe(transcript: Path, probes: list[Probe], workspace: Path) -> ProbeReport:
    """Replay ``transcript`` into a new workspace at ``workspace`` and ask ``probes``."""
    settings = HarnessSettings.load(
        None, workspace={"url": str(workspace)}, maintenance={"enabled": False}
    )
    loaded = read_transcript(transcript)
    clock = ReplayClock()
    with MemoryHarness(settings, clock=clock) as harness:
        replay(harness, loaded.messages, session_id=transcript.stem, clock=clock)
        return run_probes(probes, search=harness.search, workspace=harness.workspace, limit=LIMIT)


def _tool_records(run: dict[str, Any]) -> list[tuple[str, dict[str, Any], Any]]:
    """(tool name, arguments, parsed result) of each tool call of a run."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    records = []
    for message in run["traj"]:
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError:
                arguments = {}
            calls[call.get("id", "")] = (function.get("name", ""), arguments)
        if message.get("role") == "tool":
            name, arguments = calls.get(message.get("tool_call_id", ""), ("", {}))
            try:
                result = json.loads(message.get("content") or "")
            except json.JSONDecodeError:
                result = None
            records.append((name, arguments, result))
    return records


def tau_probes(runs: list[dict[str, Any]]) -> dict[str, list[Probe]]:
    """The probes of ``runs`` by the rule of the module doc, each fact once, in order of
    appearance: ``"names"``, ``"ids the user wrote"`` and ``"ids only in tool results"``
    (an id the user writes in any run counts as written)."""
    names: dict[str, Probe] = {}
    reservations: dict[str, Probe] = {}
    written: set[str] = set()
    for number, run in enumerate(runs):
        origin = f"run {number} (task {run.get('task_id')})"
        user_id = name = None
        ids: list[str] = []
        for tool, arguments, result in _tool_records(run):
            if not isinstance(result, dict):
                continue
            if tool == "get_user_details" and isinstance(result.get("name"), dict):
                user_id = arguments.get("user_id") or user_id
                first, last = result["name"].get("first_name"), result["name"].get("last_name")
                if first and last:
                    name = f"{first} {last}"
            if isinstance(result.get("reservation_id"), str):
                ids.append(result["reservation_id"])
        said = " ".join(
            m["content"]
            for m in run["traj"]
            if m.get("role") == "user" and isinstance(m.get("content"), str)
        )
        if user_id is None:
            written_ids = _USER_ID.findall(said)
            user_id = written_ids[0] if written_ids else None
        typed = [token for token in _RESERVATION.findall(said) if not _FLIGHT.match(token)]
        written.update(typed)
        ids += typed
        if name and user_id and name not in names:
            names[name] = Probe(f"Who is user {user_id}?", name, origin)
        who = name or user_id or "the user"
        for reservation in ids:
            if reservation not in reservations:
                question = f"Which reservation does {who} have?"
                reservations[reservation] = Probe(question, reservation, origin)
    return {
        "names": list(names.values()),
        "ids the user wrote": [p for i, p in reservations.items() if i in written],
        "ids only in tool results": [p for i, p in reservations.items() if i not in written],
    }


def _rows(label: str, report: ProbeReport, note: str) -> list[Row]:
    totals = report.totals()
    lost = totals["missing"] - totals["missing_on_file"]
    return [
        Row(
            "probes",
            f"{label}: probes found",
            totals["found"],
            "probes",
            baseline="probes asked",
            baseline_value=totals["probes"],
            notes=f"{note}; {totals['in_memory_md']} in MEMORY.md, {totals['in_search']} in "
            f"the top {report.limit} search hits",
        ),
        Row(
            "probes",
            f"{label}: missing probes no memory file holds",
            lost,
            "probes",
            baseline="probes missing",
            baseline_value=totals["missing"],
            notes=f"the other {totals['missing_on_file']} are on file, not in the top hits",
        ),
    ]


def _missing(label: str, report: ProbeReport) -> None:
    for result in report.results:
        if not result.found:
            where = f"on file at {result.on_file}" if result.on_file else "in no memory file"
            print(f"   {label} missing: {result.probe.expected!r} ({where})", file=sys.stderr)


def run(quick: bool) -> list[Row]:
    """Probe retention of the example and of a tau-bench replay."""
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-probes-") as scratch:
        probes = read_probes(example_path(EXAMPLE_PROBES))
        report = replay_and_probe(example_path(), probes, Path(scratch) / "example")
        _missing("example", report)
        rows += _rows("example", report, f"{EXAMPLE_PROBES}, written for the example")
        if not TAU.is_file():
            print(f"bench probes: tau-bench part skipped, data missing at {TAU}", file=sys.stderr)
            return rows
        runs = json.loads(TAU.read_text(encoding="utf-8"))[: QUICK_RUNS if quick else RUNS]
        transcript = Path(scratch) / f"tau-{len(runs)}-runs.json"
        transcript.write_text(json.dumps(runs), encoding="utf-8")
        groups = tau_probes(runs)
        asked = [probe for group in groups.values() for probe in group]
        report = replay_and_probe(transcript, asked, Path(scratch) / "tau")
        # The results are in the order asked: cut them back into the groups.
        cut: dict[str, list[ProbeResult]] = {}
        offset = 0
        for label, group in groups.items():
            cut[label] = report.results[offset : offset + len(group)]
            offset += len(group)
        parts = {
            "tau-bench user names": cut["names"],
            "tau-bench reservation ids": cut["ids the user wrote"]
            + cut["ids only in tool results"],
            "tau-bench reservation ids the user wrote": cut["ids the user wrote"],
            "tau-bench reservation ids only in tool results": cut["ids only in tool results"],
        }
        note = f"the first {len(runs)} airline runs, probes by rule"
        for label, results in parts.items():
            part = ProbeReport(report.limit, results)
            _missing(label, part)
            rows += _rows(label, part, note)
    return rows
