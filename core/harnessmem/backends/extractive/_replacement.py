"""Whether a later fact replaces an earlier one: :func:`replaces`, read by the flush (a
restated fact is not a duplicate of the one it changes) and by the offline consolidation
(a replaced fact leaves MEMORY.md's current facts).

The rule is the one of ``tests/data/replacements/README.md``: both facts are about the same
thing, and the later one says the earlier no longer holds.
"""

from __future__ import annotations

import re

from harnessmem.backends.extractive._text import jaccard, term_set

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
    r"\b(?:new (?:\w+ ){0,2}(?:is|are)|updated|from now on|used to|instead\b|"
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
    ... is") comes with a value of ``earlier`` gone and a new one in its place. A fact
    that merely shares words with another never replaces it."""
    # What a fact says is judged without the photo it shares ("[shares a photo: ...]") and
    # without a discourse opener ("On another note, ...").
    later = _DISCOURSE.sub("", _BRACKETED.sub("", later))
    earlier = _DISCOURSE.sub("", _BRACKETED.sub("", earlier))
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
        return not _states_an_end(earlier)  # "no longer ..." ends what was; not itself
    if jaccard(new, old) >= 0.8:
        return False  # the same fact said again, not a change
    if strong:
        return True
    # A value is gone or new only when the other fact does not name it anywhere ("Joanna"
    # opening one fact and inside the other is the same person).
    gone = {v for v in _values(earlier) - _values(later) if v not in later.casefold()}
    added = {v for v in _values(later) - _values(earlier) if v not in earlier.casefold()}
    return bool(gone) and bool(added)
