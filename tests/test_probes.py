"""Replay probes: the probe syntax, the matching rule, where a fact is found, and
``harnessmem replay --probe / --probes``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from harnessmem import tools
from harnessmem.cli import main
from harnessmem.errors import ProbeFormatError
from harnessmem.examples import example_path
from harnessmem.probes import (
    LIMIT,
    Probe,
    find_line,
    normalise,
    parse_probe,
    read_probes,
)
from harnessmem.replay import load_transcript

#: The user states two facts; the flush keeps both (each a "remember" request).
TRANSCRIPT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {
        "role": "user",
        "content": "Please remember that the staging server is called heron-7 and listens "
        "on port 6021.",
    },
    {"role": "assistant", "content": "Noted."},
    {"role": "user", "content": "Remember that our release day is Wednesday."},
    {"role": "assistant", "content": "Got it."},
]
#: Written into MEMORY.md before the replay (which, with --no-consolidate, leaves it as is).
MEMORY = "## Facts\n- The office plant is named Fernando.\n"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def _replay_unconsolidated(transcript: Path, workspace: Path, *args: str) -> tuple[int, str, str]:
    """``harnessmem replay`` without consolidation: MEMORY.md stays as written."""
    return _run("replay", str(transcript), "-w", str(workspace), "--no-consolidate", *args)


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(m) for m in TRANSCRIPT) + "\n")
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "MEMORY.md").write_text(MEMORY)
    return folder


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plain tables as wide as a row, so that no cell wraps."""
    monkeypatch.setenv("COLUMNS", "250")


def _rows(out: str) -> dict[str, list[str]]:
    """The probe table's rows by number: the cells, split at runs of two spaces or more."""
    rows = {}
    for line in out.splitlines():
        match = re.match(r"^(\d+)\s{2,}(.*)$", line)
        if match:
            rows[match.group(1)] = re.split(r"\s{2,}", match.group(2))
    return rows


# -- the syntax ---------------------------------------------------------------------------------


def test_a_probe_splits_at_the_first_equals_sign_and_strips_both_sides() -> None:
    probe = parse_probe("  Which URL? =  DATABASE_URL=postgres://db  ", "--probe 1")
    assert probe == Probe("Which URL?", "DATABASE_URL=postgres://db", "--probe 1")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no sign here", "has no '='"),
        (" = 5433", "has no question before '='"),
        ("Which port? =  ", "has no expected text after '='"),
    ],
)
def test_a_bad_probe_is_one_error_naming_where_it_was_written(text: str, problem: str) -> None:
    with pytest.raises(ProbeFormatError) as caught:
        parse_probe(text, "--probe 3")
    assert caught.value.message == f"--probe 3: {text.strip()!r} {problem}"
    assert "QUESTION=EXPECTED" in str(caught.value.hint)


def test_a_probes_file_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "week.probes"
    path.write_text("# about the week\n\nWhich port? = 5433\n  # indented comment\nWho? = Jonas\n")
    probes = read_probes(path)
    assert [(p.question, p.expected) for p in probes] == [
        ("Which port?", "5433"),
        ("Who?", "Jonas"),
    ]
    assert [p.origin for p in probes] == [f"{path} line 3", f"{path} line 5"]


def test_a_bad_line_of_a_probes_file_is_named_by_its_number(tmp_path: Path) -> None:
    path = tmp_path / "week.probes"
    path.write_text("# header\nWhich port? = 5433\nWho maintains it\n")
    with pytest.raises(ProbeFormatError) as caught:
        read_probes(path)
    assert caught.value.message == f"{path} line 3: 'Who maintains it' has no '='"


@pytest.mark.parametrize("text", ["", "# only a comment\n\n"])
def test_a_probes_file_without_a_probe_is_an_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.probes"
    path.write_text(text)
    with pytest.raises(ProbeFormatError, match="holds no probe"):
        read_probes(path)


def test_a_missing_probes_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ProbeFormatError, match="not found"):
        read_probes(tmp_path / "none.probes")


def test_probes_look_at_as_many_hits_as_the_memory_search_tool_returns() -> None:
    assert tools.DEFAULT_LIMIT == LIMIT


# -- the matching rule --------------------------------------------------------------------------


def test_matching_ignores_case_and_whitespace_even_across_lines() -> None:
    text = "## Facts\n- Staging is PostgreSQL 16 on\n  db-staging, PORT\t5433.\n"
    assert normalise("  PostgreSQL\n 16 ") == "postgresql 16"
    assert find_line("postgresql   16", text) == 2
    assert find_line("port 5433", text) == 3
    assert find_line("on db-staging", text) == 2, "a match over a line break: its first line"
    assert find_line("port 5434", text) is None
    assert find_line("", text) is None


# -- harnessmem replay --------------------------------------------------------------------------


def test_replay_probes_are_found_in_memory_md_in_the_search_hits_or_missing(
    transcript: Path, workspace: Path
) -> None:
    code, out, err = _replay_unconsolidated(
        transcript,
        workspace,
        "--probe",
        "What is the office plant called? = FERNANDO",
        "--probe",
        "Which port does staging listen on? = PORT 6021",
        "--probe",
        "zebra = heron-7",
        "--probe",
        "What is the database? = mysql",
    )
    assert code == 0, err
    (log,) = (workspace / "memory").glob("*.md")
    lines = log.read_text().splitlines()
    port_line = next(n for n, line in enumerate(lines, 1) if "port 6021" in line)
    daily = f"memory/{log.name}"
    rows = _rows(out)
    assert rows["1"] == [
        "What is the office plant called?",
        "FERNANDO",
        "yes",
        "MEMORY.md:2; search #1 MEMORY.md:2",
    ]
    assert rows["2"] == [
        "Which port does staging listen on?",
        "PORT 6021",
        "yes",
        f"search #1 {daily}:{port_line}",
    ]
    assert rows["3"] == [
        "zebra",
        "heron-7",
        "MISSING",
        f"not in the top {LIMIT} hits; {daily}:{port_line} holds it",
    ]
    assert rows["4"] == ["What is the database?", "mysql", "MISSING", "no memory file holds it"]
    assert (
        f"Probes: 2 of 4 found (50%): 1 in MEMORY.md, 2 in the top {LIMIT} search hits; "
        "2 missing (1 on file but not found by the search, 1 in no memory file)."
    ) in out.splitlines()
    assert out.index("Probes: 2 of 4") < out.index("Next:"), "the table comes before the hints"


def test_replay_probes_from_a_file_and_the_command_line_with_a_limit(
    transcript: Path, workspace: Path, tmp_path: Path
) -> None:
    probes = tmp_path / "chat.probes"
    probes.write_text("# two facts\nWhen do we release? = wednesday\n")
    code, out, err = _replay_unconsolidated(
        transcript,
        workspace,
        "--probes",
        str(probes),
        "--probe",
        "staging server port = heron-7",
        "--probe-limit",
        "1",
        "--report",
        "json",
    )
    assert code == 0, err
    report = json.loads(out)["probes"]
    assert report["limit"] == 1
    assert [r["question"] for r in report["results"]] == [
        "When do we release?",
        "staging server port",
    ], "the file's probes first, then those of --probe"
    first, second = report["results"]
    assert first["origin"] == f"{probes} line 2"
    assert (first["found"], first["rank"]) == (True, 1)
    assert second["origin"] == "--probe 'staging server port = heron-7'"
    assert (second["found"], second["rank"]) == (True, 1)
    assert report["totals"] == {
        "probes": 2,
        "found": 2,
        "in_memory_md": 0,
        "in_search": 2,
        "missing": 0,
        "missing_on_file": 0,
    }


def test_a_bad_probe_stops_the_replay_before_anything_runs(
    transcript: Path, tmp_path: Path
) -> None:
    workspace = tmp_path / "fresh"
    code, out, err = _run(
        "replay", str(transcript), "-w", str(workspace), "--probe", "Which port 5433"
    )
    assert code == 4
    assert out == ""
    assert err.splitlines()[0] == "error: --probe 'Which port 5433': 'Which port 5433' has no '='"
    assert err.splitlines()[1].startswith("hint: a probe is QUESTION=EXPECTED")
    assert not workspace.exists(), "nothing was replayed"


def test_a_bad_line_of_a_probes_file_stops_the_replay(transcript: Path, tmp_path: Path) -> None:
    probes = tmp_path / "bad.probes"
    probes.write_text("Which port? = 5433\n\n= nothing asked\n")
    workspace = tmp_path / "fresh"
    code, _, err = _run("replay", str(transcript), "-w", str(workspace), "--probes", str(probes))
    assert code == 4
    assert err.splitlines()[0] == (
        f"error: {probes} line 3: '= nothing asked' has no question before '='"
    )
    assert not workspace.exists()


def test_fail_under_sets_the_exit_status(transcript: Path, workspace: Path) -> None:
    found = "When do we release? = wednesday"
    lost = "What is the database? = mysql"
    base = ["replay", str(transcript), "-w", str(workspace), "--probe", found, "--probe", lost]
    code, out, err = _run(*base, "--fail-under", "50")
    assert code == 0, err
    assert "Probes: 1 of 2 found (50%)" in out
    code, out, err = _run(*base, "--fail-under", "75", "--report", "json")
    assert code == 1
    assert json.loads(out)["probes"]["totals"]["found"] == 1, "the report is printed first"
    assert err.splitlines()[0] == "error: 1 of 2 probes found (50%), under --fail-under 75"


def test_fail_under_needs_probes(transcript: Path, tmp_path: Path) -> None:
    code, _, err = _run("replay", str(transcript), "-w", str(tmp_path / "w"), "--fail-under", "50")
    assert code == 2
    assert "--fail-under needs probes" in err


def test_without_probes_the_json_report_has_no_probes(transcript: Path, workspace: Path) -> None:
    code, out, err = _run("replay", str(transcript), "-w", str(workspace), "--report", "json")
    assert code == 0, err
    assert "probes" not in json.loads(out)


# -- the example's probes -----------------------------------------------------------------------


def test_the_example_probes_ask_facts_the_conversation_states() -> None:
    """Each expected text is said in the example (by Maya or Tide), so a probe that is
    missing after the replay is a fact memory lost, not one never stated."""
    probes = read_probes(example_path("tidewater-week.probes"))
    assert len(probes) >= 12
    said = normalise(
        " ".join(
            m["content"]
            for m in load_transcript(example_path())
            if m["role"] in ("user", "assistant") and isinstance(m.get("content"), str)
        )
    )
    unsaid = [p.expected for p in probes if normalise(p.expected) not in said]
    assert not unsaid


def test_replaying_the_example_with_its_probes(tmp_path: Path) -> None:
    probes = example_path("tidewater-week.probes")
    code, out, err = _run(
        "replay",
        "--example",
        "-w",
        str(tmp_path / "ws"),
        "--probes",
        str(probes),
        "--report",
        "json",
    )
    assert code == 0, err
    report = json.loads(out)["probes"]
    assert report["totals"]["probes"] == len(read_probes(probes))
    by_expected = {r["expected"]: r for r in report["results"]}
    staging = by_expected["db-staging.tidewater.internal"]
    assert staging["found"], "the README's main job finds the staging database"
    assert staging["hit"].startswith("memory/")


# -- the bench's probes of tau-bench runs -------------------------------------------------------


def _call(call_id: str, name: str, arguments: dict[str, str]) -> dict[str, object]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"role": "assistant", "tool_calls": [{"id": call_id, "function": function}]}


def test_the_bench_takes_tau_bench_probes_by_its_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    # bench/ is not installed: imported from the checkout, whatever ran before this test.
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    from bench.bench_probes import tau_probes

    user = {"first_name": "Mia", "last_name": "Li"}
    run = {
        "task_id": 7,
        "traj": [
            {"role": "user", "content": "My user id is mia_li_3668, reservation NO6JO3."},
            {"role": "user", "content": "Not flight HAT136, and not the word ABCDEF."},
            _call("c1", "get_user_details", {"user_id": "mia_li_3668"}),
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"name": user})},
            _call("c2", "get_reservation_details", {"reservation_id": "4WQ150"}),
            {
                "role": "tool",
                "tool_call_id": "c2",
                "content": json.dumps({"reservation_id": "4WQ150"}),
            },
            {"role": "tool", "tool_call_id": "c9", "content": "not JSON"},
        ],
    }
    again = {"task_id": 8, "traj": run["traj"][:1]}
    nameless = {"task_id": 9, "traj": [{"role": "user", "content": "I'm ivo_ek_12: ZZ9ZZ9."}]}
    groups = tau_probes([run, again, nameless])
    assert [(p.question, p.expected) for p in groups["names"]] == [
        ("Who is user mia_li_3668?", "Mia Li")
    ]
    assert [(p.question, p.expected) for p in groups["ids the user wrote"]] == [
        ("Which reservation does Mia Li have?", "NO6JO3"),
        ("Which reservation does ivo_ek_12 have?", "ZZ9ZZ9"),
    ], "each fact once; no flight number, no word without a digit; else the user id written"
    assert [p.expected for p in groups["ids only in tool results"]] == ["4WQ150"]


# -- docs/replay.md shows real output -----------------------------------------------------------

REPLAY_DOC = Path(__file__).resolve().parents[1] / "docs" / "replay.md"


def _console(command: str) -> list[str]:
    """The lines a ``console`` block of docs/replay.md shows after ``$ command``."""
    text = REPLAY_DOC.read_text(encoding="utf-8")
    block = text.split(f"```console\n$ {command}\n", 1)[1].split("\n```", 1)[0]
    return block.splitlines()


def test_the_replay_docs_show_the_probe_table_of_the_example(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("HARNESSMEM_FLUSH__BATCH_TOKENS", "4000")  # the default
    probes = [
        "Which port does the staging database listen on? = 5433",
        "Which user do the integration tests connect as? = tidewater_ci",
        "How many constituents does Brest have? = 614",
    ]
    command = "harnessmem replay --example --keep-dates " + " ".join(
        f'--probe "{probe}"' for probe in probes
    )
    shown = _console(command)
    assert shown[0] == "...", "the timeline is left out"
    args = [arg for probe in probes for arg in ("--probe", probe)]
    code, out, err = _run("replay", "--example", "--keep-dates", "-w", str(tmp_path), *args)
    assert code == 0, err
    lines = out.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("#  question"))
    assert lines[start : start + len(shown) - 1] == shown[1:]


def test_the_replay_docs_show_the_error_of_a_bad_probe(tmp_path: Path) -> None:
    code, _, err = _run("replay", "--example", "-w", str(tmp_path), "--probe", "Which port 5433")
    assert code == 4
    assert err.splitlines() == _console('harnessmem replay --example --probe "Which port 5433"')
