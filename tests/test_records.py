"""An agent's listing of a record (a lead-in and its fields), kept by the offline flush as
one fact and retired field by field: a later record or fact that changes one of its fields
replaces it; one that only shares the thing leaves it."""

from __future__ import annotations

import pytest

from harnessmem.backends.extractive import ExtractiveBackend, replaces
from harnessmem.prompts import flush_request

LISTING = (
    "Your reservation details are as follows:\n\n"
    "- **Reservation ID:** HXDUBJ\n"
    "- **Cabin:** Economy\n"
    "- **Flights:**\n"
    "  1. IAH to JFK on 2024-05-18, Flight Number: HAT085\n"
    "  2. JFK to SFO on 2024-05-18, Flight Number: HAT023\n"
    "- **Baggage:** 0 total, 0 non-free\n\n"
    "Please let me know what changes you would like to make."
)
RECORD = (
    "The user's reservation details: Reservation ID: HXDUBJ; Cabin: Economy; Flights: IAH to "
    "JFK on 2024-05-18, Flight Number: HAT085, JFK to SFO on 2024-05-18, Flight Number: HAT023; "
    "Baggage: 0 total, 0 non-free."
)


def flush(text: str) -> list[str]:
    answer = ExtractiveBackend().complete(
        flush_request([{"role": "assistant", "content": text}]), purpose="flush"
    )
    return [line[2:] for line in answer.text.splitlines() if line.startswith("- ")]


def test_a_listing_is_one_fact_with_its_subject() -> None:
    """The lead-in that only announced the list is not written alone."""
    assert flush(LISTING) == [RECORD]


@pytest.mark.parametrize(
    "text",
    [
        "Here are the available flights from JFK to SFO on May 18:\n\n"
        "- **HAT023:** departs 09:00, $120\n- **HAT045:** departs 13:00, $140",
        "To book, I'll need the following information:\n\n"
        "- **Passenger:** first and last name\n- **Payment method:** card or certificate",
        "Could you confirm the reservation details?\n\n- **Cabin:** Economy\n- **Bags:** 2",
    ],
    ids=["search results", "a request for information", "a question"],
)
def test_options_requests_and_questions_are_no_records(text: str) -> None:
    assert not any(": " in fact and "Cabin" in fact for fact in flush(text))
    assert not any(fact.startswith(("Here are", "The available")) for fact in flush(text))


@pytest.mark.parametrize(
    "later",
    [
        "The user's reservation details: Reservation ID: HXDUBJ; Cabin: Business.",
        "Two checked bags have been successfully added to the user's reservation.",
        "The reservation with ID HXDUBJ has been successfully cancelled.",
    ],
    ids=["a field with another value", "a field added to", "the thing ended"],
)
def test_a_record_is_replaced_when_a_field_changes_or_the_thing_ends(later: str) -> None:
    assert replaces(later, RECORD)


@pytest.mark.parametrize(
    "later",
    [
        # The same field, the same value: a restatement, not a change.
        "The user's reservation details: Reservation ID: HXDUBJ; Cabin: Economy.",
        # Another reservation ends: this one stays.
        "The reservation with ID NM1VX1 has been successfully cancelled.",
        # A change that names none of its fields.
        "The user's membership has been upgraded to gold.",
        # An end that names no code does not end a record that names one.
        "Both reservations have been successfully canceled.",
    ],
    ids=["restated", "another thing ended", "no field named", "an end without its code"],
)
def test_a_record_stays_when_nothing_of_it_changed(later: str) -> None:
    assert not replaces(later, RECORD)
