"""Concrete recommendations a speaker made to the listener, kept as attributed facts.

People ask later what they were told to read, watch, try or use ("What book did you
recommend to me?"), so the flush keeps an assistant's recommendation when it names a
concrete thing: a title, a named thing, or a specific activity ("The assistant recommended
reading 'Atomic Habits' by James Clear."). It drops the generic kind ("I suggest you take
care of yourself"), questions, referrals to support ("I recommend contacting a human
agent") and what is not a recommendation at all. The rule is written in
``tests/data/flush-labels/README.md``. Regular expressions only, like the rest of the
backend: a sentence is read as a cue ("I recommend", "you could try", "X is a good
choice") and its object, and the object is what must be concrete.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from harnessmem.backends.extractive._person import second_to_third
from harnessmem.backends.extractive._text import (
    CHITCHAT,
    STOPWORDS,
    is_question,
    normalise,
    stem,
    words,
)

# "I recommend", "I'd suggest", "I would like to recommend", "I can recommend", "Then I
# recommend that you": the speaker's own recommendation. Not "I don't recommend".
_I_RECOMMEND = re.compile(
    r"\bI(?:'d| would| can| could| also| highly| strongly| really| just| personally|"
    r" would like to| want to| might)*\s+(?P<verb>recommend|suggest)(?:ed)?\b"
    r"(?:\s+that)?(?P<you>\s+you\b)?(?:\s+to\s+you\b)?",
    re.I,
)
# What the listener could do, said to them: "you could try", "you might want to read".
_ACTIVITY = (
    r"try|consider|read|watch|listen|visit|play|check out|look (?:at|into)|join|take up|"
    r"practi[cs]e|learn|download|install|follow|attend|cook|start|give|explore|do|seek|"
    r"eat|drink|buy|wear|go (?:to|for|on)|make|take|pick up"
)
_YOU_COULD = re.compile(
    r"\byou\s+(?:could|might|may|should)(?:\s+(?:also|still|even|always|definitely))?"
    rf"(?:\s+want\s+to)?\s+(?P<verb>{_ACTIVITY})\b",
    re.I,
)
# "You can use a gift card" is a permission, "you can do it" encouragement: after "can",
# only the verbs of trying something out make a suggestion ("you can try yoga").
_YOU_CAN = re.compile(
    r"\byou\s+can(?:\s+(?:also|still|even|always|definitely))?\s+(?P<verb>try|consider|"
    r"check out|watch|read|listen|visit|play|join|attend|explore|go (?:to|for)|start with|"
    r"learn|download|follow)\b",
    re.I,
)
# "Some suggestions for you to try could include ...", "I have many recommendations for
# movies, such as ...", "movie recommendations like ...", "some healthy living advice, such
# as ...".
_LIST_OF = re.compile(
    r"\b(?P<phrase>(?:(?!(?:have|has|had|of|lots|many|some|few|several|a|an|the|my|any|I)\b)"
    r"[a-z][\w-]*\s+){0,2}(?:recommendation|suggestion|advice|tip)s?\b"
    r"(?:\s+for\s+(?!you\b)[\w -]{2,30}?)?)(?:\s+for\s+you(?:\s+to\s+\w+)?)?"
    r"(?:\s+(?:could|would|might|may|can))?\s*(?:,\s*)?"
    r"(?:such as|like|include|including|are|is|:)\s+(?P<rest>.+)",
    re.I,
)
# "'The Shawshank Redemption' might be a good choice", "yoga and meditation are all good
# ways to reduce stress".
_GOOD_CHOICE = re.compile(
    r"^(?P<thing>.{3,200}?)\s+(?:might|may|could|would|can)?\s*(?:be|is|are)\s+"
    r"(?:all\s+|also\s+|both\s+)?(?P<rest>(?:a|an)?\s*(?:good|great|excellent|perfect|nice|"
    r"wonderful|fun|popular|classic|ideal)\s+(?:\w+\s+)?(?:choices?|options?|ways?|picks?|"
    r"places?|starts?|works?|books?|movies?|films?|games?|shows?|songs?)\b.*)$",
    re.I,
)
# "Have you tried Headspace?": a recommendation put as a question, kept only when it names
# a thing (a question about the listener's own doings is not advice).
_HAVE_YOU = re.compile(
    r"^(?:\w+,\s*)?have you (?:also\s+|ever\s+)?(?P<verb>considered|tried|thought about)\s+"
    r"(?P<rest>.+?)\?*$",
    re.I,
)

# A lead that carries nothing ("Then", "In addition", "Of course", "I think").
_LEAD = re.compile(
    r"^(?:(?:then|so|also|well|of course|however|in addition|additionally|besides|"
    r"moreover|furthermore|firstly|first|secondly|second|lastly|finally|for example|"
    r"for instance|otherwise|alternatively|and|but|or|hmm|yes|sure|certainly|great|"
    r"okay|ok|i think|i believe|i guess|perhaps|maybe)\b[,!.]?\s*)+",
    re.I,
)
_CONDITION = re.compile(r"^(?P<cond>(?:if|when|since|as for|for)\s+[^,]{3,120}),\s*(?=\S)", re.I)
_HEARD = re.compile(r"^(?:I(?:'ve| have)? (?:heard|read|think|believe|know)(?: that)?\s+)", re.I)
# Where the thing recommended ends and the speaker's comment on it begins.
_COMMENT = re.compile(
    r"(?:,\s*|\s+-\s+|\s+)(?=(?-i:which|who|where|it(?:'s| is| was| has| can| will| \w+s)|"
    r"they(?:'re| are| have| can| will)|as (?:it|they|this|these)|because|since|so that|"
    r"so you|this (?:will|can|way|is)|these (?:\w+ )?(?:are|is|can|will))\b)"
    r"|,\s*and (?:I|it|this|they)\b|[;:]\s|\.\s"
)
# "for you", "to you", "for you to try": who is told, said by the fact's attribution.
_TO_YOU = re.compile(r"\s+(?:for|to) you(?:\s+to\s+(?:try|enjoy|read|watch))?\b", re.I)
_DANGLING = re.compile(r"\s+(?:in|(?<!\bso )on|at|of|for|to|with|from|by|and|or|the|a|an)$", re.I)
_PURPOSE = re.compile(
    r"\s+(?:in order\s+)?to\s+(?:help|make|improve|enhance|better|increase|reduce|boost|"
    r"keep|gain|deepen|expand|meet|relieve|broaden|relax|ease|learn|understand|find|get)\b.*",
    re.I,
)
# A referral to the service's own support, or a routine check: what a service agent says
# when it cannot help, not a recommendation anyone asks about later.
_REFERRAL = re.compile(
    r"^(?:contact|reach|speak|talk|transfer|call|check|log|get in touch|consult|wait)\w*\b"
    r".{0,80}?\b(?:agent|support|customer service|service team|team|website|e-?mail|account|"
    r"airline|representative|help ?desk|confirmation|bank|provider|company|documentation)s?\b",
    re.I,
)
_QUOTED = re.compile(r"\"[^\"]{2,}\"|'[A-Z0-9][^']{1,80}'|\u201c[^\u201d]{2,}\u201d")
_PROPER = re.compile(r"(?<![.!?:]\s)(?<!^)\b(?!I\b|AI\b)[A-Z][\w'-]*[a-z0-9][\w'-]*|\b[A-Z]{2,}\b")
_LIST = re.compile(
    r"\b(?:such as|like|e\.g\.|for example|including)\b|,[^,]+,|\b\w+,\s+\w+\s+(?:and|or)\b", re.I
)

# Words of advice that name nothing: "take care of yourself", "try to relax", "believe in
# yourself", "adjust your mindset". Stems, as :func:`_specific_terms` compares them.
_GENERIC: Final = frozenset(
    stem(word)
    for word in """
    relax relaxed rest rested believe yourself ourselves mindset emotion emotions feeling
    feelings thought thoughts positive positively patience patient passion best calm careful
    confidence confident strong healthy balance open mind heart enjoy moment moments life
    ability abilities charm way ways time times try trying take taking keep keeping stay
    staying find finding seek seeking help helping support advice adjust adjusting maintain
    maintaining attitude optimistic people someone somebody others other better more less
    understand understanding choose choosing suit suits suitable appropriate right proper
    give giving make making do doing start starting use using new different various
    certain own good great interest interests interested effort efforts step steps
    progress goal goals situation problem problems issue issues plan plans further
    additional assist assistance options option thing things stuff kind kinds sort
    every each whatever anything something everything practice practise more most
    continue keep going look looking check checking learn learning improve improving
    technique techniques method methods tip tips activity activities idea ideas resource
    resources exercise exercises tool tools
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def _specific_terms(text: str) -> set[str]:
    """The content words of ``text`` that name something (not advice words, not filler)."""
    found = set()
    for word in words(text):
        if word in STOPWORDS or len(word) < 3 or word in {"user", "you", "your"}:
            continue
        term = stem(word.strip("'"))
        if term not in CHITCHAT and term not in _GENERIC and word not in _GENERIC:
            found.add(term)
    return found


def is_concrete(thing: str) -> bool:
    """Whether a recommended ``thing`` names something: a title, a name, or a specific
    activity (a list of things, or at least three words that are not advice talk)."""
    if _QUOTED.search(thing) or _PROPER.search(thing):
        return True
    specific = _specific_terms(thing)
    return len(specific) >= 3 or (len(specific) >= 2 and bool(_LIST.search(thing)))


# -- rewriting ----------------------------------------------------------------------------------

_GERUND_DOUBLE = re.compile(r"^(?:[^aeiou]*[aeiou])[^aeiouwxy]$")


def _gerund(verb: str) -> str:
    """``read`` -> ``reading``, ``take`` -> ``taking``, ``jog`` -> ``jogging``."""
    lower = verb.lower()
    if lower.endswith("ing") or not lower.isalpha():
        return verb
    if lower.endswith("ie"):
        return verb[:-2] + "ying"
    if lower.endswith("e") and not lower.endswith(("ee", "ye", "oe")) and lower != "be":
        return verb[:-1] + "ing"
    if len(lower) <= 4 and _GERUND_DOUBLE.match(lower) and lower not in {"visit", "open"}:
        return verb + verb[-1] + "ing"
    return verb + "ing"


def _trim(thing: str) -> str:
    """The recommended thing without the comment that follows it (a title's own colon or
    "Who" is no comment)."""
    thing = _TO_YOU.sub("", thing)
    quoted = [m.span() for m in _QUOTED.finditer(thing)]
    for cut in _COMMENT.finditer(thing):
        if cut.start() > 0 and not any(a < cut.start() < b for a, b in quoted):
            thing = thing[: cut.start()]
            break
    thing = thing.strip(" ,;:-\u2013\u2014.!")
    while _DANGLING.search(thing):
        thing = _DANGLING.sub("", thing)
    return thing


def _object(rest: str, verb: str, you: bool) -> str:
    """What follows the cue, said as a gerund phrase when it is a verb for the listener:
    "you read X" -> "reading X", "try using X" -> "using X", "consider giving" -> "giving"."""
    rest = rest.strip()
    head, _, tail = rest.partition(" ")
    adverb = re.match(r"(?:first|also|just|then|always|really|simply)\s+", rest, re.I)
    if adverb and verb.lower() in {"recommend", "suggest"}:
        return _object(rest[adverb.end() :], verb, you)
    lower = verb.lower()
    if lower in {"try", "consider"}:
        if head.lower().endswith("ing") and head.isalpha():
            return _gerund_list(rest)
        if lower == "try":
            return f"trying {rest}"
        return rest
    if lower in {"recommend", "suggest"}:
        if you and head.lower() in {"try", "consider"}:
            return _object(tail, head, True)
        if you and head.isalpha() and head.islower():
            return f"{_gerund(head)} {_gerund_list(tail)}".strip()
        return rest
    # A modal cue: the verb is the listener's ("you could read X").
    first, _, more = verb.partition(" ")
    return f"{_gerund(first)}{' ' + more if more else ''} {_gerund_list(rest)}".strip()


# A bare verb further along a list of things to do ("go for a walk, watch a movie or do ...").
_LISTED_VERB = re.compile(
    r"(,\s*|\s+(?:and|or)\s+)((?:\w+ly|just|also|then)\s+)?(watch|do|pay|try|listen|read|go|take|make|eat|drink|"
    r"ask|look|play|visit|join|practi[cs]e|learn|get|spend|find|keep|start|use|write|cook|talk|"
    r"call|seek|explore|attend|follow|download|buy|wear|relax|enjoy|rest|sleep|walk|run|stretch|"
    r"interact|network|establish|participate|develop|have|plan|build|share|set)\b"
)


def _gerund_list(text: str) -> str:
    """The bare verbs that go on a list begun by a gerund, said as gerunds too."""
    return _LISTED_VERB.sub(lambda m: m.group(1) + (m.group(2) or "") + _gerund(m.group(3)), text)


def _condition(sentence: str) -> tuple[str, str]:
    """The sentence's "if ..." lead (as said) and the rest, leads that carry nothing gone."""
    sentence = _LEAD.sub("", sentence).strip()
    found = _CONDITION.match(sentence)
    if not found:
        return "", sentence
    return found.group("cond"), _LEAD.sub("", sentence[found.end() :]).strip()


def _lower_lead(thing: str) -> str:
    """``thing`` with a capital that only began its sentence lowered ("Doing some exercise"
    -> "doing some exercise"; "Emei Mountain" stays)."""
    first = thing.split(" ", 1)[0]
    if re.fullmatch(r"[A-Z][a-z]+", first) and (
        first.endswith("ing") or first.lower() in STOPWORDS
    ):
        return thing[:1].lower() + thing[1:]
    return thing


def _say(subject: str, listener: str, thing: str, condition: str = "", about: str = "") -> str:
    """ "<Subject> recommended <thing> (<about>) (<condition>)." with the listener's second
    person said in the third."""
    body = second_to_third(_lower_lead(thing), listener)
    for note in (about, condition):
        if note:
            said = second_to_third(note, listener)
            body = f"{body} ({said[:1].lower()}{said[1:]})"
    body = " ".join(body.split()).rstrip(" ,")
    space = "" if body.startswith(":") else " "
    return f"{subject[:1].upper()}{subject[1:]} recommended{space}{body}."


_ATTITUDE = re.compile(r"(?:stay|be|keep|remain|never|always|don't|do not)\b", re.I)
_QUANTIFIER = re.compile(
    r"^(?:(?:some|many|lots|a few|few|several|good|great|common|my)\s+)+", re.I
)


def _listed(text: str) -> str | None:
    """The items of "recommendations for movies, such as ..."-like sentences, or None."""
    listed = _LIST_OF.search(text)
    if listed is None:
        return None
    rest = listed.group("rest")
    items = _trim_titles(rest) if _QUOTED.search(rest) else _trim(rest)
    if _ATTITUDE.match(items) and not (_QUOTED.search(items) or _PROPER.search(items)):
        return None  # "My advice: stay passionate, focused and resilient."
    return items if is_concrete(items) else None


def recommendation(sentence: str, subject: str, listener: str) -> str | None:
    """The fact a sentence that recommends something concrete gives, or None.

    ``subject`` is who speaks ("the assistant", "Melanie"); ``listener`` who is told
    ("the user"). "I recommend you read 'Atomic Habits' by James Clear, it helps build
    routines" -> "The assistant recommended reading 'Atomic Habits' by James Clear."
    Every kind of cue ("I suggest", "you could try", "X is a good choice") is said as
    "recommended": one wording for one kind of fact.
    """
    text = normalise(sentence).strip()
    if len(text) < 12:
        return None
    asked = _HAVE_YOU.match(text)
    if asked:
        thing = _trim(asked.group("rest"))
        # Not the sentence's start: a capital here begins a name ("Have you tried Headspace?").
        if _QUOTED.search(thing) or _PROPER.search(f"the {thing}"):
            tried = asked.group("verb").lower() == "tried"
            gerund = thing.split(" ", 1)[0].lower().endswith("ing")
            return _say(subject, listener, f"trying {thing}" if tried and not gerund else thing)
        return None
    if is_question(text):
        return None
    condition, text = _condition(text)
    cue = _I_RECOMMEND.search(text)
    if cue:
        trimmed = _trim(text[cue.end() :])
        purpose_free = _PURPOSE.sub("", trimmed)
        if not _REFERRAL.match(purpose_free) and is_concrete(purpose_free):
            what = _HERE_IS.search(text[: cue.start()])
            if what and text[cue.end() :].lstrip().startswith(":"):
                # "Here's the recipe I recommend: fry the ribs ...": the recipe is what.
                return _say(subject, listener, f"{what.group('what')}: {trimmed}", condition)
            thing = _object(trimmed, cue.group("verb"), bool(cue.group("you")))
            return _say(subject, listener, thing, condition)
    listed = _LIST_OF.search(text)
    if listed:
        items = _listed(text)
        if items is None:
            return None
        phrase = _QUANTIFIER.sub("", listed.group("phrase").strip())
        plain = phrase.lower().rstrip("s") in {"recommendation", "suggestion", "advice", "tip"}
        return _say(subject, listener, items, condition, "" if plain else phrase)
    if cue:
        return None
    could = _YOU_COULD.search(text) or _YOU_CAN.search(text)
    if could:
        rest = text[could.end() :]
        if re.match(r"\s*(?:it|them|this|that|these|those)\b", rest, re.I):
            return None  # "you can do it", "watch them grow": nothing named
        thing = _object(_trim(rest), could.group("verb"), True)
        judged = _PURPOSE.sub("", thing)
        if _REFERRAL.match(judged) or not is_concrete(judged):
            return None
        return _say(subject, listener, thing, condition)
    good = _GOOD_CHOICE.match(text)
    if good:
        thing = _HEARD.sub("", good.group("thing").strip(" ,"))
        named = _QUOTED.search(thing) or _PROPER.search(thing)
        if not (named or (_LIST.search(thing) and is_concrete(thing))):
            return None
        if re.search(r"\b(?:I|my|me|we|our)\b", good.group("rest")):
            return None
        if re.match(r"(?:it|this|that|these|those|they|there|which|he|she)\b", thing, re.I):
            return None
        return _say(subject, listener, f"{thing} as {_trim(good.group('rest'))}", condition)
    return None


def _trim_titles(rest: str) -> str:
    """A list of titles up to the comment after its last title."""
    if rest.count('"') % 2:
        # A title the sentence splitter cut ("Avengers: Endgame." These ...): keep it whole.
        return rest.strip(" ,;:.") + '"'
    titles = list(_QUOTED.finditer(rest))
    if not titles:
        return _trim(rest)
    end = titles[-1].end()
    tail = re.match(r"[^,.;:]{0,40}", rest[end:])  # "... series", "... by James Clear"
    extra = tail.group(0) if tail else ""
    comment = _COMMENT.search(extra)
    if comment:
        extra = extra[: comment.start()]
    return (rest[:end] + extra).strip(" ,;:.")


_HERE_IS = re.compile(
    r"\b(?:here's|here is|this is)\s+(?P<what>(?:the|a|an|my|one)\s+[\w -]{1,30}?)\s+"
    r"(?:that\s+|which\s+)?$",
    re.I,
)
_THERE_IS = re.compile(r"^there(?:'s| is| are)\s+(?:also\s+)?", re.I)
_ASKS = re.compile(
    r"\b(?:recommend\w*|suggest\w*|advice|tips?|ideas?|ways? to|methods?|techniques?|any good|"
    r"what should I|how (?:can|could|should|do) I)\b[^.!]*\?|"
    r"\b(?:can|could|would) you (?:please )?(?:recommend|suggest)\b",
    re.I,
)


def asks_for_advice(text: str) -> bool:
    """Whether a user's turn asks for recommendations or how to do something ("Do you have
    any recommendations?", "Do you know any photography techniques?", "Do you have any good
    ways to relieve stress?")."""
    return bool(_ASKS.search(normalise(text)))


def named_follow_up(sentence: str, subject: str, listener: str) -> str | None:
    """A sentence that names titles (or lists named things or specific activities) once
    recommendations are asked for or announced in the turn ("I can recommend some books.
    For romance novels, "Jane Eyre" and ... are classic works."; "There's a comedy movie
    "Crazy Alien" ...")."""
    text = _LEAD.sub("", normalise(sentence)).strip()
    if is_question(text):
        return None
    listed = re.search(r"\b(?:such as|like|including)\s+(?P<items>.+)", text)
    named = _QUOTED.search(text) or (
        listed
        and (
            _PROPER.search(f"the {listed.group('items')}")
            or (_LIST.search(listed.group("items")) and is_concrete(listed.group("items")))
        )
    )
    if not named or re.search(r"\b(?:I|my|me|we|our)\b", text, re.I):
        return None
    there = _THERE_IS.match(text)
    if there:  # "There's a comedy movie "Crazy Alien" which ...": the thing itself
        thing = text[there.end() :]
        return _say(
            subject, listener, _trim_titles(thing) if _QUOTED.search(thing) else _trim(thing)
        )
    return _say(subject, listener, f": {text.rstrip('.!')}")


def announces(sentence: str) -> bool:
    """Whether the speaker says it recommends something, concrete or not ("I can recommend
    some books you might like")."""
    return bool(_I_RECOMMEND.search(sentence) or _LIST_OF.search(sentence))


def recommendations(
    sentences: Sequence[str], subject: str, listener: str, *, asked: bool = False
) -> list[str | None]:
    """The fact of each sentence of one turn that recommends something concrete (None for
    the others). A sentence naming titles counts once recommendations were ``asked`` for
    (by the turn before) or announced earlier in the turn."""
    found: list[str | None] = []
    announced = asked
    for sentence in sentences:
        fact = recommendation(sentence, subject, listener)
        if fact is None and announced:
            fact = named_follow_up(sentence, subject, listener)
        announced = announced or announces(sentence)
        found.append(fact)
    return found
