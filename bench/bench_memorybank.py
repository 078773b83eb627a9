"""MemoryBank probing questions answered from memory after a replay on the default set-up.

Each of MemoryBank's 15 users (``../shared/data/memorybank``) gets a workspace of its own
with the default offline set-up: the ``extractive`` model, the default SQLite index, the
default settings, plugins not autoloaded, and the maintenance thread off, because
:func:`harnessmem.replay.replay` does what it would overnight (consolidation when the day
changes). The user's dialogue is replayed day by day in order, a query then the
companion's response per turn, with the harness clock on each day's date (turn ``i`` at
19:00 + 2·i minutes UTC, the dates kept as written): each query ends an agent call, so
the flush writes that day's log, and the day change closes the session and consolidates.
The clock is then set to noon of the day after the last one and each probing question is
asked through ``harness.search(question, limit=5)``, what the ``memory_search`` tool runs
(MEMORY.md and the daily logs).

A question counts as answered when a hit of the top 5 holds the answer by the rule of our
answer key (``tests/data/memorybank-answers/README.md``): its text contains one of the
key's ``match`` strings (case aside, whole words), and for the few questions tied to a day,
it is dated that day. Questions the key marks unanswerable are left out and counted.

Baseline, same run: a plain SQLite FTS5 table (``porter unicode61``) per user, one row per
raw message (each query and each response, with its date), the question's words OR-ed,
ordered by bm25, top 5, judged by the same rule. The questions that name a day ("On May
4th, ...") are also scored apart, as asked and within that day (``since`` = ``until`` = the
day, as an agent's ``memory_search`` call could pass it; the baseline keeps that day's
rows). Also reported: the share of questions whose answer is anywhere in the memory files
after the replay (what search could find).
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import _memorybank as key_of
from bench._util import Row, fts5_or_query

_DAY = re.compile(r"(\d{4}-\d\d-\d\d)")
_DAILY_LOG = re.compile(r"^memory/(?:[^./][^/]*/)*\d{4}-\d\d-\d\d\.md$")
#: The first turn of a day is at 19:00 UTC, the next two minutes later, and so on.
_EVENING = dt.time(19, 0)


def _stamp(date: str, turn: int, offset_seconds: int = 0) -> str:
    start = dt.datetime.combine(dt.date.fromisoformat(date), _EVENING, tzinfo=dt.UTC)
    moment = start + dt.timedelta(minutes=2 * turn, seconds=offset_seconds)
    return moment.isoformat().replace("+00:00", "Z")


def conversation(days: dict[str, list[dict[str, str]]]) -> list[dict[str, Any]]:
    """One user's dialogue as timestamped OpenAI messages, the days in date order."""
    messages: list[dict[str, Any]] = []
    for date in sorted(days):
        for turn, pair in enumerate(days[date]):
            messages.append(
                {"role": "user", "content": pair["query"], "timestamp": _stamp(date, turn)}
            )
            messages.append(
                {
                    "role": "assistant",
                    "content": pair["response"],
                    "timestamp": _stamp(date, turn, 30),
                }
            )
    return messages


def _dates_of(hit: Any) -> set[str]:
    """The days a hit belongs to: its own and those of the places it stands for."""
    found = {hit.date} if hit.date else set()
    for place in (hit.path, *hit.also):
        match = _DAY.search(place)
        if match:
            found.add(match.group(1))
    return found


@dataclass
class Tally:
    """Answered questions of one side, of ``asked``."""

    answered: int = 0
    asked: int = 0

    def add(self, hit: bool) -> None:
        self.answered += hit
        self.asked += 1

    @property
    def share(self) -> float:
        return self.answered / self.asked if self.asked else 0.0


@dataclass
class Results:
    """Tallies of the harness and the plain table for all questions (``all``), for those
    naming a day (``named``) and for those searched within that day (``within``)."""

    ours: dict[str, Tally]
    plain: dict[str, Tally]
    #: The questions naming a day, searched without reading the time from them (the index
    #: alone, as with ``index.time_in_query = false``).
    unread: Tally
    #: Seconds of the questions naming a day: searched as asked (time read) / unread; the
    #: median of five runs of each question, summed.
    read_seconds: float
    unread_seconds: float
    kept: Tally
    users: int
    search_seconds: float
    replay_seconds: float
    facts: int
    misses: list[str]


_MONTHS = {"january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6}
_NAMED = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})(?:st|nd|rd|th)?\b", re.I)


def named_day(question: str, year: int) -> str | None:
    """The day a question names ("On May 4th, ..."), as ``YYYY-MM-DD`` of ``year``."""
    match = _NAMED.search(question)
    if match is None:
        return None
    return dt.date(year, _MONTHS[match.group(1).lower()], int(match.group(2))).isoformat()


def _plain_table(days: dict[str, list[dict[str, str]]]) -> tuple[sqlite3.Connection, list[str]]:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE turns USING fts5(content, tokenize='porter unicode61')")
    dates: list[str] = []
    rows = []
    for date in sorted(days):
        for pair in days[date]:
            for text in (pair["query"], pair["response"]):
                rows.append((len(dates), text))
                dates.append(date)
    db.executemany("INSERT INTO turns(rowid, content) VALUES (?, ?)", rows)
    return db, dates


def _plain_search(
    db: sqlite3.Connection, dates: list[str], question: str, day: str | None = None
) -> list[tuple[int, str]]:
    """The top 5 rows for the question's words OR-ed, by bm25 (of ``day`` only, if given)."""
    query = fts5_or_query(question)
    if query is None:
        return []
    rows = db.execute(
        "SELECT rowid, content FROM turns WHERE turns MATCH ? ORDER BY bm25(turns)", (query,)
    ).fetchall()
    return [(row, text) for row, text in rows if day is None or dates[row] == day][:5]


def _found(answer: key_of.Answer, hits: list[Any]) -> bool:
    """Whether a search hit holds the answer (the key's rule, with the hits' days)."""
    return any(key_of.hit_holds(answer, hit.content, _dates_of(hit)) for hit in hits)


def _found_raw(answer: key_of.Answer, rows: list[tuple[int, str]], dates: list[str]) -> bool:
    """Whether a row of the plain table holds the answer (the row's day is its message's)."""
    return any(key_of.hit_holds(answer, text, {dates[row]}) for row, text in rows)


def _memory_text(harness: Any) -> str:
    """MEMORY.md and every daily log, one text (for the kept-in-memory share); not the
    harness's own files under ``memory/.*`` (MEMORY.md's history, the flush state)."""
    paths = [p for p in harness.workspace.list("memory") if _DAILY_LOG.search(p)]
    if harness.workspace.exists("MEMORY.md"):
        paths.append("MEMORY.md")
    return "\n".join(harness.workspace.read_text(path) for path in paths)


def evaluate(
    dialogues: key_of.Dialogues, key: key_of.AnswerKey, users: int | None = None
) -> Results:
    """Replay every user with answerable questions (the first ``users`` by name, when
    given); score the harness and the plain table."""
    from harnessmem import MemoryHarness
    from harnessmem.replay import ReplayClock, replay

    by_user: dict[str, list[key_of.Answer]] = {}
    for answer in key.answerable:
        by_user.setdefault(answer.user, []).append(answer)
    ours = {part: Tally() for part in ("all", "named", "within")}
    plain = {part: Tally() for part in ("all", "named", "within")}
    kept = Tally()
    unread = Tally()
    read_seconds = unread_seconds = 0.0
    search_seconds = replay_seconds = 0.0
    facts = 0
    misses: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-memorybank-") as tmp:
        for number, (user, answers) in enumerate(sorted(by_user.items())[:users]):
            days = dialogues.days[user]
            clock = ReplayClock()
            with MemoryHarness.open(
                Path(tmp) / f"user-{number}",
                clock=clock,
                maintenance={"enabled": False},
                plugins={"autoload": False},
            ) as harness:
                started = time.perf_counter()
                report = replay(
                    harness,
                    conversation(days),
                    session_id=f"u{number}",
                    clock=clock,
                    keep_dates=True,
                )
                replay_seconds += time.perf_counter() - started
                facts += report.facts
                if report.flush_failures:
                    raise RuntimeError(f"{user}: flush failed: {report.flush_failures[0]}")
                last = dt.date.fromisoformat(max(days))
                after = dt.datetime.combine(last + dt.timedelta(days=1), dt.time(12), dt.UTC)
                clock.set(after.timestamp())
                memory = _memory_text(harness)
                db, dates = _plain_table(days)
                for answer in answers:
                    day = named_day(answer.question, last.year)
                    started = time.perf_counter()
                    hits = harness.search(answer.question, limit=5)
                    search_seconds += time.perf_counter() - started
                    found = _found(answer, hits)
                    baseline = _found_raw(answer, _plain_search(db, dates, answer.question), dates)
                    for part in ("all", "named") if day else ("all",):
                        ours[part].add(found)
                        plain[part].add(baseline)
                    if day:
                        unread.add(_found(answer, _unread(harness, answer.question)))
                        read_seconds += _median_seconds(harness.search, answer.question)
                        unread_seconds += _median_seconds(
                            lambda q, n: _unread(harness, q, n), answer.question
                        )
                        # As an agent would call memory_search(query, since=day, until=day).
                        within = harness.search(answer.question, limit=5, since=day, until=day)
                        ours["within"].add(_found(answer, within))
                        raw = _plain_search(db, dates, answer.question, day)
                        plain["within"].add(_found_raw(answer, raw, dates))
                    in_memory = any(key_of.contains(memory, m) for m in answer.match)
                    kept.add(in_memory)
                    if not found:
                        where = "in memory, not found" if in_memory else "not in memory"
                        misses.append(f"{user} {answer.index} ({where}): {answer.question}")
                db.close()
    replayed = len(sorted(by_user)[:users])
    return Results(
        ours,
        plain,
        unread,
        read_seconds,
        unread_seconds,
        kept,
        replayed,
        search_seconds,
        replay_seconds,
        facts,
        misses,
    )


def _unread(harness: Any, question: str, limit: int = 5) -> list[Any]:
    """``harness.search`` as with ``index.time_in_query = false`` (the same harness, the
    same index, the same change check)."""
    harness.settings.index.time_in_query = False
    try:
        return list(harness.search(question, limit))
    finally:
        harness.settings.index.time_in_query = True


def _median_seconds(search: Any, question: str, runs: int = 5) -> float:
    """The median time of ``runs`` searches of ``question`` (top 5)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        search(question, 5)
        times.append(time.perf_counter() - started)
    return sorted(times)[runs // 2]


def run(quick: bool) -> list[Row]:
    """hit@5 of the probing questions against the plain table, and the kept share."""
    try:
        dialogues = key_of.read_dialogues()
    except FileNotFoundError as exc:
        print(f"bench memorybank: skipped, MemoryBank data missing ({exc})", file=sys.stderr)
        return []
    key = key_of.load(dialogues)
    if key.missing or key.changed:
        print(
            f"bench memorybank: {len(key.missing)} references missing, {len(key.changed)} "
            f"questions changed (left out): {', '.join(key.missing + key.changed)}",
            file=sys.stderr,
        )
    unanswerable = len(key.answers) - len(key.answerable)  # counted, left out
    # --quick: three users, for the CI smoke run.
    results = evaluate(dialogues, key, 3 if quick else None)
    asked, named = results.ours["all"].asked, results.ours["named"].asked
    print(
        f"   {asked} answerable questions ({unanswerable} unanswerable left out), {named} "
        f"naming a day; replay {results.replay_seconds:.1f} s, {results.facts} facts "
        f"written; search {results.search_seconds / asked * 1e3:.2f} ms a question"
    )
    print(f"   {len(results.misses)} not answered in the top 5:")
    for line in results.misses:
        print(f"     {line}")
    baseline = "plain FTS5 table of the raw messages, terms OR-ed, bm25"
    rule = "hit: a top-5 hit contains an answer string of our key; higher is better"
    parts = [
        (
            "all",
            f"default offline set-up ({asked} questions)",
            baseline,
            f"{asked} answerable of {len(key.answers)} probing questions, {results.users} users",
        ),
        ("named", f"the questions naming a day ({named})", baseline, "searched as the others"),
        (
            "within",
            f"the questions naming a day ({named}), searched within it",
            f"{baseline}, that day's rows",
            "search(question, since=day, until=day), as memory_search could be called",
        ),
    ]
    rows = [
        Row(
            "memorybank",
            f"probe hit@5, {name}",
            results.ours[part].share,
            "",
            against,
            results.plain[part].share,
            notes=f"{about}; {rule}",
        )
        for part, name, against, about in parts
    ]
    rows += [
        Row(
            "memorybank",
            f"probe hit@5, the questions naming a day ({named}), the day read from the question",
            results.ours["named"].share,
            "",
            "the same harness.search with index.time_in_query = false",
            results.unread.share,
            notes=f"issue 33's baseline: 0.647; {rule}",
        ),
        Row(
            "memorybank",
            "search time of a question naming a day, the day read from it",
            results.read_seconds / max(named, 1) * 1e3,
            "ms",
            "the same search without reading it",
            results.unread_seconds / max(named, 1) * 1e3,
            notes="median of 5 runs per question, mean over the questions; the time parser "
            "(dateparser), the dated search, that day's log entries and the whole ranking",
        ),
    ]
    rows.append(
        Row(
            bench="memorybank",
            name="answer kept in memory after the replay (MEMORY.md or a daily log)",
            value=results.kept.share,
            unit="",
            notes=(
                f"{results.kept.answered} of {asked}: the most search could find; "
                f"{results.facts} facts written by the extractive flush"
            ),
        )
    )
    return rows


if __name__ == "__main__":
    for row in run(quick="--quick" in sys.argv):
        print(row.as_dict())
