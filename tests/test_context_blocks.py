"""Marked blocks in the system message: placed once, refreshed in place, taken back out."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harnessmem.memory.blocks import place_block, place_in_system, take_from_system
from harnessmem.memory.context import (
    BLOCK_PREAMBLE,
    TAG,
    place_memory_block,
    render_memory_block,
    take_memory_block,
)

OLD = render_memory_block("- Ana lives in Lisbon")
NEW = render_memory_block("- Ana moved to Porto")


def copies(text: str) -> int:
    return text.count(f"<{TAG} ")


def test_a_block_is_added_after_the_instructions_and_replaced_in_place() -> None:
    text = place_memory_block("You are a travel agent.", OLD)
    assert text == f"You are a travel agent.\n\n{OLD}"
    again = place_memory_block(text, NEW)
    assert again == f"You are a travel agent.\n\n{NEW}"
    assert again.count("## Long-term memory") == 1, "the preamble is part of the block"


def test_a_block_between_the_callers_text_stays_where_it_was() -> None:
    text = f"Intro.\n\n{OLD}\n\nOutro."
    assert place_memory_block(text, NEW) == f"Intro.\n\n{NEW}\n\nOutro."
    assert place_memory_block(f"{OLD}\n\nOutro.", NEW) == f"{NEW}\n\nOutro."


def test_every_earlier_copy_goes_and_the_new_block_takes_the_first_ones_place() -> None:
    text = f"Intro.\n\n{OLD}\n\nMiddle.\n\n{OLD}"
    assert place_memory_block(text, NEW) == f"Intro.\n\n{NEW}\n\nMiddle."


def test_an_empty_block_removes_it_and_gives_the_text_back() -> None:
    assert place_memory_block(f"You are a travel agent.\n\n{OLD}", "") == "You are a travel agent."
    assert place_memory_block(OLD, "") == ""


def test_an_opening_tag_without_its_closing_one_is_not_a_block() -> None:
    text = f"Quote <{TAG} source=x> without end."
    assert place_block(text, NEW, TAG) == f"{text}\n\n{NEW}"


def test_the_tag_of_another_block_is_left_alone() -> None:
    recall = "<memory_recall>\n- a hit\n</memory_recall>"
    text = place_block(place_memory_block("Sys.", OLD), recall, "memory_recall")
    text = place_memory_block(text, NEW)
    assert text == f"Sys.\n\n{NEW}\n\n{recall}"
    assert place_block(text, "", "memory_recall") == f"Sys.\n\n{NEW}"


def test_a_system_message_is_put_in_front_when_there_is_none() -> None:
    messages = [{"role": "user", "content": "hi"}]
    out = place_in_system(messages, OLD, TAG)
    assert out == [{"role": "system", "content": OLD}, {"role": "user", "content": "hi"}]
    assert messages == [{"role": "user", "content": "hi"}], "the caller's list is not changed"


def test_the_callers_system_message_is_copied_not_changed() -> None:
    messages = [{"role": "system", "content": "Sys."}, {"role": "user", "content": "hi"}]
    before = copy.deepcopy(messages)
    out = place_in_system(messages, OLD, TAG)
    assert out[0] == {"role": "system", "content": f"Sys.\n\n{OLD}"}
    assert out[1] is messages[1]
    assert messages == before


def test_content_parts_get_the_block_in_a_text_part_of_its_own() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.org/a.png"}}
    messages = [{"role": "system", "content": [{"type": "text", "text": "Sys."}, image]}]
    before = copy.deepcopy(messages)
    once = place_in_system(messages, OLD, TAG)
    assert once[0]["content"] == [
        {"type": "text", "text": "Sys."},
        image,
        {"type": "text", "text": OLD},
    ]
    twice = place_in_system(once, NEW, TAG)
    assert twice[0]["content"] == [
        {"type": "text", "text": "Sys."},
        image,
        {"type": "text", "text": NEW},
    ]
    assert messages == before
    assert take_memory_block(twice) == (before, NEW)


def test_a_block_inside_a_text_part_is_refreshed_there() -> None:
    parts: list[Any] = [{"type": "text", "text": f"Sys.\n\n{OLD}"}, "plain part"]
    out = place_in_system([{"role": "developer", "content": parts}], NEW, TAG)
    assert out[0]["content"] == [{"type": "text", "text": f"Sys.\n\n{NEW}"}, "plain part"]


def test_taking_the_block_gives_the_messages_placing_started_from() -> None:
    chat = [{"role": "user", "content": "hi"}]
    placed = place_in_system(chat, OLD, TAG)
    assert take_memory_block(placed) == (chat, OLD)
    with_system = [{"role": "system", "content": "Sys."}, *chat]
    assert take_memory_block(place_in_system(with_system, OLD, TAG)) == (with_system, OLD)
    assert take_memory_block(chat) == (chat, "")


def test_a_system_message_with_fields_of_its_own_is_kept_when_emptied() -> None:
    messages = [{"role": "system", "content": OLD, "name": "memory"}]
    assert take_from_system(messages, TAG, BLOCK_PREAMBLE)[0] == [
        {"role": "system", "content": "", "name": "memory"}
    ]


_plain = st.text(st.characters(blacklist_characters="<"), max_size=60)


@given(before=_plain, after=_plain)
def test_placing_is_idempotent_and_removing_undoes_it(before: str, after: str) -> None:
    text = f"{before}\n\n{after}" if after else before
    placed = place_memory_block(text, OLD)
    assert copies(placed) == 1
    refreshed = place_memory_block(placed, NEW)
    assert copies(refreshed) == 1
    assert NEW in refreshed
    assert OLD not in refreshed
    assert place_memory_block(refreshed, NEW) == refreshed
    assert place_memory_block(placed, "") == text
