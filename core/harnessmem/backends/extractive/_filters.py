"""What the flush must not take for a fact, and what an agent's outcome looks like.

The written rule these follow is in ``tests/data/flush-labels/README.md``: instructions,
framework boilerplate, code, stack traces, raw JSON, narration of the next step and
fragments are dropped; outcomes of the work ("the flight has been booked", "the output
changed from 344 to 345") are kept (concrete recommendations are read by ``_advice``).
Regular expressions only, like the rest of the backend.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

#: Fenced code blocks, removed before a text is split into sentences.
FENCE: Final = re.compile(r"(?ms)^\s*(```|~~~).*?(?:^\s*\1[^\n]*$|\Z)")

_CODE_LINE = re.compile(
    r"^\s*(?:(?:from\s+[\w.]+\s+)?import\s+[\w.]|def\s+\w+\s*\(|class\s+\w+[(:]|return\b|"
    r"print\(|[$>#]\s|\w+(?:\.\w+|\[[^\]]*\])*\s*[+\-*/]?=\s*\S|[{}\[\]()];?$|"
    r"(?:Traceback \(most recent call last\)|File \"[^\"]+\", line \d+)|"
    r"\w+(?:Error|Exception):\s)"
)
_SYMBOLS = re.compile(r"[{}\[\]()=<>;`\\|$]")

# Second-person rules and the agent framework's standing orders.
_ADDRESSED = re.compile(
    r"\bwe recommend\b|\b(?:you|your)\s+(?:should|must|can(?:not|'t)?|cannot|may|might|"
    r"need to|have to|will|"
    r"are going to|'re going to|'ll|'d)\b|\byou(?:'re| are) (?:in|going|satisfied)\b",
    re.I,
)
_COMMAND = re.compile(
    r"^(?:(?:now|then|first|next|instead|also|so|finally|remember|note|important)[,:]?\s+)*"
    r"(?:always|never|do(?:n't| not)?|use|run|make sure|ensure|try|edit|open|check|install|"
    r"look|see|write|create|add|remove|delete|call|submit|avoid|go|start|stop|read|"
    r"search|find|conduct|issue|insert|please|be sure|keep|consider|follow|give|show|tell|"
    r"let me know|feel free|confirm|provide|send|fix|think|re-?run|scroll|goto|navigate|"
    r"modify|reproduce|replicate|sync|commit|push|merge|rebase|tag|deploy)\b",
    re.I,
)
_CONDITIONAL_COMMAND = re.compile(r"^(?:if|when|once|before|after)\b[^,]{3,120},\s*", re.I)
_NARRATION = re.compile(
    r"^(?:(?:now|so|ok(?:ay)?|great|first|next|then|finally)[,!]?\s+)*"
    r"(?:let's|let me|let us|we can|we should|we'll|we will|we need to|i'll|i will|"
    r"here (?:is|are)|here's|calling|we see|i see that|this (?:could|should|would|might))\b",
    re.I,
)
_LEAD_IN = re.compile(r"\bthe following\b|:\s*$", re.I)
_PLEASE = re.compile(r"(?:^|,\s*)please\b|\bplease[.!]?$", re.I)
_SHOUTING = re.compile(r"^[^a-z]*[A-Z]{3,}[^a-z]{8,}")

_OUTCOME = re.compile(
    r"\b(?:has|have|had) been (?:\w+ly )?(?:[a-z]+ed|paid|sent|built|made|done|set|put|"
    r"taken|given|run|written)\b|\bchanged from\b|\b(?:tests?|checks?|build) (?:now )?"
    r"(?:pass(?:es|ed)?|fail(?:s|ed)?)\b|^your [\w -]{1,30}? (?:is|are) \S|"
    r"\byou (?:have )?(?:saved|paid|received|been (?:charged|refunded))\b|"
    r"\b(?:is|are) (?:present|located|defined) in\b|"
    r"\b(?:is|are) now (?:scheduled|booked|set|confirmed) (?:for|on|to|at)\b|"
    r"\b(?:was|were) (?:successfully |fully )?(?:processed|issued|refunded|credited|"
    r"cancell?ed|canceled|booked|confirmed|charged|applied|rebooked|upgraded|downgraded)\b|"
    r"^you(?:'re| are|'ve been| have been)\s+(?:now\s+|all\s+|successfully\s+)?(?:booked|"
    r"confirmed|registered|enrolled|scheduled|checked in|upgraded|downgraded|rebooked|"
    r"refunded|charged|signed up|subscribed|all set)\b",
    re.I,
)

# Small talk that looks like a plan or a wish: "We should plan a dance session soon!",
# "Can't wait to see it", "I'd love to go again sometime", "Wishing you the best".
_VAGUE_PLAN = re.compile(
    r"^(?:so\s+|maybe\s+|hopefully\s+|definitely\s+)?(?:(?:we|you and (?:I|me))\s+"
    r"(?:(?:really|definitely|totally)\s+)?(?:should|shall|could|can|gotta|have to|need to|"
    r"must|ought to|(?:will|'ll) have to)|let's|let us)\b"
    r"|^(?:(?:I|we)\s+)?can(?:'t|not) wait\b"
    r"|^(?:I|we)(?:'d| would)\s+love to\b.*\b(?:sometime|some time|soon|someday|one day|"
    r"again|together)\b",
    re.I,
)
_WISH = re.compile(
    r"^(?:(?:I|we)\s+)?(?:hope|wish(?:ing)?)\s+(?:you|your|u)\b|^(?:good|best of) luck\b|"
    r"^fingers crossed\b|^(?:have|enjoy)\s+(?:a|an|the|your)\b.*\b(?:time|day|weekend|"
    r"trip|evening|night|fun|holiday|vacation)\b|^take care\b|^happy \w*day\b|^cheers\b|"
    r"^(?:it's|it has|it is) been (?:a (?:long )?(?:time|while)|ages|forever)(?: since we\b[^,;]*)?"
    r"[.!]*$|^long time no (?:see|talk|chat)\b|^(?:it's |it has |I've )?been (?:a (?:few|couple "
    r"of) (?:days|weeks)|a while|ages|forever|too long|so long|a long time) since (?:we|I)\b|"
    r"^(?:I'll|I will|will) keep (?:you|ya|u) (?:posted|updated)\b",
    re.I,
)
# What makes a plan more than talk: a number, a day, a time, a named thing.
_CONCRETE = re.compile(
    r"\d|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(?:january|february|march|april|"
    r"may|june|july|august|september|october|november|december|tomorrow|tonight)\b|"
    r"\b(?:next|this) (?:week|weekend|month|year)\b",
    re.I,
)
_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b[A-Z][a-z]+\b")


def is_small_talk(sentence: str, names: Iterable[str] = ()) -> bool:
    """A wish, or a plan without content: what is said to be friendly, not to be remembered
    ("We should plan a dance session soon!", "Can't wait!", "Best of luck"). A plan with a
    day, a number or a named thing ("We should meet at Blue Bottle on Friday") is not."""
    text = sentence.strip()
    if _WISH.search(text):
        return True
    if not _VAGUE_PLAN.search(text):
        return False
    known = set(names) | {"I"}
    named = [word for word in _NAME.findall(text) if word not in known]
    return not (_CONCRETE.search(text) or named)


def is_code(sentence: str) -> bool:
    """A line of code, a shell prompt, a stack trace or raw JSON, not prose."""
    stripped = sentence.strip()
    if not stripped:
        return False
    if stripped[0] in "{[" and stripped[-1] in "}]":
        return True
    if _CODE_LINE.match(stripped):
        return True
    letters = sum(ch.isalpha() for ch in stripped)
    return len(_SYMBOLS.findall(stripped)) * 6 > max(letters, 1)


def is_instruction(sentence: str) -> bool:
    """Said to make the listener act, or a framework's standing order to its agent."""
    text = sentence.strip().strip("*_ ")
    if _SHOUTING.match(text) or _ADDRESSED.search(text) or _PLEASE.search(text):
        return True
    if _COMMAND.match(text):
        return True
    conditional = _CONDITIONAL_COMMAND.match(text)
    return bool(conditional and _COMMAND.match(text[conditional.end() :]))


def is_narration(sentence: str) -> bool:
    """The agent telling its next step or introducing a list ("Let's open fields.py")."""
    return bool(_NARRATION.search(sentence.strip()))


def is_lead_in(sentence: str) -> bool:
    """A sentence that introduces what follows ("Here's the issue text:")."""
    return bool(_LEAD_IN.search(sentence.strip()))


#: A decision said in the first person: "we decided", "let's go with".
DECISION = re.compile(
    r"\b(?:I|we)(?:'ve| have)?\s+(?:finally\s+)?(?:decided|chosen|chose|agreed|settled on|picked|"
    r"opted|committed|switched)\b|\blet's\s+(?:go with|use|stick with|switch to|pick|keep)\b|"
    r"\bwe(?:'ll| will| are going to|'re going to)\s+(?:use|go with|stick with|switch to|adopt)\b|"
    r"\b(?:the )?decision (?:is|was)\b|\bgoing (?:forward|ahead) with\b",
    re.I,
)
#: A preference said in the first person: "I prefer", "I'd rather", "my favourite".
PREFERENCE = re.compile(
    r"\b(?:I|we)\s+(?:really\s+|also\s+|absolutely\s+|usually\s+|always\s+|generally\s+|"
    r"do(?:n't| not)\s+|still\s+)?(?:like|love|prefer|enjoy|hate|dislike|adore|"
    r"can(?:'t|not) stand|avoid|am (?:a (?:big |huge )?)?fan of|am into|am allergic to|"
    r"am (?:a )?(?:vegetarian|vegan))\b|\b(?:my|our)\s+fav(?:ou?rite)\b|"
    r"\bI(?:'d| would)\s+rather\b|\b(?:always|never)\s+(?:use|do|call|write|send|book|put)\b",
    re.I,
)


def is_outcome(sentence: str) -> bool:
    """What came of the work: something booked, changed, fixed, passed, refunded."""
    return bool(_OUTCOME.search(sentence))


def identifier_user(text: str) -> str:
    """``text`` with "the user is tidewater_ci" (an account, not the person) said as such."""
    return re.sub(
        r"\b([Tt])he user (is|=) (?=[a-z0-9_.-]*[_\d][a-z0-9_.-]*\b)", r"\1he user name \2 ", text
    )
