"""MEMORY.md that stays true over time: every fact dated, replaced facts retired.

The offline consolidation files the facts under the day they were learned, one
``## YYYY-MM-DD`` heading a day with the other sections than Facts inside it
(``### Decisions``), reads the older layout (``### YYYY-MM-DD`` under each section) as well,
and retires a fact a newer entry replaces; a model's answer gets the days it lost back, and
may drop a replaced fact, never another one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from harnessmem.backends.extractive import ExtractiveBackend, replaces
from harnessmem.prompts import NO_REPLY, consolidation_request, flush_request
from harnessmem.testing import ScriptedModel
from harnessmem.tokens import TokenCounter

if TYPE_CHECKING:
    from conftest import HarnessFactory
    from harnessmem import ConsolidationResult

DAY1, DAY2 = "memory/2027-01-14.md", "memory/2027-01-15.md"


#: The offline backend, as the harness runs it when no model is configured.
OFFLINE = ExtractiveBackend()


def entries(day: str, *facts: str) -> str:
    bullets = "".join(f"- {fact}\n" for fact in facts)
    return f"### memory/{day}.md\n## Memory Flush — {day}T07:00:00Z · session s\n{bullets}"


def run(memory: str, logs: str) -> str:
    """The new MEMORY.md the offline backend writes for the consolidation request."""
    request = consolidation_request(memory, logs, max_tokens=4_000)
    return OFFLINE.complete(request, purpose="consolidation").text


def test_facts_are_grouped_under_the_day_they_were_learned() -> None:
    first = run("", entries("2027-01-14", "Ana lives in Lisbon", "Ana has a cat named Miso"))
    second = run(first, entries("2027-01-15", "Ana's sister Rita works at the port authority"))
    assert second == (
        "## 2027-01-14\n- Ana lives in Lisbon\n- Ana has a cat named Miso\n\n"
        "## 2027-01-15\n- Ana's sister Rita works at the port authority\n"
    )
    assert run(second, "") == second, "a rewrite keeps every day"


def test_a_day_holds_its_other_sections_under_their_own_headings() -> None:
    memory = run(
        "",
        entries("2027-01-14", "Ana lives in Lisbon", "We decided to ship on Fridays")
        + entries("2027-01-15", "The user prefers tea over coffee"),
    )
    assert memory == (
        "## 2027-01-14\n- Ana lives in Lisbon\n\n### Decisions\n- We decided to ship on Fridays"
        "\n\n## 2027-01-15\n\n### Preferences\n- The user prefers tea over coffee\n"
    )
    assert run(memory, "") == memory, "a section under a day keeps the day"


def test_the_older_layout_and_saved_facts_are_filed_under_their_days() -> None:
    older = (
        "# Memory\n\n## Facts\n\n### 2027-01-14\n- Ana lives in Lisbon\n\n"
        "## Travel\n\n### 2027-01-15\n- Ana flies to Porto in March\n\n"
        "## Memory Save — 2027-01-16T09:00:00Z\n- Ana's locker code is 4411\n"
    )
    assert run(older, "") == (
        "# Memory\n\n## 2027-01-14\n- Ana lives in Lisbon\n\n"
        "## 2027-01-15\n\n### Travel\n- Ana flies to Porto in March\n\n"
        "## 2027-01-16\n- Ana's locker code is 4411\n"
    )


def test_a_restated_fact_takes_the_newer_day_and_old_facts_stay_undated() -> None:
    memory = "## Facts\n- Ana has a cat named Miso (2027-01-02)\n- Ana speaks Portuguese\n"
    out = run(memory, entries("2027-01-15", "Ana has a cat named Miso"))
    assert out.startswith("## Facts\n- Ana speaks Portuguese\n"), "never a made-up day"
    assert "## 2027-01-15\n- Ana has a cat named Miso" in out
    assert "2027-01-02" not in out


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        (
            "Our staging database runs on port 5433.",
            "Staging now listens on port 6432, we shut the old port down.",
        ),
        (
            "The v0.9.0 release is on Thursday 2026-12-03.",
            "The v0.9.0 release was pushed to 2026-12-10.",
        ),
        ("Jonas is the release manager for v0.9.", "Maya took over as release manager for v0.9."),
        (
            "The user's flight to Denver is HAT170.",
            "The user's flight to Denver changed to HAT045.",
        ),
        (
            "The team uses Jenkins for CI builds.",
            "The team switched to GitHub Actions for CI builds.",
        ),
        (
            "The user's cabin on reservation HATHAT is economy.",
            "The user upgraded the cabin on reservation HATHAT to business.",
        ),
        (
            "Ana plays tennis with Rita on Mondays.",
            "Ana no longer plays tennis with Rita on Mondays.",
        ),
        # The same code names the same booking, however little else is shared.
        (
            "The reservation with ID QX7T2P is a basic economy trip from Oslo to Rome.",
            "The reservation with ID QX7T2P has been cancelled.",
        ),
        # A booking that may be cancelled has not ended: the confirmation ends it.
        (
            "The user's reservation is business class and can be cancelled at any time.",
            "The user's reservation has been successfully cancelled.",
        ),
        (
            "The user's return flight is currently scheduled for May 28 from Oslo.",
            "The user's return flight has been updated to the new flights.",
        ),
        # What an earlier fact waited for came of it: a change asked for and made ...
        (
            "The user would like to move the Lisbon trip from June 3 to June 5.",
            "The Lisbon trip is now scheduled for June 5.",
        ),
        (
            "Priya needs to downgrade both of her train tickets to standard class.",
            "Both of Priya's train tickets have been downgraded to standard.",
        ),
        # ... something sought and found, a failed exam passed, a job lost ...
        (
            "Mara is still searching for a flat near the harbour.",
            "Mara found a flat near the harbour with a balcony.",
        ),
        ("Ola failed his driving test in March.", "Ola retook the driving test and passed."),
        ("Dev loves his new job at the bakery.", "Dev lost his job at the bakery."),
        # ... and a booking cancelled.
        (
            "The user booked two rooms at the Harbour Inn for May 9.",
            "The user's booking at the Harbour Inn for May 9 has been cancelled.",
        ),
    ],
)
def test_a_later_fact_replaces_an_earlier_one(earlier: str, later: str) -> None:
    assert replaces(later, earlier)
    out = run(f"## Facts\n- {earlier} (2027-01-01)\n", entries("2027-01-19", later))
    assert earlier not in out
    assert later in out


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("Caroline likes pottery.", "Caroline now likes painting too."),
        (
            "Our staging database runs on port 5433.",
            "The staging database now has nightly backups.",
        ),
        (
            "Jon is hosting a dance competition in May 2023.",
            "The dance studio is on tenuous grounds right now.",
        ),
        ("Ana lives in Lisbon.", "Ana's cat Miso is now three years old."),
        (
            "The user's flight to Denver is HAT170.",
            "The user's hotel in Denver is the Brown Palace.",
        ),
        # Another booking's code: another booking.
        (
            "The reservation with ID QX7T2P is a basic economy trip from Oslo to Rome.",
            "The reservation with ID ZZ41KM has been cancelled.",
        ),
        # "Instead of" opening a sentence, and "changed" without what it changed to.
        ("Tim will keep working hard.", "Instead of giving up, Tim worked hard to get better."),
        ("Tim reads fantasy novels.", "A novel Tim read really changed his view of reading."),
        # A postponement moves a plan, not an event that is over.
        (
            "Nate won a big video game tournament in 2022.",
            "Nate's video game tournament got pushed back.",
        ),
        # The same person named at the start of one fact and inside the other is no new value.
        (
            "Joanna used to have a dog in Michigan.",
            "The name helps Joanna remember when she used to have a dog.",
        ),
        # A change asked for on one booking, another one changed.
        (
            "The user would like to move reservation KX81PQ to June 5.",
            "Reservation WB22TT is now scheduled for June 5.",
        ),
        # Something sought is not found by whatever follows "got"; a question finds nothing.
        (
            "Mara is looking for investors for her bakery.",
            "Mara got a temp job to cover costs while she looks for investors.",
        ),
        (
            "Searching for the perfect studio is hard for Jon.",
            "What is Jon's favourite part of running his own studio?",
        ),
        # A loss said again, someone else's loss, a job no one held.
        ("Dev lost his job at the bakery in May.", "Dev lost his wallet on the bus."),
        ("Ana loves her new job at the library.", "Dev lost his job at the bakery."),
        ("Finding a flat is a tough job for Mara.", "Mara lost her job at the harbour."),
        # The end of one booking is not the end of another one's, by codes or by days.
        (
            "The assistant found the user's flight from ATL to JFK on May 17.",
            "The user's flight from DEN to BOS on May 17 has been cancelled.",
        ),
        (
            "The user booked a room at the Harbour Inn for May 9.",
            "The user's booking at the Harbour Inn for May 12 has been cancelled.",
        ),
    ],
)
def test_a_fact_that_merely_shares_words_is_not_replaced(earlier: str, later: str) -> None:
    assert not replaces(later, earlier)
    out = run(f"## Facts\n- {earlier} (2027-01-01)\n", entries("2027-01-19", later))
    assert earlier in out


def _reply(answer: str) -> ScriptedModel:
    return ScriptedModel([answer])


PRIOR = (
    "## Facts\n\n### 2027-01-14\n- Our staging database runs on port 5433.\n"
    "- Ana lives in Lisbon.\n- Ana has a cat named Miso.\n- Ana's sister is Rita.\n"
)


def _consolidated(
    open_harness: HarnessFactory, answer: str, logged: str, *, loss: float
) -> tuple[ConsolidationResult, str]:
    """A consolidation of PRIOR and ``logged`` (a fact of 2027-01-15) that the model answers
    with ``answer`` (``consolidation.max_entry_loss`` = ``loss``); its result and MEMORY.md."""
    harness = open_harness(_reply(answer), consolidation={"max_entry_loss": loss})
    harness.workspace.write_text("MEMORY.md", PRIOR)
    harness.workspace.append_text(DAY2, entries("2027-01-15", logged))
    result = harness.consolidate()
    return result, harness.workspace.read_text("MEMORY.md")


def test_a_model_that_drops_a_replaced_fact_is_accepted(open_harness: HarnessFactory) -> None:
    answer = (
        "## Facts\n- Ana lives in Lisbon.\n- Ana has a cat named Miso.\n- Ana's sister is Rita.\n"
        "- Staging now listens on port 6432, we shut the old port down.\n"
    )
    moved = "Staging now listens on port 6432, we shut the old port down."
    result, text = _consolidated(open_harness, answer, moved, loss=0.0)
    assert result.status == "consolidated", result.reason
    assert "5433" not in text
    # The answer lost every day: each bullet gets the day of the input fact it restates.
    assert "- Ana lives in Lisbon. (2027-01-14)" in text
    assert "- Staging now listens on port 6432, we shut the old port down. (2027-01-15)" in text


def test_a_model_that_silently_drops_a_fact_is_refused(open_harness: HarnessFactory) -> None:
    answer = (
        "## Facts\n- Our staging database runs on port 5433.\n- Ana lives in Lisbon.\n"
        "- Ana has a cat named Miso.\n- Ana's new job starts in March.\n"
    )
    result, text = _consolidated(open_harness, answer, "Ana's new job starts in March.", loss=0.0)
    assert result.status == "rejected"
    assert "Rita" in result.reason
    assert text == PRIOR


def test_a_bullet_that_matches_no_input_gets_no_day(open_harness: HarnessFactory) -> None:
    answer = "## Facts\n- Ana lives in Lisbon.\n- Something the model made up entirely.\n"
    result, text = _consolidated(open_harness, answer, "Ana lives in Lisbon.", loss=1.0)
    assert result.status == "consolidated"
    assert "- Something the model made up entirely.\n" in text
    assert "- Ana lives in Lisbon. (2027-01-15)" in text


def test_a_day_first_answer_keeps_its_days_inside_the_sections(
    open_harness: HarnessFactory,
) -> None:
    """A section under a day heading is that day's; a section of its own is no day's."""
    answer = (
        "## 2027-01-14\n- Ana lives in Lisbon.\n- Ana has a cat named Miso.\n\n"
        "### People\n- Ana's sister is Rita.\n\n"
        "## Work\n- Our staging database runs on port 5433.\n"
    )
    result, text = _consolidated(open_harness, answer, "Ana lives in Lisbon.", loss=0.0)
    assert result.status == "consolidated"
    assert "### People\n- Ana's sister is Rita.\n" in text, "the day heading encloses it"
    assert "- Our staging database runs on port 5433. (2027-01-14)" in text


def test_a_section_of_one_day_gets_one_heading_not_a_stamp_a_bullet(
    open_harness: HarnessFactory,
) -> None:
    answer = (
        "## People\n- Ana lives in Lisbon.\n- Ana has a cat named Miso.\n- Ana's sister is Rita.\n"
        "\n## Work\n- Our staging database runs on port 5433.\n- Ana's new job starts in March.\n"
    )
    result, text = _consolidated(open_harness, answer, "Ana's new job starts in March.", loss=0.0)
    assert result.status == "consolidated"
    assert text.startswith("## People\n### 2027-01-14\n- Ana lives in Lisbon.\n"), text
    assert "- Our staging database runs on port 5433. (2027-01-14)\n" in text, "two days: stamps"
    assert "- Ana's new job starts in March. (2027-01-15)\n" in text


def test_a_day_heading_never_reaches_past_its_run(open_harness: HarnessFactory) -> None:
    """Before a deeper heading a day heading would date what is under it too: stamps then."""
    answer = (
        "## People\n- Ana lives in Lisbon.\n- Ana has a cat named Miso.\n"
        "#### Guesses\n- Something the model made up entirely.\n"
    )
    result, text = _consolidated(open_harness, answer, "Ana's sister is Rita.", loss=1.0)
    assert result.status == "consolidated"
    assert text == (
        "## People\n- Ana lives in Lisbon. (2027-01-14)\n- Ana has a cat named Miso. (2027-01-14)\n"
        "#### Guesses\n- Something the model made up entirely.\n"
    )


def test_days_that_would_take_the_answer_over_budget_are_left_out(
    open_harness: HarnessFactory,
) -> None:
    """An answer within the budget is not refused for the stamps the check adds."""
    facts = [f"Ana visited museum number {n} in Lisbon" for n in range(60)]
    answer = "".join(f"- {fact}\n" for fact in facts[::2]) + "thanks\n"
    counter = TokenCounter()
    harness = open_harness(
        _reply(answer),
        consolidation={"max_entry_loss": 1.0, "max_memory_tokens": counter.count_text(answer)},
    )
    harness.workspace.append_text(DAY2, entries("2027-01-15", *facts))
    result = harness.consolidate()
    assert result.status == "consolidated", result.reason
    assert harness.workspace.read_text("MEMORY.md") == answer


def test_the_flush_keeps_an_update_of_a_fact_already_on_file() -> None:
    """A fact that replaces one in memory is news, not a duplicate of it."""
    said = [
        {
            "role": "user",
            "content": "Tom Okafor took over as my manager after Priya Raman left the team.",
        }
    ]

    def flush(memory: str) -> str:
        request = flush_request(said, memory=memory)
        return OFFLINE.complete(request, purpose="flush").text

    news = flush("- The user's manager is Priya Raman. (2026-11-02)")
    assert news == "- Tom Okafor took over as the user's manager after Priya Raman left the team."
    assert flush(news) == NO_REPLY
