"""Probes: after a replay, can each fact still be found in memory?

A probe is a question and the text its answer must contain (``"Which port does the
staging database use? = 5433"``). :func:`run_probes` asks each one as an agent would get
the fact back: MEMORY.md (in the system prompt on every turn) holds the expected text, or
a memory search for the question (``memory_search``, the daily logs and MEMORY.md) returns
it among its first ``limit`` hits. A probe found by neither is *missing*; the report then
says whether a memory file holds the text all the same (kept, but the search for that
question does not rank it) or none does (lost: the flush or the consolidation dropped it).

Matching: both texts are case-folded and every run of whitespace (newlines included)
becomes one space; the probe is found where the expected text is a substring of the
MEMORY.md file, of a search hit's content, or of a memory file. No stemming, no
punctuation rules: ``5433`` is found in ``port 5433,`` and ``Brandt`` in ``jbrandt``.

Probes come from the command line (:func:`parse_probe`, ``QUESTION=EXPECTED``) or from a
probes file (:func:`read_probes`): UTF-8 text, one ``QUESTION = EXPECTED`` a line, split at
the first ``=`` (a question holds no ``=``; the expected text may), both sides stripped
and neither empty; blank lines and lines starting with ``#`` are skipped. A bad line is one
``ProbeFormatError`` naming the file and the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessmem import layout
from harnessmem.errors import ProbeFormatError

if TYPE_CHECKING:
    from harnessmem.backends.base import SearchHit
    from harnessmem.workspace import Workspace

__all__ = [
    "LIMIT",
    "Probe",
    "ProbeReport",
    "ProbeResult",
    "find_line",
    "normalise",
    "parse_probe",
    "read_probes",
    "run_probes",
]

#: Search hits a probe looks at by default: as many as the memory_search tool returns
#: (``harnessmem.tools.DEFAULT_LIMIT``; a test keeps them equal).
LIMIT = 8

_SPACE = re.compile(r"\s+")
_SYNTAX = "a probe is QUESTION=EXPECTED, e.g. 'Which port does staging use? = 5433'"


@dataclass(frozen=True)
class Probe:
    """A question, the text its answer must contain, and where the probe was written
    (``"--probe 2"``, ``"week.probes line 7"``)."""

    question: str
    expected: str
    origin: str = ""


def parse_probe(text: str, origin: str) -> Probe:
    """The probe ``QUESTION=EXPECTED`` (split at the first ``=``, both sides stripped).

    ``origin`` names where ``text`` came from in the error for a bad probe.
    """
    question, sign, expected = text.partition("=")
    question, expected = question.strip(), expected.strip()
    problem = (
        "has no '='"
        if not sign
        else "has no question before '='"
        if not question
        else "has no expected text after '='"
        if not expected
        else ""
    )
    if problem:
        raise ProbeFormatError(f"{origin}: {text.strip()!r} {problem}", hint=_SYNTAX)
    return Probe(question, expected, origin)


def read_probes(path: str | Path) -> list[Probe]:
    """The probes of a probes file (see the module doc for the format).

    Raises ``ProbeFormatError`` for a missing or unreadable file, a bad line (naming it)
    or a file without a single probe.
    """
    source = Path(path)
    try:
        text = source.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise ProbeFormatError(
            f"probes file {source} not found", hint="pass the path of a probes file"
        ) from None
    except IsADirectoryError:
        raise ProbeFormatError(f"probes file {source} is a folder") from None
    except UnicodeDecodeError as exc:
        raise ProbeFormatError(
            f"probes file {source} is not UTF-8 text (byte {exc.start})",
            hint="a probes file holds one 'QUESTION = EXPECTED' a line, in UTF-8",
        ) from None
    probes = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            probes.append(parse_probe(line, f"{source} line {number}"))
    if not probes:
        raise ProbeFormatError(
            f"probes file {source} holds no probe",
            hint="write one 'QUESTION = EXPECTED' a line ('#' starts a comment line)",
        )
    return probes


# ------------------------------------------------------------------------------ matching


def normalise(text: str) -> str:
    """``text`` case-folded, each run of whitespace one space, stripped."""
    return _SPACE.sub(" ", text).strip().casefold()


def find_line(expected: str, text: str) -> int | None:
    """The 1-based line of ``text`` where ``expected`` starts (matched as the module doc
    says), or None."""
    wanted = normalise(expected)
    if not wanted or wanted not in normalise(text):
        return None
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        if wanted in normalise(line):
            return number
    # The text runs over a line break: the last line it starts on.
    for start in range(len(lines) - 1, -1, -1):
        if wanted in normalise("\n".join(lines[start:])):
            return start + 1
    return None  # pragma: no cover - the whole text holds it, so some suffix does


# ------------------------------------------------------------------------------ the report


@dataclass(frozen=True)
class ProbeResult:
    """Where one probe's expected text was found.

    ``memory_line``: its line in MEMORY.md; ``rank``: the 1-based rank of the first search
    hit holding it and ``hit``: that place (``"memory/2026-03-10.md:8"``); ``on_file``: the
    first memory file line holding it, searched or not (None: no memory file does).
    """

    probe: Probe
    memory_line: int | None = None
    rank: int | None = None
    hit: str | None = None
    on_file: str | None = None

    @property
    def found(self) -> bool:
        """In MEMORY.md or among the search hits."""
        return self.memory_line is not None or self.rank is not None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "question": self.probe.question,
            "expected": self.probe.expected,
            "origin": self.probe.origin,
            "found": self.found,
            "memory_line": self.memory_line,
            "rank": self.rank,
            "hit": self.hit,
            "on_file": self.on_file,
        }


@dataclass
class ProbeReport:
    """The results of :func:`run_probes`, in the order of the probes."""

    limit: int
    results: list[ProbeResult] = field(default_factory=list)

    def totals(self) -> dict[str, int]:
        """``probes``; ``found`` (anywhere), ``in_memory_md``, ``in_search``, ``missing``
        and ``missing_on_file`` (missing, yet a memory file holds the text)."""
        missing = [r for r in self.results if not r.found]
        return {
            "probes": len(self.results),
            "found": len(self.results) - len(missing),
            "in_memory_md": sum(1 for r in self.results if r.memory_line is not None),
            "in_search": sum(1 for r in self.results if r.rank is not None),
            "missing": len(missing),
            "missing_on_file": sum(1 for r in missing if r.on_file is not None),
        }

    @property
    def share(self) -> float:
        """Found over probes (1.0 without probes)."""
        return (self.totals()["found"] / len(self.results)) if self.results else 1.0

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (``harnessmem replay --report json``, under ``probes``)."""
        return {
            "limit": self.limit,
            "totals": self.totals(),
            "results": [r.as_dict() for r in self.results],
        }


def run_probes(
    probes: Sequence[Probe],
    *,
    search: Callable[[str, int], Sequence[SearchHit]],
    workspace: Workspace,
    limit: int,
) -> ProbeReport:
    """Ask each probe of ``probes``: MEMORY.md of ``workspace``, then ``search(question,
    limit)`` (``harness.search``), then every memory file for the diagnosis."""
    memory = _read(workspace, layout.MEMORY_FILE)
    files: list[tuple[str, str]] | None = None
    report = ProbeReport(limit)
    for probe in probes:
        memory_line = find_line(probe.expected, memory)
        rank, hit = _in_hits(probe.expected, search(probe.question, limit))
        on_file = None
        if memory_line is not None:
            on_file = f"{layout.MEMORY_FILE}:{memory_line}"
        elif hit is not None:
            on_file = hit
        else:
            files = _memory_files(workspace) if files is None else files
            on_file = _on_file(probe.expected, files)
        report.results.append(ProbeResult(probe, memory_line, rank, hit, on_file))
    return report


def _in_hits(expected: str, hits: Sequence[SearchHit]) -> tuple[int | None, str | None]:
    for rank, found in enumerate(hits, 1):
        line = find_line(expected, found.content)
        if line is not None:
            return rank, f"{found.path}:{found.start_line + line - 1}"
    return None, None


def _read(workspace: Workspace, path: str) -> str:
    try:
        return workspace.read_text(path)
    except FileNotFoundError:
        return ""


def _memory_files(workspace: Workspace) -> list[tuple[str, str]]:
    names = sorted(name for name in workspace.list(f"{layout.MEMORY_DIR}/") if name.endswith(".md"))
    return [(name, _read(workspace, name)) for name in names]


def _on_file(expected: str, files: list[tuple[str, str]]) -> str | None:
    for name, text in files:
        line = find_line(expected, text)
        if line is not None:
            return f"{name}:{line}"
    return None
