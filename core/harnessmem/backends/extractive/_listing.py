"""An agent's listing of a record, read as one fact.

Agents report the state of a thing as a lead-in and a list of its fields::

    Your reservation details are as follows:

    - **Cabin Class:** Economy
    - **Passengers:** Chen Lee, Noah Hernandez

Read sentence by sentence, the lead-in says nothing ("The user's reservation details are as
follows.") and each field is a fragment that hangs on it ("Cabin Class: Economy"), so a
flush keeps neither and the cabin is lost. :func:`take_listings` joins them instead: "The
user's reservation details: Cabin Class: Economy; Passengers: Chen Lee, Noah Hernandez."
Search results, options and requests for information are not records of anything ("Here
are the available flights:", "I'll need the following information:"): they stay as they
are, and the sentence filters leave them out as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harnessmem.backends.extractive._filters import identifier_user
from harnessmem.backends.extractive._person import rewrite_person
from harnessmem.backends.extractive._text import (
    clip,
    normalise,
    sentence_case,
    split_sentences,
    strip_markdown,
)

_ITEM = re.compile(r"^(?P<indent>[ \t]*)(?:[-*+\u2022]|\d{1,2}[.)])[ \t]+(?P<body>\S.*)$")
_FIELD = re.compile(r"^[A-Za-z][\w ()/'&-]{0,40}?\s*:(?:\s+\S|\s*$)")
#: What lists choices or asks for something rather than stating what is.
_NOT_A_RECORD = re.compile(
    r"\b(?:available|options?|choices|alternatives|cheapest|fastest|consider|guidelines?|steps?|"
    r"need (?:the following|some|to (?:know|gather))|following information|provide|"
    r"please|could you|would you|can you|recommend\w*|suggest\w*)\b|\?",
    re.I,
)
#: The words that only announce the list: "Here are the details:", "... are as follows:".
_HERE = re.compile(
    r"(?:^|(?<=[.!,;])\s*)(?:and\s+)?"
    r"(?:here (?:are|is)|here's|here (?:they|it) (?:are|is)|below (?:are|is))\s*",
    re.I,
)
_AS_FOLLOWS = re.compile(
    r"\s+(?:(?:are|is) as follows|(?:with|include|includes|including) the following(?: [\w ]+)?|"
    r"the following(?: [\w ]+)?)\s*$",
    re.I,
)
#: A record is of a thing: a booking, an account, an order, named in the lead-in or a field.
_THING = re.compile(
    r"\b(?:reservations?|bookings?|flights?|trips?|itinerar(?:y|ies)|orders?|accounts?|"
    r"profiles?|tickets?|passengers?|membership|subscriptions?|shipments?|deliver(?:y|ies)|"
    r"invoices?|(?:user|reservation|order|account|booking) id)\b",
    re.I,
)
_AS_FOLLOWS_ONLY = re.compile(r"\s(?:are|is) as follows$", re.I)
_DETAILS_ONLY = re.compile(r"^(?:the |your |some )?(?:key |updated |full )?details?$", re.I)
#: Longest fact a listing gives, in characters.
LIMIT = 500


@dataclass(frozen=True)
class Listing:
    """A record listed in a message: the fact it gives, the number of its lead-in's line,
    and what that line says besides (the sentences the record did not take in)."""

    text: str
    line: int
    rest: str


def _subject(lead_in: str) -> tuple[str, str]:
    """What a lead-in says the list is about, without the words that announce it, and what
    of the lead-in's line stays a sentence of its own: all of it, unless it only announced
    the list ("Your reservation details are as follows:", "Here are the details of your
    reservation:"). A sentence the record repeats ("Your flight has been booked.") stays,
    as a fact that reads alone."""
    line = strip_markdown(lead_in).strip().rstrip(":").strip()
    here = _HERE.search(line)
    if here is not None:
        said = split_sentences(line[: here.start()])
        before, after = (said[-1] if said else "").strip(" ,.;"), line[here.end() :].strip()
        if before and (_DETAILS_ONLY.match(after) or after.lower().startswith("the details")):
            return before, lead_in
        return (after, lead_in if said else "") if after else (before, lead_in)
    said = split_sentences(_AS_FOLLOWS.sub("", line))
    announced = _AS_FOLLOWS_ONLY.search(line)
    return (said[-1] if said else "").strip(" ,"), " ".join(said[:-1]) if announced else lead_in


def _items(lines: list[str]) -> list[str]:
    """The list's items, each nested item said with the one above it: "Flights: A, B" when
    the upper one names a field, "Reservation ID: X (Cabin: Economy; Passengers: Y)" else."""
    root: _Node = _Node("", -1)
    path = [root]
    for line in lines:
        item = _ITEM.match(line)
        assert item is not None  # take_listings gathers item lines only
        depth = len(item["indent"].expandtabs(4))
        while len(path) > 1 and path[-1].depth >= depth:
            path.pop()
        node = _Node(" ".join(strip_markdown(item["body"]).split()).rstrip(".;"), depth)
        path[-1].children.append(node)
        path.append(node)
    return [child.said() for child in root.children]


@dataclass
class _Node:
    head: str
    depth: int
    children: list[_Node] = field(default_factory=list)

    def said(self) -> str:
        if not self.children:
            return self.head
        below = [child.said() for child in self.children]
        if self.head.endswith(":"):
            return f"{self.head} {', '.join(below)}"
        return f"{self.head} ({'; '.join(below)})"


def _is_record(items: list[str]) -> bool:
    """Fields ("Cabin: Economy"), or two short values or more (codes, names)."""
    if any(_FIELD.match(item) for item in items):
        return True
    return len(items) >= 2 and all(len(item) <= 30 for item in items)


def take_listings(text: str, listener: str = "the user") -> list[Listing]:
    """The records the lines of ``text`` list under a lead-in, each as one fact, its "you"
    said as ``listener``."""
    lines = text.splitlines()
    found: list[Listing] = []
    number = 0
    while number < len(lines):
        lead_in = lines[number].strip()
        if not lead_in.endswith(":") or _ITEM.match(lines[number]) or lead_in.startswith("#"):
            number += 1
            continue
        block: list[str] = []
        end = number + 1
        while end < len(lines) and (not lines[end].strip() or _ITEM.match(lines[end])):
            if lines[end].strip():
                block.append(lines[end])
            end += 1
        listing = _listing(lead_in, block, listener, number)
        if listing is not None:
            found.append(listing)
        number = end
    return found


def _listing(lead_in: str, block: list[str], listener: str, number: int) -> Listing | None:
    if not block or _NOT_A_RECORD.search(lead_in):
        return None
    items = _items(block)
    subject, rest = _subject(lead_in)
    if not _is_record(items) or len(subject) < 4 or not _THING.search(f"{subject} {items}"):
        return None
    said = rewrite_person(normalise(subject), "the assistant", listener)
    text = f"{sentence_case(identifier_user(said)).rstrip('.')}: {'; '.join(items)}"
    return Listing(clip(text, LIMIT).rstrip(".") + ".", number, rest)
