"""Whether a later fact replaces an earlier one: :func:`replaces`, read by the flush (a
restated fact is not a duplicate of the one it changes) and by the offline consolidation
(a replaced fact leaves MEMORY.md's current facts).

The rule is the one of ``tests/data/replacements/README.md``: both facts are about the same
thing, and the later one says the earlier no longer holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from harnessmem.backends.extractive._text import is_question, jaccard, term_set

_BRACKETED = re.compile(r"\s*\[[^\]]*\]")

#: Words that say a fact changed, by how much they say it: a strong one ("switched to")
#: names a change by itself; a weak one ("now") only with a value that changed too.
_STRONG_CHANGE = re.compile(
    # "changed" with what it changed to or from ("changed to TP212", "changed my flight to
    # ...", not "it changed his perspective"); "instead" past a clause's start ("...
    # instead of Jenkins", not "Instead of giving up, ...").
    r"\b(?:moved (?:to|from|into|up|back)|switched|changed(?: \S+){0,4}? (?:to|from)|"
    r"took over|taken over|takes over|(?<=\w )instead of|"
    r"replaced|replacing|upgraded|downgraded|"
    # What an agent confirms it did: "has been successfully updated to the new flights".
    r"(?:has|have|had) been (?:\w+ )?(?:updated|modified|rebooked|moved)|"
    r"updated (?:to|from)|(?:is|are) now (?:booked|scheduled|set|on))\b",
    re.I,
)
_WEAK_CHANGE = re.compile(
    r"(?<!right )(?<!for )(?<!just )(?<!by )(?<!until )(?<!till )\bnow\b(?! that)|"
    r"\b(?:new (?:\w+ ){0,2}(?:is|are)|updated|from now on|used to|instead\b|actually|"
    r"(?:the )?correct(?:ed)? (?:\w+ ){0,3}(?:is|are)|revised|"
    r"shut (?:\w+ ){0,3}down)\b",
    re.I,
)
#: A plan moved: it replaces a plan ("is planned for March 3"), never a past event.
_POSTPONED = re.compile(r"\b(?:pushed (?:to|back)|postponed|rescheduled|delayed|moved up)\b", re.I)
_PLAN = re.compile(
    r"\b(?:will|going to|plan(?:s|ned)?|scheduled|due|set for|next|upcoming|coming up|"
    r"(?:is|are) (?:on|for|at)|ships?|release)\b",
    re.I,
)
_ENDED = re.compile(r"\b(?:no longer|not any ?more|anymore|cancell?ed|retired)\b", re.I)
#: What comes before an end that is only possible: "can be canceled at any time".
_MAY_END = re.compile(
    r"\b(?:can|could|may|might|cannot|can't|will|would|to|able to)\s+(?:not\s+)?(?:be\s+)?$",
    re.I,
)
#: Words that say nothing about which thing a fact is about.
_GENERIC = frozenset(
    {"now", "new", "old", "longer", "moved", "switch", "chang", "user", "assist", "success"}
)
#: A value a fact gives: a number or an identifier, or a capitalised name.
_VALUE_WORD = re.compile(r"(?<![\w-])(?:\d[\w.:/-]*|[A-Z][\w-]*\d[\w-]*|[A-Z][a-z]+)")
_NOT_VALUES = frozenset(
    {"the", "our", "a", "an", "this", "that", "my", "we", "it", "he", "she", "they", "user"}
)
#: A code that names one thing: a reservation, an order, a ticket (NQNU5R, 59XX6W, IFOYYZ).
_IDENTIFIER = re.compile(r"(?<![\w-])(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,}(?![\w-])")
_NAME = re.compile(r"\b[A-Z][a-z]+\b")
_DISCOURSE = re.compile(
    r"^(?:on another note|on a (?:different|side|related) note|speaking of which|by the way|"
    r"anyway|also|btw|besides|lately|recently)\s*,\s*",
    re.I,
)
_NOT_NAMES = frozenset({"The", "A", "An", "Our", "My", "Your", "This", "That", "Its", "Their"})
#: An earlier fact that says it holds for now: the next change of its values replaces it.
_CURRENTLY = re.compile(r"\b(?:currently|current|at the moment|for now|right now)\b", re.I)
#: A fact's subject ends at its first verb ("The reservation with ID IFOYYZ | is ...").
_FIRST_VERB = re.compile(
    r"\b(?:is|are|was|were|has|have|had|will|would|can|cannot|could|may|might|did|does|do)\b",
    re.I,
)


def _values(text: str) -> set[str]:
    """Numbers, identifiers and names of a fact (a sentence's first word is no name)."""
    found = {
        m.group().casefold().rstrip(".")
        for m in _VALUE_WORD.finditer(text)
        if m.group()[0].isdigit() or any(c.isdigit() for c in m.group()) or m.start() > 0
    }
    return found - _NOT_VALUES


def _content(text: str, subjects: frozenset[str]) -> frozenset[str]:
    """A fact's content terms, a possessive read as its noun ("user's" as "user")."""
    return frozenset(t.removesuffix("'s") for t in term_set(text)) - subjects - _GENERIC


def _states_an_end(text: str) -> bool:
    """Whether ``text`` says something ended ("was cancelled"), not that it may ("can be
    cancelled at any time")."""
    return any(not _MAY_END.search(text[: m.start()]) for m in _ENDED.finditer(text))


def _subject(text: str, subjects: frozenset[str]) -> tuple[frozenset[str], set[str]]:
    """The content terms and the identifiers of a fact's subject (what comes before its
    first verb; a person's name is no thing: "John lost ..." says nothing of which of
    John's facts), or nothing for a fact that opens with its verb."""
    verb = _FIRST_VERB.search(text)
    head = text[: verb.start()] if verb else ""
    if ": " in text and (not head or len(text.partition(": ")[0]) < len(head)):
        head = text.partition(": ")[0]  # a record's subject: "The details for reservation X: ..."
    names = term_set(" ".join(w for w in _NAME.findall(head) if w not in _NOT_NAMES))
    return _content(head, subjects) - names, set(_IDENTIFIER.findall(head))


def _same_subject(later: str, earlier: str, subjects: frozenset[str]) -> bool:
    """Whether both facts are about one thing by their subjects: the later one's is (part
    of) the earlier one's ("The user's reservation" of "The user's current reservation"),
    or both name the same code; never two different codes."""
    new, new_codes = _subject(later, subjects)
    old, old_codes = _subject(earlier, subjects)
    if new_codes and old_codes:
        return bool(new_codes & old_codes)
    return bool(new) and new <= old


def replaces(later: str, earlier: str, *, subjects: frozenset[str] = frozenset()) -> bool:
    """Whether ``later`` replaces ``earlier``: both are about the same thing (at least two
    content words in common, names of people aside, and most of ``earlier``'s when it is
    short; or the same subject: "The reservation with ID IFOYYZ", "The user's
    reservation"), and ``later`` says it changed: it ended ("no longer", "has been
    cancelled", not "can be cancelled"), a change word says so ("moved to", "switched to",
    "took over", "pushed to", "upgraded", "has been updated"), or a weak one ("now", "new
    ... is") comes with a value of ``earlier`` gone and a new one in its place. Or what
    ``earlier`` waited for came of it (:func:`_came_of_it`). A fact that merely shares
    words with another never replaces it."""
    # What a fact says is judged without the photo it shares ("[shares a photo: ...]") and
    # without a discourse opener ("On another note, ...").
    later = _DISCOURSE.sub("", _BRACKETED.sub("", later))
    earlier = _DISCOURSE.sub("", _BRACKETED.sub("", earlier))
    if _about_another(later, earlier, subjects):
        return False
    fields = record_fields(earlier)
    if fields:
        return _record_replaced(later, earlier, fields)
    return _changed(later, earlier, subjects) or _came_of_it(later, earlier)


# -- a record: the fields of a thing the agent listed ---------------------------------------------

#: A field of a record the flush wrote from an agent's list ("The user's reservation details:
#: Cabin Class: Economy; Baggage: 0 total, 0 non-free").
_RECORD_FIELD = re.compile(
    r"(?:^|;\s+|\(\s*)(?P<label>[A-Z][\w ()/'&-]{0,40}?):\s+(?P<value>[^;()]*[^;()\s.])"
)
#: Field names that say nothing of which field it is.
_BARE_LABELS = frozenset({"id", "total", "number", "new", "current", "detail", "type", "date"})
#: The thing a record is of: an end of one such thing ends the record.
_THING = re.compile(
    r"\b(?:reservation|booking|flight|trip|order|account|subscription|ticket|membership)s?\b",
    re.I,
)
#: A field added to or taken from a record: "two checked bags have been added", "I don't
#: want any travel insurance".
_ADDED_OR_DROPPED = re.compile(
    r"\b(?:has|have) been (?:\w+ )?(?:added|removed|dropped|applied|charged|processed)\b|"
    r"\b(?:do not|don't|does not|doesn't) (?:want|need)\b|\bwithout\b|\bremove[ds]?\b",
    re.I,
)


def _things(text: str) -> set[str]:
    return {m.casefold().rstrip("s") for m in _THING.findall(text)}


def record_fields(text: str) -> dict[frozenset[str], frozenset[str]]:
    """A record's fields, label terms to value terms; none for a fact that is no record."""
    head, colon, rest = text.partition(": ")
    if not colon or len(head) > 160:
        return {}
    found = {}
    for match in _RECORD_FIELD.finditer(rest):
        label, value = term_set(match["label"]), term_set(match["value"])
        if label and value:
            found[label] = value
    return found


def _names_field(said: frozenset[str], label: frozenset[str]) -> bool:
    """Whether a fact's terms name a field ("bags" the "Baggage" field)."""
    return any(
        min(len(t), len(w)) >= 3 and (w.startswith(t) or t.startswith(w))
        for t in label - _BARE_LABELS
        for w in said
    )


def _record_replaced(
    later: str, earlier: str, fields: dict[frozenset[str], frozenset[str]]
) -> bool:
    """Whether ``later`` replaces the record ``earlier``: a later record of the same thing
    gives one of its fields another value; the thing ended ("Your reservation has been
    cancelled"); or a fact names one of its fields, without its value, and says it changed,
    was added or dropped. A fact that shares the thing alone ("two bags were added to the
    reservation" and its cabin) leaves the record."""
    newer = record_fields(later)
    if newer:
        return any(label in newer and newer[label] != value for label, value in fields.items())
    same_thing = bool(_things(later) & _things(earlier))
    if _states_an_end(later):
        # The end of reservation S61CZX is not the end of NM1VX1's record; an end that
        # names no code ends only a record that names none either.
        codes = set(_IDENTIFIER.findall(earlier))
        return bool(codes & set(_IDENTIFIER.findall(later))) if codes else same_thing
    if same_thing and _STRONG_CHANGE.search(later) and _CURRENTLY.search(earlier):
        return True  # "Current Flight Date: May 23" and "the reservation has been updated"
    said = term_set(later)
    changed = any(
        _names_field(said, label) and not value <= said for label, value in fields.items()
    )
    return changed and bool(
        _STRONG_CHANGE.search(later)
        or _WEAK_CHANGE.search(later)
        or _ADDED_OR_DROPPED.search(later)
    )


def _about_another(later: str, earlier: str, subjects: frozenset[str]) -> bool:
    """Whether the two facts name things of one kind by different codes ("reservation
    KX81PQ", "Reservation WB22TT"); a flight number is a value that changes, not a thing."""
    new, old = _kinds(later), _kinds(earlier)
    return any(kind in old and not codes & old[kind] for kind, codes in new.items())


def _kinds(text: str) -> dict[str, set[str]]:
    """The codes of ``text`` by the kind of thing the words before each name."""
    found: dict[str, set[str]] = {}
    for match in _IDENTIFIER.finditer(text):
        kind = _KIND.search(text[max(0, match.start() - 30) : match.start()])
        if kind:
            found.setdefault(kind.group(1).casefold(), set()).add(match.group())
    return found


def _changed(later: str, earlier: str, subjects: frozenset[str]) -> bool:
    """Whether ``later`` says the thing ``earlier`` is about changed or ended."""
    ended = _states_an_end(later)
    postponed = _POSTPONED.search(later) and _PLAN.search(earlier)
    strong = _STRONG_CHANGE.search(later) or postponed
    if not (ended or strong or _WEAK_CHANGE.search(later)):
        return False
    new, old = _content(later, subjects), _content(earlier, subjects)
    shared = new & old
    # Most of a short earlier fact's words; two for a state said to hold for now
    # ("currently scheduled for May 28") that a change word now updates.
    enough = 2 if (ended or strong) and _CURRENTLY.search(earlier) else 0.4 * min(len(old), 6)
    similar = len(shared) >= 2 and len(shared) >= enough
    if not similar and not ((ended or strong) and _same_subject(later, earlier, subjects)):
        return False
    if ended:
        # "no longer ..." ends what was, not itself; the end of the DEN-BOS booking is not
        # the end of the ATL-JFK one.
        return not (
            _states_an_end(earlier)
            or _differ(_codes, later, earlier)
            or _differ(_days, later, earlier)
        )
    if jaccard(new, old) >= 0.8:
        return False  # the same fact said again, not a change
    if strong:
        return True
    # A value is gone or new only when the other fact does not name it anywhere ("Joanna"
    # opening one fact and inside the other is the same person).
    gone = {v for v in _values(earlier) - _values(later) if v not in later.casefold()}
    added = {v for v in _values(later) - _values(earlier) if v not in earlier.casefold()}
    return bool(gone) and bool(added)


# -- what came of a pending fact ------------------------------------------------------------------

#: A change asked for: "I'd like to move it to May 24", "needs to downgrade ... to economy".
_REQUEST = re.compile(
    r"\b(?:would like|'d like|wants?|needs?|wish(?:es)?|asked|hop(?:e|es|ing)|trying)\s+to\s+"
    r"(?P<verb>move|change|switch|downgrade|upgrade|cancel|add|rebook|reschedule|modify|remove)"
    r"\b(?P<rest>[^.;]*)",
    re.I,
)
#: Something sought: "still searching for a place to open his studio", "researching ...".
_PURSUIT = re.compile(
    r"\b(?:searching for|looking for|looking into|researching|trying to find|hunting for)\b"
    r"(?P<rest>[^.;]*)",
    re.I,
)
_STILL_SEEKING = re.compile(
    r"\b(?:search(?:es|ing)? for|look(?:s|ing)? (?:for|into)|researching|trying to find)\b", re.I
)
_CLAUSE_BREAK = re.compile(r"[,;:.!?()\u2013\u2014]|\s-\s|\b(?:so|because|but|when|while|since)\b")
_ATTAINED = re.compile(
    r"\b(?:applied (?:to|for)|found|got|landed|bought|opened|running|signed|hired|adopted|"
    r"moved into)\b",
    re.I,
)
#: A test failed, then taken again or passed.
_FAILED = re.compile(r"\bfail(?:ed|s)?\b", re.I)
_RETRIED = re.compile(r"\b(?:retook|retaken|retaking|retakes|redid|passed|aced)\b", re.I)
#: Something held that is gone: "lost his job at ...", "sold our car", "quit her job".
_LOST = re.compile(
    r"\b(?:lost|quit|left|sold|gave up|closed)\s+(?:my|his|her|their|our|the)\s+"
    r"(?P<thing>[\w-]+(?:\s+[\w-]+)?)",
    re.I,
)
_LOSING = re.compile(r"\blos(?:t|ing|es)\b", re.I)
#: A booking ended: "The reservation ... has been cancelled" ends "I booked two flights".
_BOOKING = re.compile(r"\b(?:reservations?|bookings?|flights?|orders?|tickets?)\b", re.I)
_BOOKED = re.compile(r"\b(?:booked|reserved)\b|\bflights? on\b", re.I)
#: The kind of thing a code names, said just before it: "reservation with ID HSR97W".
_KIND = re.compile(
    r"\b(reservation|booking|order|ticket|invoice|account)s?\b(?:\s+(?:with\s+)?"
    r"(?:id|number|no\.?|code|#)\s*:?)?\s*$",
    re.I,
)
#: What tells two bookings apart: a code (HSR97W, an airport's ORD) or a day (May 22).
_CODE = re.compile(r"(?<![\w-])(?=[A-Z0-9]*[A-Z])[A-Z0-9]{3,}(?![\w-])")
_MONTH_DAY = re.compile(
    r"\b(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2})\b",
    re.I,
)
#: Capitalised words that name no person.
_NO_PERSON = frozenset(
    [
        *("January", "February", "March", "April", "May", "June", "July", "August"),
        *("September", "October", "November", "December", "Monday", "Tuesday"),
        *("Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "Economy", "Business"),
        *("Basic", "First", "Class", "Reservation", "Flight"),
    ]
)


def _came_of_it(later: str, earlier: str) -> bool:
    """Whether ``earlier`` waited for something that ``later`` says came of it: a change
    asked for that was made, something sought that was found, a failed test passed, a
    thing held that was lost, a booking that was cancelled. Never when the two name
    different codes or days, or different people, nor when ``later`` says it again."""
    if _states_an_end(earlier) or _other_things(later, earlier):
        return False
    new, old = _content(later, frozenset()), _content(earlier, frozenset())
    if jaccard(new, old) >= 0.8:
        return False  # the same fact said again
    return (
        _asked_and_done(later, earlier, new)
        or _sought_and_found(later, earlier)
        or bool(_FAILED.search(earlier) and _RETRIED.search(later) and _stems(old - {"fail"}, new))
        or _lost(later, earlier)
        or bool(_states_an_end(later) and _BOOKING.search(later) and _BOOKED.search(earlier))
    )


def _asked_and_done(later: str, earlier: str, new: frozenset[str]) -> bool:
    """A change asked for ("would like to move it to May 24") that ``later`` says was made
    ("is now scheduled for May 24", "have been downgraded to economy")."""
    request = _REQUEST.search(earlier)
    if not request or _REQUEST.search(later):
        return False
    if not (_STRONG_CHANGE.search(later) or _states_an_end(later)):
        return False
    rest = request.group("rest")
    if not _stems(_content(rest, frozenset()), new):
        return False
    wanted = _values(rest)
    return request.group("verb")[:5].casefold() in later.casefold() or (
        bool(wanted) and wanted <= _values(later)
    )


def _sought_and_found(later: str, earlier: str) -> bool:
    """Something sought ("searching for a place to open his dance studio") that ``later``
    says was found or done, naming it right after the verb ("loves running his own
    studio"); not when ``later`` asks or still looks."""
    pursuit = _PURSUIT.search(earlier)
    attained = _ATTAINED.search(later)
    if not pursuit or not attained or _STILL_SEEKING.search(later) or is_question(later):
        return False
    sought = _content(_phrase(pursuit.group("rest"), 8), frozenset())
    found = _content(_phrase(later[attained.end() :], 4), frozenset())
    return _stems(sought - _terms_of(_people(earlier)), found)


def _phrase(text: str, words: int) -> str:
    """The first ``words`` words of ``text``, up to its first clause break."""
    return " ".join(_CLAUSE_BREAK.split(text, maxsplit=1)[0].split()[:words])


def _lost(later: str, earlier: str) -> bool:
    """Something held ("his new job") that ``later`` says is gone ("lost his job"), when
    ``earlier`` is not a loss itself."""
    lost = _LOST.search(later)
    if lost is None or _LOST.search(earlier) or _LOSING.search(earlier):
        return False
    thing = lost.group("thing").split()[0]
    return bool(
        re.search(
            rf"\b(?:my|his|her|their|our|new)\s+(?:[\w-]+\s+)?{re.escape(thing)}", earlier, re.I
        )
    )


def _terms_of(words: set[str]) -> frozenset[str]:
    return term_set(" ".join(words))


def _stems(these: frozenset[str], those: frozenset[str]) -> bool:
    """Whether a term of ``these`` is one of ``those`` ("downgrade" and "downgraded" are one:
    terms of six letters or more are compared by their first six)."""
    short = {t[:6] for t in those}
    return any(t[:6] in short for t in these)


def _other_things(later: str, earlier: str) -> bool:
    """Whether the two facts name different codes, days or people."""
    return any(_differ(found, later, earlier) for found in (_codes, _days, _people))


def _differ(found: Callable[[str], set[Any]], later: str, earlier: str) -> bool:
    """Whether both facts name something of a kind (``found``), and nothing in common."""
    new, old = found(later), found(earlier)
    return bool(new) and bool(old) and not new & old


def _codes(text: str) -> set[str]:
    return set(_CODE.findall(text))


def _days(text: str) -> set[tuple[str, str]]:
    return {(m["month"].casefold(), m["day"]) for m in _MONTH_DAY.finditer(text)}


def _people(text: str) -> set[str]:
    """Capitalised words that may name someone (not "It", a month or a cabin)."""
    return {w for w in _NAME.findall(text) if w not in _NO_PERSON and term_set(w)} - _NOT_NAMES
