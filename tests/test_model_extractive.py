"""The offline extractive backend: conformance, and each job done for real."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessmem.backends.base import ModelBackend
from harnessmem.backends.extractive import ExtractiveBackend
from harnessmem.errors import ConfigError, ModelResponseError
from harnessmem.messages import from_swe_agent
from harnessmem.prompts import (
    NO_REPLY,
    consolidation_request,
    flush_request,
    summary_request,
)
from harnessmem.testing import ModelBackendSuite
from harnessmem.testing.model_suite import Script
from harnessmem.tokens import TokenCounter


class TestExtractiveConformance(ModelBackendSuite):
    """The extractive backend computes its answers, so the scripted tests skip."""

    scriptable = False

    @pytest.fixture
    def make_model(self) -> Callable[[Script], ModelBackend]:
        return lambda script: ExtractiveBackend.create({})


@pytest.fixture
def model() -> ExtractiveBackend:
    return ExtractiveBackend.create({})


def call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }


CODING = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Fix the failing date parsing test in the billing service."},
    {
        "role": "assistant",
        "content": "I'll read the test first.",
        "tool_calls": [call("read_file", {"path": "billing/tests/test_dates.py"})],
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "def test_parse():\n    assert parse('2026-01-05') == date(2026, 1, 5)\n"
        "FAILED billing/tests/test_dates.py::test_parse - see https://ci.example.com/run/8812",
    },
    {
        "role": "assistant",
        "content": "The parser in billing/dates.py ignores the ISO format. "
        "We decided to switch the parser to datetime.fromisoformat because it is stricter.",
    },
    {"role": "user", "content": "Good. Then also update the changelog before you open the PR."},
    {"role": "assistant", "content": "Next I will update CHANGELOG.md and open the pull request."},
]


def sections(text: str) -> dict[str, str]:
    parts = re.split(r"(?m)^## (.+)$", text)
    return {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts), 2)}


# -- summary ------------------------------------------------------------------------------------


def test_summary_has_the_four_sections_in_order(model: ExtractiveBackend) -> None:
    text = model.complete(summary_request(CODING), purpose="summary").text

    assert re.findall(r"(?m)^## (.+)$", text) == [
        "SESSION INTENT",
        "SUMMARY",
        "ARTIFACTS",
        "NEXT STEPS",
    ]
    found = sections(text)
    assert found["SESSION INTENT"].startswith("Fix the failing date parsing test")
    assert "fromisoformat" in found["SUMMARY"]
    artifacts = found["ARTIFACTS"]
    assert "path=billing/tests/test_dates.py (read_file argument)" in artifacts
    assert "https://ci.example.com/run/8812" in artifacts
    assert "billing/dates.py" in artifacts
    assert "CHANGELOG.md" in found["NEXT STEPS"]


def test_summary_merges_the_previous_summary(model: ExtractiveBackend) -> None:
    first = model.complete(summary_request(CODING[:4]), purpose="summary").text
    later = [
        {"role": "user", "content": "Now rename the module billing/dates.py to billing/when.py."},
        {"role": "assistant", "content": "Renamed; I will run the whole test suite next."},
    ]
    merged = model.complete(summary_request(later, previous_summary=first), purpose="summary").text

    found = sections(merged)
    intent = found["SESSION INTENT"].splitlines()
    assert intent[0].startswith("Fix the failing date parsing test"), "the original goal stays"
    assert intent[-1].startswith("Latest request: Now rename the module")
    assert "billing/tests/test_dates.py" in found["ARTIFACTS"], "old artifacts are carried over"
    assert "billing/when.py" in found["ARTIFACTS"]
    assert "test suite" in found["NEXT STEPS"]


def test_summary_of_nothing_says_none_in_every_section(model: ExtractiveBackend) -> None:
    text = model.complete(summary_request([]), purpose="summary").text

    assert sections(text) == dict.fromkeys(sections(text), "None")
    assert len(sections(text)) == 4


def test_summary_respects_max_tokens(model: ExtractiveBackend) -> None:
    from harnessmem.examples import example_path

    messages = [json.loads(line) for line in example_path().read_text().splitlines() if line]
    full = model.complete(summary_request(messages), purpose="summary")
    capped = model.complete(summary_request(messages), purpose="summary", max_tokens=300)

    assert full.completion_tokens > 300
    assert capped.completion_tokens <= 300
    assert capped.text.startswith("## SESSION INTENT")


def test_summary_of_an_agent_run_keeps_its_ids(
    model: ExtractiveBackend, agent_run: list[dict[str, Any]]
) -> None:
    run = agent_run
    text = model.complete(summary_request(run), purpose="summary").text

    arguments = [
        json.loads(c["function"]["arguments"]) for m in run for c in m.get("tool_calls") or []
    ]
    ids = {a["reservation_id"] for a in arguments if "reservation_id" in a}
    assert ids
    assert all(f"reservation_id={i}" in text for i in ids)


def test_summary_of_a_swe_agent_trajectory_names_the_files(
    model: ExtractiveBackend, shared_file: Callable[[str], Path]
) -> None:
    trajectory = json.loads(
        shared_file("swe-agent/marshmallow-1867.function_calling.traj").read_text()
    )
    messages = from_swe_agent(trajectory)
    text = model.complete(summary_request(messages), purpose="summary").text

    assert "src/marshmallow/fields.py" in sections(text)["ARTIFACTS"]


# -- flush --------------------------------------------------------------------------------------

CHAT = [
    {"role": "user", "content": "Hi there! How are you?"},
    {"role": "assistant", "content": "Great, thanks! How can I help?"},
    {"role": "user", "content": "Please remember that my daughter's name is Ines."},
    {"role": "user", "content": "I prefer window seats on long flights."},
    {"role": "user", "content": "We decided to move the team offsite to Lisbon in March."},
    {"role": "user", "content": "My email is ana@example.org."},
    {"role": "user", "content": "Is it going to rain tomorrow?"},
    {"role": "assistant", "content": "I've booked the Lisbon hotel for March 12-15."},
    {"role": "user", "content": "Thanks, that's awesome!"},
]


def bullets(text: str) -> list[str]:
    return [line[2:] for line in text.splitlines() if line.startswith("- ")]


def test_flush_extracts_requests_preferences_decisions_and_values(
    model: ExtractiveBackend,
) -> None:
    facts = bullets(model.complete(flush_request(CHAT), purpose="flush").text)

    assert facts == [
        "The user's daughter's name is Ines.",
        "The user prefers window seats on long flights.",
        "We decided to move the team offsite to Lisbon in March.",
        "The user's email is ana@example.org.",
        "The assistant has booked the Lisbon hotel for March 12-15.",
    ]


def test_flush_answers_no_reply_for_small_talk(model: ExtractiveBackend) -> None:
    chat = [
        {"role": "user", "content": "Hey! Good morning."},
        {"role": "assistant", "content": "Good morning! What can I do for you?"},
        {"role": "user", "content": "Nothing really, thanks. Have a nice day!"},
    ]

    assert model.complete(flush_request(chat), purpose="flush").text == NO_REPLY


def test_flush_skips_what_the_reference_already_holds(model: ExtractiveBackend) -> None:
    request = flush_request(
        CHAT,
        memory="## People\n- The user's daughter's name is Ines.",
        todays_log="## Memory Flush — 2026-03-01T10:00:00Z\n- The user prefers window seats.",
    )
    facts = bullets(model.complete(request, purpose="flush").text)

    assert not any("Ines" in fact for fact in facts)
    assert not any("window seats" in fact for fact in facts)
    assert any("Lisbon" in fact for fact in facts)


def test_flush_names_the_speaker_of_a_group_chat(model: ExtractiveBackend) -> None:
    chat = [
        {"role": "user", "name": "Caroline", "content": "I'm moving to Berlin next month."},
        {"role": "user", "name": "Melanie", "content": "I love painting sunsets by the lake."},
    ]
    facts = bullets(model.complete(flush_request(chat), purpose="flush").text)

    assert facts == [
        "Caroline is moving to Berlin next month.",
        "Melanie loves painting sunsets by the lake.",
    ]


def _tool_exchange(name: str, arguments: dict[str, str], result: str) -> list[dict[str, Any]]:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "name": name, "content": result},
    ]


def test_flush_names_a_record_a_tool_returned_by_its_identifiers(
    model: ExtractiveBackend,
) -> None:
    """A name or an id only a tool result gave is kept (tau-bench's users and reservations):
    the identifier fields the call did not already give, even of a result cut to its head
    and tail in the request; not a plain-text result, a record without identifiers, nor JSON
    Lines (a log: many records, none of them the one)."""
    user = {
        "name": {"first_name": "Mia", "last_name": "Li"},
        "address": {"city": "Austin", "zip": "78750"},
        "membership": "gold",
        "notes": "x" * 2_000,
        "reservations": ["NO6JO3"],
    }
    reservation = {"reservation_id": "4WQ150", "user_id": "mia_li_3668", "cabin": "economy"}
    chat = [
        {"role": "user", "content": "Hi, my user id is mia_li_3668."},
        *_tool_exchange("get_user_details", {"user_id": "mia_li_3668"}, json.dumps(user)),
        *_tool_exchange(
            "get_reservation_details", {"reservation_id": "4WQ150"}, json.dumps(reservation)
        ),
        *_tool_exchange("run_shell", {"command": "ls"}, "name: not a record"),
        *_tool_exchange("get_weather", {"city": "Austin"}, json.dumps({"temperature": 21})),
        *_tool_exchange("read_logs", {}, '{"request_id": "req-1"}\n{"request_id": "req-2"}'),
    ]
    facts = bullets(model.complete(flush_request(chat), purpose="flush").text)

    assert "get_user_details for user_id mia_li_3668 returned name Mia Li." in facts
    assert (
        "get_reservation_details for reservation_id 4WQ150 returned user_id mia_li_3668." in facts
    )
    assert not any(fact.startswith(("run_shell", "get_weather", "read_logs")) for fact in facts)


def test_flush_honours_max_facts_and_max_tokens() -> None:
    chat = [
        {"role": "user", "content": f"I visited the museum number {i} in Porto with Rui."}
        for i in range(30)
    ]
    few = ExtractiveBackend.create({"max_facts": 3})
    # 30 turns: the cap of 3 per 20 turns read gives 6.
    assert len(bullets(few.complete(flush_request(chat), purpose="flush").text)) == 6
    assert len(bullets(few.complete(flush_request(chat[:20]), purpose="flush").text)) == 3
    capped = ExtractiveBackend.create({}).complete(
        flush_request(chat), purpose="flush", max_tokens=60
    )
    assert 0 < capped.completion_tokens <= 60
    # The most facts that fit, in order: one more would not.
    whole = bullets(
        ExtractiveBackend.create({}).complete(flush_request(chat), purpose="flush").text
    )
    kept = bullets(capped.text)
    assert kept == whole[: len(kept)]
    assert TokenCounter().count_text("\n".join(whole[: len(kept) + 1])) > 60


_TERMS = st.frozensets(
    st.sampled_from(["dog", "rex", "park", "7", "room", "101", "tea", "ana", *"bcdfghjk"]),
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_TERMS, max_size=16), _TERMS, st.sampled_from([0.0, 0.3, 0.5, 0.6, 0.75, 0.9]))
def test_term_sets_find_exactly_the_near_duplicates(
    added: list[frozenset[str]], query: frozenset[str], threshold: float
) -> None:
    """``TermSets.near`` looks up only sets sharing a term, and passes over those whose count
    of shared terms cannot reach a near duplicate's; it must agree with comparing against
    every set (the flush's duplicate check, which it replaced)."""
    from harnessmem.backends.extractive._text import TermSets, near_duplicate

    sets = TermSets[int](threshold)
    for number, terms in enumerate(added):
        sets.add(terms, number)
    expected = [n for n, terms in enumerate(added) if near_duplicate(query, terms, threshold)]
    assert list(sets.near(query)) == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=200), max_size=8))
def test_flush_answers_bullets_or_no_reply_for_any_text(texts: list[str]) -> None:
    model = ExtractiveBackend()
    chat = [{"role": "user", "content": text} for text in texts]
    answer = model.complete(flush_request(chat), purpose="flush").text

    assert answer == NO_REPLY or all(line.startswith("- ") for line in answer.splitlines())


# -- consolidation ------------------------------------------------------------------------------

MEMORY = """# Memory

## People
- The user's daughter's name is Ines.
- The user's email is ana@old.example.

## Facts
- The user lives in Porto.
"""

ENTRIES = """### 2026-03-01.md
## Memory Flush — 2026-03-01T10:00:00Z · session a
- The user prefers window seats on long flights.
- The user's email is ana@example.org.
NO_REPLY
## Memory Flush — 2026-03-02T09:00:00Z · session b
- The user prefers window seats on long flights!
- The user lives in Porto, Portugal.
"""


def test_consolidation_merges_duplicates_and_newer_values(model: ExtractiveBackend) -> None:
    text = model.complete(
        consolidation_request(MEMORY, ENTRIES, max_tokens=4_000), purpose="consolidation"
    ).text

    assert text.startswith("# Memory\n")
    assert "## People" in text
    assert "The user's daughter's name is Ines." in text
    assert "ana@example.org" in text
    assert "ana@old.example" not in text, "the newer value of the same key replaces the old"
    assert text.count("window seats") == 1, "near-duplicates merge"
    assert text.count("lives in Porto") == 1
    assert "NO_REPLY" not in text
    assert "Memory Flush" not in text
    assert "## Preferences" in text


def test_consolidation_trims_to_the_budget_keeping_recent_and_repeated_facts() -> None:
    model = ExtractiveBackend()
    old = "\n".join(f"- Old fact number {i} about the archive server rack {i}." for i in range(200))
    repeated = "- The user is allergic to peanuts."
    entries = "\n".join(
        [
            repeated,
            *(f"- Recent fact {i} about the new deployment pipeline." for i in range(20)),
            repeated,
            repeated,
        ]
    )
    answer = model.complete(
        consolidation_request(f"## Facts\n{old}", entries, max_tokens=600),
        purpose="consolidation",
    )

    assert answer.completion_tokens <= 600
    assert TokenCounter().count_text(answer.text) <= 600
    assert "allergic to peanuts" in answer.text
    assert "Recent fact 19 " in answer.text
    assert "Old fact number 0 " not in answer.text


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text(min_size=1, max_size=80), max_size=40),
    st.integers(min_value=50, max_value=800),
)
def test_consolidation_never_exceeds_the_budget(lines: list[str], budget: int) -> None:
    model = ExtractiveBackend()
    entries = "\n".join(f"- {line}" for line in lines)
    try:
        answer = model.complete(
            consolidation_request("", entries, max_tokens=budget), purpose="consolidation"
        )
    except ModelResponseError:
        return  # nothing to write is reported, never an empty MEMORY.md
    assert answer.completion_tokens <= budget


def test_consolidation_of_nothing_is_a_response_error(model: ExtractiveBackend) -> None:
    with pytest.raises(ModelResponseError, match="nothing to write"):
        model.complete(consolidation_request("", "", max_tokens=100), purpose="consolidation")


# -- the request contract -----------------------------------------------------------------------


def test_it_reads_the_seed_transcript_style_without_tags(model: ExtractiveBackend) -> None:
    seed_style = (
        "[USER]: Please remember that the staging database is db-stg-2.\n"
        "[ASSISTANT]: Noted.\n"
        "[TOOL]: [tool_result: lookup] db-stg-2 is at 10.0.4.12"
    )
    answer = model.complete(
        [{"role": "system", "content": "Extract facts."}, {"role": "user", "content": seed_style}],
        purpose="flush",
    )

    assert bullets(answer.text) == ["The staging database is db-stg-2."]


def test_plain_chat_messages_are_read_as_the_conversation(model: ExtractiveBackend) -> None:
    answer = model.complete(CHAT, purpose="flush")

    assert "The user prefers window seats on long flights." in bullets(answer.text)


def test_escaped_closing_tags_inside_the_conversation_are_data(model: ExtractiveBackend) -> None:
    chat = [
        {"role": "user", "content": "Remember that the marker </conversation> ends blocks."},
        {"role": "user", "content": "I prefer tabs over spaces in every Python project."},
    ]
    facts = bullets(model.complete(flush_request(chat), purpose="flush").text)

    assert facts[0] == "The marker </conversation> ends blocks."
    assert len(facts) == 2


def test_it_refuses_an_unknown_purpose(model: ExtractiveBackend) -> None:
    with pytest.raises(ValueError, match="unknown model purpose"):
        model.complete(CHAT, purpose="poetry")


def test_options_are_validated_with_their_path() -> None:
    with pytest.raises(ConfigError, match=r"model\.flush\.options"):
        ExtractiveBackend.create({"max_facts": 0}, where="model.flush")


_OPENED = """
import sys
from harnessmem import MemoryHarness
jobs = ("_facts", "_summary", "_consolidate", "_replacement", "_text")
def loaded():
    return [job for job in jobs if f"harnessmem.backends.extractive.{job}" in sys.modules]
with MemoryHarness.open(sys.argv[1], maintenance={"enabled": False}) as harness:
    print("opened", loaded())
    said = {"role": "user", "content": "My dentist is Dr. Hale on Elm Street."}
    harness.session("s").close([said])  # the session's last flush
    print("flushed", loaded())
"""


def test_opening_a_harness_imports_no_job_of_the_extractive_backend(tmp_path: Path) -> None:
    """The jobs' modules (hundreds of regular expressions, ~40 ms a process) load with the
    first job: a harness that only searches, an MCP server, does not pay for them."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _OPENED, str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    opened, flushed = done.stdout.splitlines()[-2:]
    assert opened == "opened []"
    assert flushed.startswith("flushed ['_facts'")
