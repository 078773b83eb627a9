"""The offline flush keeps the assistant's concrete recommendations, attributed, and nothing
generic, no question, no referral to support and no instruction to the agent.

Each case is what the default extractive flush writes for the assistant's message (the
request the harness sends, through ``ExtractiveBackend.complete``). The sentences are short
ones of the shared transcripts (MemoryBank, tau-bench, SWE-agent, LoCoMo) written inline, so
that the tests run on a clean clone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.backends.extractive import ExtractiveBackend
from harnessmem.prompts import flush_request
from harnessmem.replay import ReplayClock, replay

ROOT = Path(__file__).resolve().parents[1]
RECOMMENDED = "The assistant recommended "


def flush(*messages: tuple[str, str] | dict[str, Any]) -> list[str]:
    """The bullets the default offline flush writes for ``(role, text)`` messages (or
    messages as dicts)."""
    request = flush_request(
        [m if isinstance(m, dict) else {"role": m[0], "content": m[1]} for m in messages]
    )
    text = ExtractiveBackend().complete(request, purpose="flush").text
    return [line[2:] for line in text.splitlines() if line.startswith("- ")]


def advice(sentence: str, *before: tuple[str, str] | dict[str, Any]) -> str | None:
    """The recommendation the flush writes for the assistant saying ``sentence`` (after the
    messages ``before``), or None when no bullet is one; never two."""
    found = [b for b in flush(*before, ("assistant", sentence)) if b.startswith(RECOMMENDED)]
    assert len(found) <= 1, found
    return found[0] if found else None


def test_the_issue_example() -> None:
    """The wording the issue asks for: the cue and the comment after the title go, the
    speaker is named, the listener's verb becomes a gerund."""
    said = "I recommend you read 'Atomic Habits' by James Clear, it helps build routines"
    assert advice(said) == "The assistant recommended reading 'Atomic Habits' by James Clear."


@pytest.mark.parametrize(
    ("sentence", "names"),
    [
        # MemoryBank: titles, named things, specific activities.
        ('Then I recommend "The Little Prince" and "Pride and Prejudice".', ["Little Prince"]),
        ("You can also try using note-taking software like OneNote.", ["using", "OneNote"]),
        ('"The Shawshank Redemption" might be a good choice.', ["Shawshank"]),
        (
            "You can try some relaxing activities such as meditation, breathing exercises, "
            "and yoga.",
            ["meditation", "yoga"],
        ),
        (
            'I have many recommendations for movies, such as "Joker", "Parasite", and '
            '"Avengers: Endgame."',
            ["Joker", "Avengers: Endgame", "for movies"],
        ),
        (
            "I suggest that you follow some popular food bloggers, such as the famous "
            'Bilibili up host, "Sheep Cooking", who shares a lot of home-cooked meals.',
            ["following", "Sheep Cooking"],
        ),
        ("Have you tried Headspace?", ["trying Headspace"]),
    ],
)
def test_concrete_recommendations_are_kept(sentence: str, names: list[str]) -> None:
    """Each names what was recommended; when not, see which cue of ``_advice`` failed to
    read it (``_I_RECOMMEND``, ``_YOU_COULD``/``_YOU_CAN``, ``_LIST_OF``, ``_GOOD_CHOICE``)."""
    fact = advice(sentence)
    assert fact is not None, sentence
    assert fact.startswith("The assistant recommended "), fact
    for name in names:
        assert name in fact, (name, fact)
    assert "who shares" not in fact  # the comment on the thing is no part of it


def test_a_condition_is_kept_in_the_third_person() -> None:
    """ "If you like Italian food, ..." says what the recommendation is for: it stays, about
    the user, after the thing recommended."""
    fact = advice(
        "If you like Italian food, I recommend trying dishes like mozzarella cheese pasta, "
        "Italian sausage fried rice, roasted pear salad, and more."
    )
    assert fact is not None
    assert fact.startswith("The assistant recommended trying dishes like mozzarella")
    assert fact.endswith("(if the user likes Italian food).")


@pytest.mark.parametrize(
    "sentence",
    [
        # Generic advice: nothing named.
        "I suggest you take care of yourself.",
        "You can try to relax and adjust your mindset.",
        "It sounds like you could use some stress-relieving techniques.",
        # An offer that names nothing, and a question.
        "I can recommend some books that you might like.",
        "Do you have any other movie recommendations?",
        "Have you also considered talking to someone and sharing your thoughts with them?",
        # tau-bench: a referral to support, a routine check, a permission.
        "If you need further assistance, I recommend contacting a human agent.",
        "I recommend checking your email for any booking confirmations.",
        "You can use your gift card and credit card for the payment.",
        # SWE-agent's framework and LoCoMo's encouragement.
        "You should always include exactly one tool call in your response.",
        "It must be scary stepping into the unknown but I know you can do it, Jon.",
        "My advice: stay passionate, focused and resilient.",
    ],
)
def test_what_is_not_a_concrete_recommendation_is_not_one(sentence: str) -> None:
    """Not advice the flush keeps; when one is taken, see ``is_concrete`` (which words count
    as naming something) and ``_REFERRAL``."""
    assert advice(sentence) is None, advice(sentence)


@pytest.mark.parametrize(
    ("thing", "concrete"),
    [
        ('"Atomic Habits"', True),
        ("note-taking software like OneNote", True),
        ("relaxation techniques such as deep breathing, meditation, or yoga", True),
        ("some relaxation techniques", False),
        ("taking care of yourself and trying to relax", False),
    ],
)
def test_concreteness(thing: str, concrete: bool) -> None:
    """A recommendation is kept when it names something (a title, a product, examples)."""
    fact = advice(f"I recommend {thing}.")
    assert (fact is not None) is concrete, fact
    if concrete:
        assert fact == f"{RECOMMENDED}{thing}."


def test_titles_named_after_an_announcement_count() -> None:
    """ "I can recommend some books." names nothing; the titles that follow in the same turn
    are what it recommended. The same sentence without the announcement is no advice."""
    turn = [
        "So, I can recommend some books that you might like.",
        'For biographies, "The Autobiography of Benjamin Franklin" and "Steve Jobs" are '
        "both great books.",
    ]
    found = flush(("assistant", " ".join(turn)))
    assert len(found) == 1, found
    assert found[0].startswith(RECOMMENDED)
    assert "Benjamin Franklin" in found[0]
    assert "books that" not in found[0], "the announcement is no recommendation"
    lone = 'Last year, "Steve Jobs" was on every list.'
    assert advice(lone) is None


def test_second_person_said_in_the_third() -> None:
    """The assistant's "you" in a condition, a purpose or a possessive is the user, or the
    user by name when their messages carry it."""
    assert advice("If you like action movies, I recommend watching 'Die Hard'.") == (
        f"{RECOMMENDED}watching 'Die Hard' (if the user likes action movies)."
    )
    assert advice("I recommend the Anki app to help you memorize it.") == (
        f"{RECOMMENDED}the Anki app to help the user memorize it."
    )
    named = {"role": "user", "content": "Hi there", "name": "Ana"}
    assert advice("I recommend asking your friend for a copy of 'Dune'.", named) == (
        f"{RECOMMENDED}asking Ana's friend for a copy of 'Dune'."
    )
    assert advice("If you're in Shanghai, I recommend visiting the Yu Garden.") == (
        f"{RECOMMENDED}visiting the Yu Garden (if the user is in Shanghai)."
    )


def test_the_flush_writes_the_assistant_recommendation() -> None:
    """Through the backend's flush: the assistant's recommendation is a bullet, said as the
    assistant's; the question that asked for it is not."""
    bullets = flush(
        ("user", "Do you have any recipes that you could recommend to me?"),
        (
            "assistant",
            "Of course, I can help you recommend some recipes. If you are a beginner, you "
            "can start with some basic dishes such as Kung Pao Chicken, Tomato and Egg Soup, "
            "etc.",
        ),
    )
    assert any(
        b.startswith("The assistant recommended starting with some basic dishes such as Kung Pao")
        for b in bullets
    ), bullets
    assert not any("?" in b for b in bullets), bullets


def test_a_user_telling_the_agent_what_to_do_is_no_recommendation() -> None:
    """What the user (or an agent framework in the user's turn) tells the agent to do is an
    instruction: the flush keeps no "recommended" fact of it, nor the instruction."""
    bullets = flush(
        ("user", "You should always run the tests before you submit."),
        ("user", "I suggest you use the edit tool to fix fields.py."),
        ("assistant", "Let's open fields.py and look at the rounding."),
    )
    assert not any("recommended" in b for b in bullets), bullets
    said = ("run the tests", "edit tool", "fix fields.py")
    assert not any(words in b for b in bullets for words in said), bullets


def test_a_recommendation_is_found_by_the_question_about_it(tmp_path: Path) -> None:
    """Replayed on the default offline set-up, "What book did you recommend to me?" finds
    the title in the top 5 (the point of keeping it)."""
    messages = [
        {"role": "user", "content": "I want to build better routines this year."},
        {
            "role": "assistant",
            "content": "I recommend you read 'Atomic Habits' by James Clear, it helps build "
            "routines. Good luck!",
        },
        {"role": "user", "content": "Thanks, I love reading on the train to work."},
        {"role": "assistant", "content": "You're welcome!"},
    ]
    clock = ReplayClock()
    with MemoryHarness.open(
        tmp_path / "ws", clock=clock, maintenance={"enabled": False}, plugins={"autoload": False}
    ) as harness:
        replay(harness, messages, session_id="advice", clock=clock)
        hits = harness.search("What book did you recommend to me?", limit=5)
    assert any("Atomic Habits" in hit.content for hit in hits), [h.content for h in hits]


def test_named_things_count_when_recommendations_were_asked_for() -> None:
    """Asked "Do you have any recommendations?", the things the assistant then names are
    what it recommended, whatever the cue; not asked, the same answer is no advice."""
    answer = (
        "There are many famous car races around the world, such as the Montreal Grand "
        "Prix, the Monaco Grand Prix, and more."
    )
    asked = flush(("user", "Any car races you could recommend to me?"), ("assistant", answer))
    assert any(b.startswith("The assistant recommended many famous car races") for b in asked)
    assert any("Monaco Grand Prix" in b for b in asked), asked
    told = flush(("user", "I watched a race on TV today."), ("assistant", answer))
    assert not any("recommended" in b for b in told), told


def test_listed_activities_count_when_how_to_was_asked() -> None:
    """Asked for ways to do something, the specific activities the answer lists are what it
    recommended."""
    bullets = flush(
        ("user", "I've been stressed lately. Do you have any good ways to relieve stress?"),
        (
            "assistant",
            "There are many ways to relieve stress, such as doing moderate exercise, "
            "listening to music, reading, talking to friends, etc.",
        ),
    )
    assert any(
        b.startswith("The assistant recommended many ways to relieve stress, such as doing")
        for b in bullets
    ), bullets
