"""Who a fact is about: the speaker's first person and the listener's second person said in
the third, with names where the transcript gives them.

A fact is read later, out of its conversation, so "I" and "you" must become someone:
"Lost my job as a banker yesterday" said by Jon -> "Jon lost his job as a banker
yesterday"; the assistant's "Your reservation ID is HATHAT" -> "The user's reservation ID is
HATHAT". The first mention of a person in a fact is their name (or "the user"); later ones
are pronouns: "he"/"she" only for a given name of :data:`_FEMININE` / :data:`_MASCULINE`,
otherwise the name again as a subject (so that the verb needs no change) and "them",
"their", "themself" elsewhere. Regular expressions only, like the rest of the backend; the
rewriting is best effort for the regular verbs and the usual contractions.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from harnessmem.backends.extractive._text import (
    PAST_FORMS,
    normalise,
    third_person_verb,
    word_set,
)


@dataclass(frozen=True)
class Pronouns:
    """The forms of one person's pronoun."""

    subject: str
    object: str
    possessive: str
    independent: str
    reflexive: str


HE: Final = Pronouns("he", "him", "his", "his", "himself")
SHE: Final = Pronouns("she", "her", "her", "hers", "herself")
THEY: Final = Pronouns("they", "them", "their", "theirs", "themself")

# Given names whose bearers are almost always women or men (English-speaking usage): the
# only thing the flush reads a pronoun from. Any other name, and "the user", gets "they".
_FEMININE: Final = word_set(
    """
    alice amanda amy anna anne audrey barbara betty caroline carol catherine charlotte chloe
    claire deborah diana elizabeth ella emily emma eva evelyn gina grace hannah helen isabella
    jane jennifer jessica joanna julia karen kate katherine laura linda lisa lucy margaret
    maria mary megan melanie mia michelle nancy natalie olivia patricia rachel rebecca rose
    ruth sarah sophia sophie susan victoria
    """
)
_MASCULINE: Final = word_set(
    """
    adam alexander andrew anthony ben benjamin brian charles christopher daniel david edward
    eric frank gary george henry jack jacob james jason jon john jonathan joseph joshua kevin
    leo mark matthew michael nate nathan nicholas oliver omar patrick paul peter raj richard
    robert roland ryan samuel scott steven thomas tim timothy tom william
    """
)


def pronouns_of(name: str) -> Pronouns:
    """The pronouns a fact uses for ``name`` once it has named them: "they" unless the first
    name is a common given name of one gender."""
    parts = name.split()
    first = parts[0].casefold() if parts else ""
    if first in _FEMININE:
        return SHE
    if first in _MASCULINE:
        return HE
    return THEY


def _possessive(name: str) -> str:
    return f"{name}'" if name.endswith("s") else f"{name}'s"


@dataclass
class _Person:
    """One person a fact speaks of, and whether the fact has named them yet."""

    name: str
    pronouns: Pronouns
    named: bool = False

    def subject(self) -> str:
        said = self.name if not self.named or self.pronouns is THEY else self.pronouns.subject
        self.named = True
        return said

    def object(self) -> str:
        said = self.name if not self.named else self.pronouns.object
        self.named = True
        return said

    def possessive(self) -> str:
        said = _possessive(self.name) if not self.named else self.pronouns.possessive
        self.named = True
        return said

    def independent(self) -> str:
        said = _possessive(self.name) if not self.named else self.pronouns.independent
        self.named = True
        return said

    def reflexive(self) -> str:
        self.named = True
        return self.pronouns.reflexive


# "I also love" -> "Ana also loves": an adverb between the subject and its verb is kept.
_ADVERB = (
    r"(?:just|really|also|still|always|never|usually|often|sometimes|recently|finally|"
    r"actually|currently|mostly|totally|definitely|probably|already|even|only|truly|"
    r"absolutely|generally|personally|honestly|literally|kind of|sort of)"
)
_NEGATED = {
    "don't": "doesn't",
    "haven't": "hasn't",
    "aren't": "isn't",
    "am": "is",
    "have": "has",
    "do": "does",
}
# A word after a subject "you" that is not its verb ("for you to try", "you all").
_NOT_VERB: Final = word_set(
    "to and or all too as a an the some more with for in on at of if that this these it"
)
# After a preposition or one of these verbs, "you" is an object: "help you memorize", "sent
# you the receipt", "for you".
_TAKES_OBJECT: Final = word_set(
    """
    for to with of at about from by on in into like than without toward towards upon after
    before help helps helped let lets make makes made see saw watch allow allows tell told
    give gave given send sent show showed ask asked thank thanks assure assured remind
    reminded offer offered get got call called email emailed charge charged refund refunded
    notify notified inform informed contact contacted owe bring brought take took
    """
)
# After these (or at the start) a pronoun is a subject; after anything else, an object.
_CLAUSE_START: Final = word_set(
    """
    and or but if when that because so since as while unless once before after until where
    which who then now though although whether whenever
    """
)
# "I'm Maya," / "I'm Maya and": the speaker says their name.
_SELF_NAMED = re.compile(r"\s+(?P<name>[A-Z][a-z]+)(?=\s*(?:[,.;!]|and\b|$))")
_PRONOUN_WORDS: Final = word_set("i me my mine myself you your yours yourself")
_CONTRACTION = {"m": "is", "ve": "has", "ll": "will", "d": "would", "re": "is"}
_PERSON = re.compile(
    # The speaker's first person.
    r"\b(?P<my_and_i>[Mm]y\s+(?P<group>[\w-]+(?:\s+[\w-]+)?)\s+and\s+I)\b(?!')"
    r"|\b(?P<i_contracted>I)'(?P<contraction>m|ve|ll|d)\b(?=\s+(?P<after_contraction>\w+))?"
    rf"|\b(?P<i_verb>[Ii])\s+(?P<i_adverb>(?:{_ADVERB}\s+)*)(?P<i_following>[\w']+(?:-[\w']+)*)"
    r"|\b(?P<myself>[Mm]yself)\b|\b(?P<mine>[Mm]ine)\b|\b(?P<my>[Mm]y)\b"
    r"|(?<!')\b(?P<me>[Mm]e)\b(?!-)|\b(?P<i>I)\b"
    # The listener's second person.
    r"|\b(?P<you_are>[Yy]ou(?:'re|\s+are))\b|\b(?P<you_were>[Yy]ou\s+were)\b"
    r"|\b(?P<you_have>[Yy]ou(?:'ve|\s+have))\b|\b(?P<you_havent>[Yy]ou\s+haven't)\b"
    r"|\b(?P<you_dont>[Yy]ou\s+don't)\b|\b(?P<you_do>[Yy]ou\s+do)\b"
    r"|\b(?P<you_contracted>[Yy]ou)'(?P<you_contraction>ll|d)\b"
    r"|\b(?P<you_modal>[Yy]ou)\s+(?P<modal>can|could|will|would|might|may|should|must|"
    r"can't|won't)\b"
    r"|\b(?P<you_verb>[Yy]ou)\s+(?P<you_following>[a-z]\w*)\b"
    r"|\b(?P<yourself>[Yy]ourself)\b|\b(?P<yours>[Yy]ours)\b|\b(?P<your>[Yy]our)\b"
    r"|\b(?P<you>[Yy]ou)\b"
)
# The "we" of a speaker named in a group chat: "Melanie and others", or "they" once the fact
# has named them.
_WE = (
    r"|\b(?P<we>[Ww]e)(?:'(?P<we_contraction>re|ve|ll|d)|\s+(?P<we_be>are|were|have|had))?\b"
    r"|\b(?P<ourselves>[Oo]urselves)\b|\b(?P<ours>[Oo]urs)\b|\b(?P<our>[Oo]ur)\b"
    r"|\b(?P<us>us)\b"
)
# What two people of a chat did together: talk.
_TOGETHER = re.compile(
    r"\s+(?:(?:last|just|already|never|both|first)\s+)?(?:chatted|talked|spoke|spoken|met|"
    r"caught up|hung out|saw each other|been (?:chatting|talking))\b",
    re.I,
)
_PERSON_AND_WE = re.compile(_PERSON.pattern + _WE)
# "I'm having issues and need to ...": a second verb of the same "I" (no comma between).
_COORDINATED = re.compile(
    r"(\bI\b(?:'m|'ve)?(?:(?!\b(?:to|can|could|will|would|should|might|must|may|can't|won't|"
    r"couldn't|wouldn't|shouldn't|let)\b)[^,.;:!?])*?\band\s+)(need|want|have|hope|plan|love|"
    r"like|enjoy|prefer|don't|find|keep|take|stay|see|come|play|watch|use|run|cook|help|look|"
    r"write|teach|start|"
    r"try|feel|think|know|wish|miss|go|get|make|spend|work|live)\b(?!\s+(?:I|we|you)\b)"
)
_SLANG = (
    (re.compile(r"\bgonna\b", re.I), "going to"),
    (re.compile(r"\bwanna\b", re.I), "want to"),
    (re.compile(r"\bgotta\b", re.I), "have to"),
)


def _starts_clause(text: str, at: int) -> bool:
    before = text[:at].rstrip()
    if not before or before[-1] in ',;:.!?(\u2013\u2014-"':
        return True
    last = re.findall(r"[\w']+", before[-30:])
    return bool(last) and last[-1].lower() in _CLAUSE_START


def _after_verb(text: str, at: int) -> bool:
    last = re.findall(r"[\w']+", text[max(0, at - 30) : at])
    return (
        bool(last)
        and last[-1].lower() in _TAKES_OBJECT
        and not text[:at].rstrip().endswith((",", ";", ":", "."))
    )


def _verb(speaker: _Person, adverbs: str, following: str) -> str:
    lower = following.lower()
    if lower in _NOT_VERB or lower in _PRONOUN_WORDS or lower in {"but", "too", "so", "myself"}:
        return f"{speaker.subject()} {adverbs}{following}"
    if "-" in lower:  # "color-code" -> "color-codes"
        head, _, last = following.rpartition("-")
        verb = f"{head}-{third_person_verb(last)}"
    elif lower in _NEGATED:
        verb = _NEGATED[lower]
    elif lower.endswith("n't") or "'" in lower:
        verb = following
    else:
        verb = third_person_verb(following)
    return f"{speaker.subject()} {adverbs}{verb}"


def rewrite_person(
    text: str,
    speaker: str | None = None,
    listener: str | None = None,
    *,
    group: bool = False,
    partner: str | None = None,
) -> str:
    """``text`` with the ``speaker``'s first person and the ``listener``'s second person said
    in the third (each left alone when None). ``group``: the speaker is one of several named
    people, so their "we" is "<speaker> and others" and "our" theirs; ``partner``: the one
    other person of a two-person chat, who is in the speaker's "we" of talking together
    ("since we last chatted" -> "since Melanie and Caroline last chatted").

    "I'm doing my best" -> "Melanie is doing her best"; "your flight has been booked" ->
    "the user's flight has been booked".
    """
    if "nna" in text or "tta" in text:
        for pattern, replacement in _SLANG:
            text = pattern.sub(replacement, text)
    if speaker and " and " in text:
        text = _COORDINATED.sub(
            lambda m: m.group(1) + _NEGATED.get(m.group(2), third_person_verb(m.group(2))), text
        )
    me = _Person(speaker, pronouns_of(speaker)) if speaker else None
    you = _Person(listener, pronouns_of(listener)) if listener else None

    def swap(match: re.Match[str]) -> str:
        said = match.group(0)
        kind = match.lastgroup
        if match.group("my_and_i") is not None:
            kind = "my_and_i"
        elif match.group("i_contracted") is not None:
            kind = "i_contracted"
        elif match.group("i_verb") is not None:
            kind = "i_verb"
        elif match.group("you_contracted") is not None:
            kind = "you_contracted"
        elif match.group("you_modal") is not None:
            kind = "you_modal"
        elif match.group("you_verb") is not None:
            kind = "you_verb"
        if kind in _WE_KINDS and me is not None:
            return _we(match, me, partner)
        person = me if kind in _FIRST_KINDS else you
        if person is None:
            return said
        if kind == "my_and_i":
            name = person.subject()
            return f"{name} and {person.possessive()} {match.group('group')}"
        if kind == "i_contracted":
            after = (match.group("after_contraction") or "").lower()
            contraction = match.group("contraction")
            verb = _CONTRACTION[contraction]
            if contraction == "d" and after in {"been", "better", "gone"}:
                verb = "had"
            said = f"{person.subject()} {verb}"
            named = _SELF_NAMED.match(match.string, match.end())
            if contraction == "m" and named:  # "I'm Maya, I maintain it": Maya from here on
                person.name = named.group("name")
                person.pronouns = pronouns_of(person.name)
            return said
        if kind == "i_verb":
            following = match.group("i_following")
            if match.group("i_verb") == "i" and not following.isalpha():
                return said
            return _verb(person, match.group("i_adverb"), following)
        if kind in {"myself", "yourself"}:
            return person.reflexive()
        if kind in {"mine", "yours"}:
            return person.independent()
        if kind in {"my", "your"}:
            return person.possessive()
        if kind == "me":  # "Me and my wife went": a subject said as an object
            return (
                person.subject()
                if _starts_clause(match.string, match.start()) and said == "Me"
                else person.object()
            )
        if kind == "i":
            return person.subject()
        if kind == "you_are":
            return f"{person.subject()} is"
        if kind == "you_were":
            return f"{person.subject()} was"
        if kind == "you_have":
            return f"{person.subject()} has"
        if kind == "you_havent":
            return f"{person.subject()} hasn't"
        if kind == "you_dont":
            return f"{person.subject()} doesn't"
        if kind == "you_do":
            return f"{person.subject()} does"
        if kind == "you_contracted":
            verb = "will" if match.group("you_contraction") == "ll" else "would"
            return f"{person.subject()} {verb}"
        if kind == "you_modal":
            return f"{person.subject()} {match.group('modal')}"
        if kind == "you_verb":
            following = match.group("you_following")
            if following.lower() in _PRONOUN_WORDS:  # "told you my plan"
                return f"{person.object()} {_PERSON.sub(swap, following)}"
            if _after_verb(match.string, match.start()):
                return f"{person.object()} {following}"  # "help you memorize", "sent you the"
            if following.lower() in _NOT_VERB:
                return f"{person.subject()} {following}"
            return _verb(person, "", following)
        # A bare "you".
        if _after_verb(match.string, match.start()) or not _starts_clause(
            match.string, match.start()
        ):
            return person.object()
        return person.subject()

    return (_PERSON_AND_WE if group and me else _PERSON).sub(swap, text)


_WE_KINDS: Final = frozenset({"we", "we_contraction", "we_be", "ourselves", "ours", "our", "us"})
_FIRST_KINDS: Final = frozenset(
    {"my_and_i", "i_contracted", "i_verb", "myself", "mine", "my", "me", "i"}
)


def _we(match: re.Match[str], person: _Person, partner: str | None = None) -> str:
    """A named speaker's "we", "our", "us": "<name> and others" (or "they" once the fact
    has named them), "their", "them"; "<name> and <partner>" when they talked together."""
    found = match.groupdict()
    named = person.named
    person.named = True
    if found["we"] is not None:
        subject = "they" if named else f"{person.name} and others"
        if partner and _TOGETHER.match(match.string, match.end()):
            subject = f"{person.name} and {partner}"
            person.named = named  # "she" after "Melanie and Caroline" would be either
        contraction = found["we_contraction"]
        if contraction:
            verb = {"re": "are", "ve": "have", "ll": "will", "d": "would"}[contraction]
            return f"{subject} {verb}"
        return f"{subject} {found['we_be']}" if found["we_be"] else subject
    if found["ourselves"] is not None:
        return "themselves"
    if found["ours"] is not None:
        return "theirs" if named else _possessive(person.name)
    if found["our"] is not None:
        return "their" if named else _possessive(person.name)
    return "them" if named else f"{person.name} and others"


def third_person(
    sentence: str, subject: str, *, group: bool = False, partner: str | None = None
) -> str:
    """``sentence`` with the speaker's first person replaced by ``subject`` (the capital
    of a sentence is :func:`._text.sentence_case`'s: an identifier keeps its case).

    "I'm moving to Lisbon" -> "Ana is moving to Lisbon"; "my sister" -> "Ana's sister";
    "I like tea" -> "Ana likes tea" (regular verbs, best effort).
    """
    return rewrite_person(normalise(sentence), subject, group=group, partner=partner)


def second_to_third(text: str, listener: str) -> str:
    """``text`` with the listener's second person said in the third: "if you like action
    movies" -> "if the user likes action movies", "your friend" -> "the user's friend"."""
    return rewrite_person(text, listener=listener)


# -- a subject for a sentence said without one --------------------------------------------------

# "Excited to start", "Stressed out": an adjective in -ed takes "I'm".
_STATES: Final = word_set(
    """
    excited thrilled stoked blessed tired interested pleased amazed surprised stressed worried
    scared bored married engaged obsessed inspired determined committed involved impressed
    overwhelmed exhausted relieved delighted honored honoured grateful thankful glad happy
    proud sad sorry busy swamped psyched hooked done finished retired divorced pregnant
    """
)
# A past form that is also the bare verb reads as an order ("Read the book"): not these.
_AMBIGUOUS: Final = word_set("read put set cut let hit quit cost hurt shut spread beat bet")
_ING_NOUNS: Final = word_set(
    """
    nothing something anything everything thing morning evening wedding building ceiling
    clothing during king ring spring string wing sibling pudding darling feeling feelings
    according including regarding considering loving liking hoping wishing missing speaking
    talking
    exciting amazing interesting inspiring relaxing rewarding challenging terrifying surprising
    fulfilling satisfying exhausting boring annoying frustrating overwhelming encouraging
    touching heartwarming refreshing promising stunning fascinating humbling amusing
    nerve-wracking
    """
)
_FINITE: Final = word_set(
    """
    is are was were 's has have had can could will would should may might must does do did
    makes made helps keeps gives feels seems looks sounds means takes brings reminds lets gets
    got became becomes enables allows costs requires needs teaches shows calms relaxes inspires
    motivates matters works pays
    """
)
_LEAD_ADVERB = re.compile(
    r"^(?P<adverb>(?:just|finally|also|recently|really|totally|definitely|still|already|"
    r"actually|currently|literally|kinda|honestly)\s+)?(?P<word>[A-Za-z][a-z']*)\b(?P<rest>.*)$",
    re.S | re.I,
)
_SPAN = re.compile(
    r"\s+(?:a (?:few|couple|long|while|week|month|year|day)|ages|forever|so long|too long|"
    r"\w+ (?:days|weeks|months|years))\b",
    re.I,
)
# What tells that a sentence in -ing is not about what the speaker does.
_NOT_THE_SPEAKER = re.compile(
    r"^[^,;:\u2013\u2014]*,\s+(?:I|I'm|I've|I'd|I'll|we|we're|my|our|he|she|they|it|it's|"
    r"there|the|this|that)\b|\beach other\b|\bone another\b|"
    r"^[^,.;:]*\band\s+\w+ing\b[^,.;:]*?\b(?:need|take|require|are|were|make|keep|give|help|"
    r"mean|have|bring|can|will|must|must've)\b|"
    r"^\s+to be\b|,\s*(?:is|are|was|were|has|have|can|will|makes|helps|gives|keeps)\b",
)
_SLANG_START = {"gonna": "I'm going to", "wanna": "I want to", "gotta": "I have to"}


def with_subject(sentence: str) -> str:
    """A chat sentence said without its subject, given "I": "Lost my job yesterday" -> "I
    lost my job yesterday", "Researching adoption agencies" -> "I'm researching adoption
    agencies", "Gonna continue my edu" -> "I'm going to continue my edu". Left as it is when
    its subject may be someone else ("Looks like rain", "Really made me think")."""
    found = _LEAD_ADVERB.match(sentence)
    if not found:
        return sentence
    word, rest = found.group("word"), found.group("rest")
    adverb = (found.group("adverb") or "").lower()
    lower = word.lower()
    following = rest.split(maxsplit=1)
    after = following[0].lower().strip(",.!?") if following else ""
    if after in {"me", "myself"} or not rest.strip() or not (word[:1].isupper() or adverb):
        return sentence  # "Really made me think": the speaker is the object
    if lower in _SLANG_START and not adverb:
        return f"{_SLANG_START[lower]}{rest}"
    if lower == "been":
        if _SPAN.match(rest):
            return sentence  # "Been a few days since we chatted": it has
        return f"I've {adverb}been{rest}"
    if lower.endswith("ing") and _NOT_THE_SPEAKER.search(rest):
        # "Growing up, I saw ...": the clause after has its subject; "Supporting each
        # other ...", "Dancing and running my biz need ...", "Going to be a great night",
        # "Creating community, especially for kids, is important": not the speaker's doing.
        return sentence
    if lower in _STATES:
        return f"I'm {adverb}{lower}{rest}"
    if lower in _AMBIGUOUS:
        return sentence
    if lower in PAST_FORMS or (
        len(lower) >= 5 and lower.endswith("ed") and not lower.endswith("eed")
    ):
        return f"I {adverb}{lower}{rest}"
    if (
        (len(lower) >= 6 or lower in {"going", "doing"})
        and lower.endswith("ing")
        and lower not in _ING_NOUNS
        and not _has_verb(_first_clause(rest))
        and not re.match(r"\w+'s\b", word)
    ):
        return f"I'm {adverb}{lower}{rest}"
    return sentence


_IS_CONTRACTED = re.compile(
    r"\w's\s+(?:been|got|gotten|not|so|really|just|always|never|also|still|a|an|the|my|our|"
    r"such|what|how|why|where|like|gonna|going)\b",
    re.I,
)


def _has_verb(clause: str) -> bool:
    """Whether a clause has a finite verb ("Losing my job gave me the push"): then the
    words in -ing before it are its subject, not the speaker's doing."""
    if _IS_CONTRACTED.search(clause) or re.search(r"\b(?:me|myself)\b", clause, re.I):
        return True  # "Cooking helps me relax": the speaker is the object
    for word in re.findall(r"[\w']+", clause.lower()):
        if word in _FINITE or word.endswith("n't") or word in PAST_FORMS:
            return True
        if len(word) >= 5 and word.endswith("ed") and not word.endswith("eed"):
            return True
    return False


def _first_clause(text: str) -> str:
    return re.split(r"[,;:\u2013\u2014]|\s-\s", text, maxsplit=1)[0]
