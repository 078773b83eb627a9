"""The offline flush words its facts to last (issue 33, point 5): in the third person with the
speaker's name, the assistant's "you" said as the user, markdown gone, small talk left out.

Each case is the exact text the default extractive flush writes for one message. The
sentences we wrote run everywhere; the real ones (LoCoMo dev, tau-bench airline, MemoryBank)
are read from ``../shared/data`` by reference and skip without it. Time words stay as said
("yesterday", "last Saturday"): resolving them is the time grounding's job, after the backend.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from harnessmem.backends.extractive import ExtractiveBackend
from harnessmem.prompts import NO_REPLY, flush_request

ROOT = Path(__file__).resolve().parents[1]


def flush(*messages: dict[str, Any]) -> list[str]:
    """The bullets the default offline flush writes for ``messages`` (an empty reference)."""
    text = ExtractiveBackend().complete(flush_request(list(messages)), purpose="flush").text
    assert text == NO_REPLY or all(line.startswith("- ") for line in text.splitlines())
    return [line[2:] for line in text.splitlines() if line.startswith("- ")]


def user(text: str, name: str | None = None) -> dict[str, Any]:
    return {"role": "user", "content": text, **({"name": name} if name else {})}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


# -- sentences we wrote -------------------------------------------------------------------------

WRITTEN = [
    # The speaker a chat leaves out is the subject, with their pronoun after.
    (user("Lost my job as a banker yesterday.", "Jon"), "Jon lost his job as a banker yesterday."),
    (
        user("Lost my job as a banker yesterday."),
        "The user lost their job as a banker yesterday.",
    ),
    (
        user("Gonna start my new job at the bakery on Monday.", "Jon"),
        "Jon is going to start his new job at the bakery on Monday.",
    ),
    (
        user("Researching flats in Porto this week.", "Ines"),
        "Ines is researching flats in Porto this week.",
    ),
    (
        user("Excited to start my pottery class on Tuesday!", "Tomas"),
        "Tomas is excited to start their pottery class on Tuesday.",
    ),
    # Pronouns: the name first, then "he"/"she" for a known given name, else "their"/"them".
    (
        user("My sister visited me in Porto last week.", "Maria"),
        "Maria's sister visited her in Porto last week.",
    ),
    (
        user("I'm doing my best at my new job in Oslo.", "Sam"),
        "Sam is doing their best at their new job in Oslo.",
    ),
    (
        user("My husband and I are moving to Lyon in May.", "Emma"),
        "Emma and her husband are moving to Lyon in May.",
    ),
    (
        user("Me and my wife went to Rome last May.", "John"),
        "John and his wife went to Rome last May.",
    ),
    (
        user("Tim and I finished the marathon in 4 hours.", "John"),
        "Tim and John finished the marathon in 4 hours.",
    ),
    (
        user("I want to use my certificates first, then I will use my 7447 card."),
        "The user wants to use their certificates first, then the user will use their 7447 card.",
    ),
    # A participle at the start is no subject-less sentence; a gerund subject is not the
    # speaker's doing.
    (
        user("Speaking of which, I went for a run yesterday and got lost."),
        "Speaking of which, the user went for a run yesterday and got lost.",
    ),
    (
        user("Losing my job gave me the push to start my own studio.", "Jon"),
        "Losing Jon's job gave him the push to start his own studio.",
    ),
    (
        user("Growing up, I saw how crumbling schools affected my neighborhood.", "John"),
        "Growing up, John saw how crumbling schools affected his neighborhood.",
    ),
    # A second verb of the same subject, and a hyphenated one.
    (
        user("I'm having issues with money and need to downgrade my flights."),
        "The user is having issues with money and needs to downgrade their flights.",
    ),
    (
        user("I need to cancel the trip to Oslo and get a refund."),
        "The user needs to cancel the trip to Oslo and get a refund.",
    ),
    (
        user("I color-code my notes so I can track my progress.", "Jon"),
        "Jon color-codes his notes so he can track his progress.",
    ),
    # The speaker's own name, once said, is theirs.
    (
        user("I'm Maya, I maintain the tidewater service with Jonas."),
        "The user is Maya, Maya maintains the tidewater service with Jonas.",
    ),
    (
        user("Please remember that we target Python 3.11 and that we use uv for everything."),
        "We target Python 3.11 and we use uv for everything.",
    ),
    (
        user("Now the release: we ship v0.9.0 on Thursday at 14:00 CET."),
        "We ship v0.9.0 on Thursday at 14:00 CET.",
    ),
    # A named speaker's "we" of a group chat (the two of a two-person chat when they talked).
    (
        user("We're flying to Crete for our anniversary in June.", "Emma"),
        "Emma and others are flying to Crete for their anniversary in June.",
    ),
    # A vocative and a lead go; the time word stays.
    (
        user("Companion, today I went hiking at Mount Tai with my dad."),
        "Today the user went hiking at Mount Tai with their dad.",
    ),
    # The assistant's second person is the user; markdown is stripped.
    (assistant("Your reservation id is **HATHAT**."), "The user's reservation id is HATHAT."),
    # An agent's list of a record: one fact, each field with what it belongs to.
    (
        assistant(
            "Your reservation details are as follows:\n\n- **Cabin Class:** Economy\n"
            "- **Passengers:**\n  - Chen Lee\n  - Noah Hernandez\n- **Insurance:** No\n\n"
            "Please let me know what you would like to change."
        ),
        "The user's reservation details: Cabin Class: Economy; Passengers: Chen Lee, Noah "
        "Hernandez; Insurance: No.",
    ),
    (
        assistant("You're booked on flight HAT170 to Lisbon."),
        "The user is booked on flight HAT170 to Lisbon.",
    ),
    (assistant("I've moved your seat to 14C."), "The assistant has moved the user's seat to 14C."),
    # What the assistant found, and what cannot be done and why, are facts too.
    (
        assistant("I found your reservation for the ferry from Split to Hvar on June 2."),
        "The assistant found the user's reservation for the ferry from Split to Hvar on June 2.",
    ),
    (
        assistant("Booking QW81ZZ cannot be cancelled as it is a non-refundable fare."),
        "Booking QW81ZZ cannot be cancelled as it is a non-refundable fare.",
    ),
    (
        assistant("- **Refund:** $120 has been issued to your `visa-4242` card."),
        "A refund of $120 has been issued to the user's visa-4242 card.",
    ),
    (
        assistant("*Note:* your **refund** of $80 was processed to your original payment method."),
        "The user's refund of $80 was processed to their original payment method.",
    ),
    (
        assistant("Your invoice is at [billing](https://example.com/inv/42)."),
        "The user's invoice is at billing (https://example.com/inv/42).",
    ),
]


@pytest.mark.parametrize(("message", "fact"), WRITTEN, ids=lambda v: str(v)[:40])
def test_a_fact_is_worded_to_last(message: dict[str, Any], fact: str) -> None:
    assert flush(message) == [fact]


SMALL_TALK = [
    "We should plan a dance session soon!",
    "Let's catch up soon",
    "That sounds amazing!",
    "You're such a great dancer, Jon!",
    "Good luck with the new studio!",
    "Can't wait to see it!",
    "Wishing you the best with the move!",
    "I'd love to go hiking together again sometime.",
    "Thanks so much, have a great weekend!",
    "It's been a long time since we chatted, my friend.",
    "Been a few days since we chatted.",
    "I'll keep ya posted!",
]


@pytest.mark.parametrize("said", SMALL_TALK)
def test_small_talk_stays_out(said: str) -> None:
    assert flush(user(said, "Gina")) == []
    assert flush(user(said)) == []


def test_the_we_of_two_people_talking() -> None:
    chat = [
        user("Hi Melanie!", "Caroline"),
        user("Since we last chatted, I've started pottery classes on Mondays.", "Melanie"),
    ]
    assert flush(*chat) == [
        "Since Melanie and Caroline last chatted, Melanie has started pottery classes on Mondays."
    ]


def test_a_plan_with_content_is_kept() -> None:
    """Not small talk: the plan names a place, a day and a time."""
    assert flush(user("We should meet at Blue Bottle on Friday at 10.", "Gina")) == [
        "Gina and others should meet at Blue Bottle on Friday at 10."
    ]


PIECES = [
    # Pronouns: "she" for a known given name with a surname, "them" for a name of either.
    (
        user("My sister visited me in Porto last week.", "Caroline Smith"),
        ["Caroline Smith's sister visited her in Porto last week."],
    ),
    (
        user("My boss promoted me to team lead in March.", "Alex"),
        ["Alex's boss promoted them to team lead in March."],
    ),
    # Who did it is not always the speaker: "Really made me think", "Looks like rain".
    (
        user("Really made me think about the job offer from Lisbon.", "Jon"),
        ["Really made Jon think about the job offer from Lisbon."],
    ),
    (
        user("Looks like a rounding issue in the invoice totals of March.", "Jon"),
        ["Looks like a rounding issue in the invoice totals of March."],
    ),
    (
        user("Painting's a fun way to relax after work at the Porto hospital.", "Jon"),
        ["Painting's a fun way to relax after work at the Porto hospital."],
    ),
    # An imperative is no subject-less statement of the speaker's: no fact of Jon's.
    (user("Read the Dune book first, then the Lisbon guide.", "Jon"), []),
    # ... but a chat's "Been ..." and "Going to ..." leave out the speaker.
    (
        user("Been busy with the move to Porto this week.", "Jon"),
        ["Jon has been busy with the move to Porto this week."],
    ),
    (
        user("Going to Paris next week with my mom", "Jon"),
        ["Jon is going to Paris next week with his mom."],
    ),
    # An adjective in -ing, "each other", a compound subject with its verb, "going to be".
    (
        user("Exciting but kinda nerve-wracking, starting at the Lisbon bakery on Monday.", "Jon"),
        ["Exciting but kinda nerve-wracking, starting at the Lisbon bakery on Monday."],
    ),
    (
        user("Supporting each other and making good things happen at the studio in Porto.", "Jon"),
        ["Supporting each other and making good things happen at the studio in Porto."],
    ),
    (
        user("Dancing and running my biz need hard work.", "Jon"),
        ["Dancing and running Jon's biz need hard work."],
    ),
    (
        user("Going to be a great night at the Lisbon jazz festival on Friday.", "Jon"),
        ["Going to be a great night at the Lisbon jazz festival on Friday."],
    ),
    (
        user("Creating community, especially for kids, is really important.", "Jon"),
        ["Creating community, especially for kids, is really important."],
    ),
    # "you" after a verb or a preposition is an object, before a verb a subject.
    (assistant("I sent you the receipt"), ["The assistant sent the user the receipt."]),
    (
        assistant("I picked things you enjoy, like your garden."),
        ["The assistant picked things the user enjoys, like their garden."],
    ),
]


@pytest.mark.parametrize(("message", "facts"), PIECES, ids=lambda v: str(v)[:40])
def test_the_rewriting_pieces(message: dict[str, Any], facts: list[str]) -> None:
    """The pieces of the rewriting, each in a message of its own: whose pronouns, when the
    speaker is the subject a chat left out, and the listener's "you"."""
    assert flush(message) == facts


# -- real sentences of the shared data ----------------------------------------------------------

#: (conversation unit, message, a few words of it to check it is the one, the facts written).
REAL = [
    (
        "locomo:conv-30:session_1",
        "D1:2",
        "Lost my job as a banker",
        [
            "Jon lost his job as a banker yesterday, so he is going to take a shot at starting "
            "his own business."
        ],
    ),
    (
        "locomo:conv-30:session_1",
        "D1:3",
        "Door Dash",
        ["Unfortunately, Gina also lost her job at Door Dash this month."],
    ),
    ("locomo:conv-30:session_1", "D1:11", "dance session soon", []),
    ("locomo:conv-41:session_29", "D29:17", "talk again soon", []),
    ("locomo:conv-42:session_11", "D11:16", "go together sometime", []),
    (
        "locomo:conv-26:session_1",
        "D1:9",
        "Gonna continue my edu",
        [
            "Caroline is going to continue her edu and check out career options, which is "
            "pretty exciting."
        ],
    ),
    (
        "locomo:conv-26:session_2",
        "D2:5",
        "me-time",
        [
            "Melanie is carving out some me-time each day - running, reading, or playing her "
            "violin - which refreshes her and helps her stay present for her fam."
        ],
    ),
    (
        "locomo:conv-26:session_2",
        "D2:7",
        "going camping",
        [
            "It's still a work in progress, but Melanie is doing her best.",
            "Melanie's kids are so excited about summer break.",
            "Melanie and others are thinking about going camping next month.",
        ],
    ),
    (
        "locomo:conv-26:session_2",
        "D2:8",
        "Researching adoption agencies",
        [
            "Caroline is researching adoption agencies \u2014 it's been a dream to have a family "
            "and give a loving home to kids who need it."
        ],
    ),
    (
        "locomo:conv-30:session_15",
        "D15:5",
        "Can't wait",
        ["Jon is working hard to make everything just right."],
    ),
    (
        "tau-bench:0",
        "30",
        "**HATHAT**",
        [
            # The agent's list of the booking, one fact with the sentence that led into it.
            "The user's flight from New York (JFK) to Seattle (SEA) has been successfully booked: "
            "Flight HAT136 (JFK to ATL) (Departure: 07:00 PM EST on May 20, 2024; Arrival: "
            "09:30 PM EST); Connecting Flight HAT039 (ATL to SEA) (Departure: 10:00 PM EST on "
            "May 20, 2024; Arrival: 03:00 AM EST (next day)); Cabin Class: Economy; Total "
            "Baggages: 3 (1 non-free); Payment: Certificate 7504069: $250, Visa card ending in "
            "7447: $55.",
            "The user's flight from New York (JFK) to Seattle (SEA) has been successfully booked.",
            "The user's reservation ID is HATHAT.",
        ],
    ),
    (
        "tau-bench:22",
        "22",
        "You are now booked",
        [
            "The user is now booked on a nonstop flight from Newark (EWR) to Los Angeles (LAX) "
            "on May 21, 2024, in economy class: Flight Number: HAT041; Departure: 07:00 AM EST; "
            "Arrival: 12:30 PM EST.",
            "The user's reservation has been successfully updated.",
            "The user is now booked on a nonstop flight from Newark (EWR) to Los Angeles (LAX) "
            "on May 21, 2024, in economy class.",
            "The additional cost of $114 has been charged to the user's credit card ending in "
            "1777.",
        ],
    ),
    (
        "tau-bench:44",
        "12",
        "silver member",
        ["The user is confirmed as a silver member."],
    ),
    (
        "memorybank:Emily:2023-04-29",
        "0q",
        "steamed sea bass",
        ["Today the user learned a new dish called steamed sea bass, it's really delicious."],
    ),
    (
        "memorybank:Gary:2023-05-01",
        "2q",
        "refer to these methods",
        ["The user will refer to these methods to improve their performance in the workplace."],
    ),
]


@pytest.fixture(scope="module")
def shared_units(shared_file: Callable[[str], Path]) -> Iterator[dict[str, Any]]:
    """The shared conversations by unit, read by ``bench/_flush_labels.py``."""
    shared_file("locomo-dev")
    shared_file("tau-bench/gpt-4o-airline-dev.json")
    shared_file("memorybank")
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(ROOT))
        labels: ModuleType = importlib.import_module("bench._flush_labels")
        wanted = {unit for unit, *_ in REAL}
        yield {u.key: (u, labels) for u in labels.units() if u.key in wanted}


@pytest.mark.parametrize(("unit", "where", "words", "facts"), REAL, ids=lambda v: str(v)[:32])
def test_real_sentences_are_worded_to_last(
    shared_units: dict[str, Any], unit: str, where: str, words: str, facts: list[str]
) -> None:
    """The message alone, as the flush reads it (a LoCoMo turn with its speaker's name, a
    tau-bench or MemoryBank turn as the user's or the assistant's)."""
    found, labels = shared_units[unit]
    message = found.messages[found.by_locator[where]]
    assert words in labels.message_text(message), "the shared file changed: pick the message again"
    assert flush(message) == facts


@pytest.mark.parametrize(
    ("said", "fact"),
    [
        (
            "Here's the recipe I recommend: fry the pork ribs until golden brown, set them "
            "aside; then add the sauce.",
            "The assistant recommended the recipe: fry the pork ribs until golden brown, set "
            "them aside.",
        ),
        (
            "If you have time, I recommend you go for a walk, watch a movie or do some yoga.",
            "The assistant recommended going for a walk, watching a movie or doing some yoga "
            "(if the user has time).",
        ),
    ],
)
def test_a_recommendation_reads_as_one(said: str, fact: str) -> None:
    """What the assistant recommended, after the user asked: the thing a recipe is, and
    every verb of a list of things to do in the same form."""
    assert flush(user("Can you recommend something?"), assistant(said)) == [fact]
