"""The extractive flush: durable facts for the daily log (explicit "remember" requests,
preferences, decisions, named values, specific first-person statements, the records tools
returned, the assistant's recommendations), rewritten in the third person and checked
against the reference memory."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from harnessmem.backends.extractive._advice import asks_for_advice, recommendations
from harnessmem.backends.extractive._filters import (
    DECISION,
    FENCE,
    PREFERENCE,
    identifier_user,
    is_code,
    is_instruction,
    is_lead_in,
    is_narration,
    is_outcome,
    is_small_talk,
)
from harnessmem.backends.extractive._listing import take_listings
from harnessmem.backends.extractive._person import rewrite_person, third_person, with_subject
from harnessmem.backends.extractive._replacement import replaces
from harnessmem.backends.extractive._text import (
    CHITCHAT,
    TermSets,
    clip,
    is_question,
    normalise,
    sentence_case,
    split_sentences,
    strip_bullet,
    strip_markdown,
    term_set,
    terms,
)
from harnessmem.backends.extractive._turns import Turn
from harnessmem.prompts import strip_markers

# An explicit request, said as an imperative: "Please remember that ...", "Note: ...",
# "Can you keep in mind ..."; not "I don't remember ..." nor "I remember when ...".
_REMEMBER = re.compile(
    r"^(?:(?:please|also|and|oh|ok|okay|so|just|btw|by the way|one more thing)[,\s]+)*"
    r"(?:(?:can|could|will|would) you\s+)?(?:please\s+)?"
    r"(?:remember|don't forget|do not forget|note down|make a note(?: of)?|note(?=\s*:)|"
    r"keep in mind|for future reference|for the record|save (?:this|that))\b[,:]?\s*"
    r"(?:that\s+)?(?P<fact>.+)",
    re.I,
)
_VALUE = re.compile(
    r"\b(?:my|our|the)\s+(?P<key>[a-z][\w'-]*(?:\s+[a-z][\w'-]*){0,3}?)\s+(?:is|are|was|=)\s+"
    r"(?P<value>\S.*)",
    re.I,
)
_NAMING = re.compile(r"\b(?:call me|my name is|my name's|I'm called|I am called)\s+[A-Z]\w+")
_FIRST_PERSON = re.compile(
    r"\b(?:I|I'm|I've|I'd|I'll|my|me|mine|myself|we|we're|we've|our)\b", re.I
)
_SECOND_PERSON = re.compile(r"\b(?:you|your|you're|you've|yours|u)\b", re.I)
_HEDGE = re.compile(
    r"^(?:and |but |so |well,? |oh,? |yeah,? |wow,? )*(?:I (?:think|guess|believe|feel like|"
    r"mean|hope|bet|know|agree|see|understand|wonder)|I'm (?:sure|glad|happy|so happy))\b"
    r",?\s*(?:that\s+)?",
    re.I,
)
# Interjections and a name in the vocative at the start carry nothing: "Hey Caroline, ...",
# "Of course, first I ...", "No, I don't want ..." (the clause says the no).
_OPENER = re.compile(
    r"^(?:(?:(?:hey|hi|hello|yeah|yes|yep|oh|wow|well|so|and|but|by the way|btw|also|anyway|"
    r"anyways|haha|lol|ok|okay|thanks|thank you|absolutely|totally|sure|right|aww|ah|"
    r"alright|of course|actually|honestly|for example|for instance|note(?: however)? that|"
    r"woah|whoa|hmm+|sure thing|got it|gotcha|understood|noted|you're right|you are right|"
    r"true|indeed|exactly)"
    r"(?:\s+(?-i:(?!(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day)[A-Z][a-z]+)\s*[,!.]+|\s*[,!.]*)"
    r"|no\s*,)\s+)+",
    re.I,
)
# A topic announced before the sentence: "Now the release: we ship v0.9.0 on Thursday".
_TOPIC = re.compile(
    r"^now,?\s+(?:(?:for|about|on)\s+)?(?:the|our|my)\s+[\w .-]{1,30}?:\s+(?=[a-z])", re.I
)
# Who is spoken to, at the start: "Companion, today I ...", "Jon, I ...".
_VOCATIVE = re.compile(
    r"^(?:(?:my|dear|ai|sweet)\s+)?(?:companion|friend|buddy|dear|pal|mate|bro|dude|guys|"
    r"everyone|folks|assistant)\s*,\s+",
    re.I,
)


# Requests and wishes aimed at the listener, not statements.
_IMPERATIVE = re.compile(
    r"^(?:take|look|check|see|let's|tell|guess|imagine|keep|hang|have|enjoy|stay|thank|"
    r"congrats|congratulations|good luck)\b",
    re.I,
)
_HYPOTHETICAL = re.compile(r"^(?:if|maybe|perhaps|would|could|should|what if)\b", re.I)
_ACTION_DONE = re.compile(
    r"\b(?:I've|I have|I)\s+(?:booked|scheduled|created|reserved|cancell?ed|canceled|updated|"
    r"changed|ordered|sent|set up|installed|deployed|fixed|renamed|deleted|moved|saved|found)\b",
    re.I,
)
#: What cannot be done, and why: "Reservations UDMOP1 and XAZ3C0 cannot be cancelled as they
#: are basic economy without insurance".
_REFUSED = re.compile(
    r"\b(?:cannot|can't|can not|unable to|not able to)\s+(?:be\s+)?(?:cancell?ed|canceled|cancel|"
    r"changed|change|modif\w+|refunded|refund|upgraded|upgrade|downgraded|downgrade)\b"
    r".*\b(?:as|because|due to|since)\b",
    re.I,
)


@dataclass(frozen=True)
class Fact:
    """A candidate fact: its text, why it was taken, how strongly, and where it was said."""

    text: str
    kind: str
    score: float
    position: int


def _specificity(sentence: str) -> float:
    proper = len(re.findall(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+", sentence))
    digits = 1 if re.search(r"\d", sentence) else 0
    return min(proper, 3) * 0.4 + digits * 0.6


def _durable(sentence: str, found: frozenset[str]) -> bool:
    """A first-person statement with some content ("I'm off to go swimming with the kids")."""
    return len(found - CHITCHAT) >= 2 and bool(_FIRST_PERSON.search(sentence))


def _claim(sentence: str, found: frozenset[str]) -> bool:
    """A statement about the world, not addressed to the listener ("The API returns 500")."""
    return len(found - CHITCHAT) >= 4 and not _SECOND_PERSON.search(sentence)


# "Refund: $6,594 has been processed": a label before an amount said as a noun phrase.
_LABELLED_AMOUNT = re.compile(
    r"^(?P<label>refund|payment|charge|credit|fee|deposit|compensation|voucher):\s+"
    r"(?P<amount>[$\u20ac\u00a3]\s?\d[\d,.]*|\d[\d,.]*\s?(?:USD|EUR|GBP))\s+(?=(?:has|have|was|were|is|will)\b)",
    re.I,
)


# A label before what the assistant reports: "Note: your refund ...", "Update: ...".
_NOTE = re.compile(r"^(?:note|update|fyi|important|done|confirmed|success)\s*:\s*(?=\S)", re.I)


def _assistant_candidate(sentence: str, subject: str, listener: str, position: int) -> Fact | None:
    """From the assistant's side, only what was decided, done or found counts (the
    concrete things it recommended are read before, by :mod:`._advice`). Its "you" is the
    user: "Your reservation ID is HATHAT" -> "The user's reservation ID is HATHAT"."""
    sentence = _NOTE.sub("", sentence)
    outcome = is_outcome(sentence)
    if not outcome and (is_instruction(sentence) or is_narration(sentence)):
        return None
    value = _VALUE.search(sentence)
    done = DECISION.search(sentence) or _ACTION_DONE.search(sentence) or _REFUSED.search(sentence)
    if outcome or done:
        kind = "outcome" if outcome else "decision"
    elif value and re.search(r"\d", value.group("value")) and not is_narration(sentence):
        kind = "value"
    else:
        return None
    labelled = _LABELLED_AMOUNT.match(sentence)
    if labelled:
        said = f"A {labelled.group('label').lower()} of {labelled.group('amount')} "
        sentence = said + sentence[labelled.end() :]
    text = sentence_case(identifier_user(rewrite_person(normalise(sentence), subject, listener)))
    return Fact(text, kind, 3.0 + _specificity(sentence), position)


# A claim (no first person) about something named only by a pronoun ("At first, he was
# melancholic"), or a rule of thumb ("When editing files, it is easy to ..."), or a guess.
_LOOSE_CLAIM = re.compile(
    r"^(?:[\w ]{0,20},\s*)?(?:he|she|it|they|this|that|these|those|there)\b|^(?:when|once)\b|"
    r"\b(?:might|may|could|would|should)\b",
    re.I,
)
_BRACKETED = re.compile(r"\s*\[[^\]]*\]")


def _candidate(
    sentence: str,
    turn: Turn,
    position: int,
    *,
    listener: str = "the user",
    others: frozenset[str] = frozenset(),
) -> Fact | None:
    """The fact a sentence of ``turn`` gives, or None. ``listener``: who the assistant's
    "you" is; ``others``: the names of the conversation's other speakers (a vocative)."""
    sentence = _OPENER.sub("", normalise(strip_markdown(sentence))).strip(" -\u2013\u2014")
    sentence = _TOPIC.sub("", _OPENER.sub("", _vocative(sentence, others)))
    if len(sentence) < 12 or is_question(sentence) or _HYPOTHETICAL.match(sentence):
        return None
    if is_code(sentence):
        return None
    if is_lead_in(sentence):
        if not is_outcome(sentence):
            return None
        # "Your reservation has been updated with the new flights:" reports a change.
        sentence = sentence.rstrip().rstrip(":").rstrip() + "."
    subject = turn.name or ("the user" if turn.role == "user" else "the assistant")
    if turn.role == "assistant":
        return _assistant_candidate(sentence, subject, listener, position)
    group = turn.name is not None  # a named speaker of a group chat: "we" is not the agent's
    remember = _REMEMBER.search(sentence)
    if remember:
        # "remember that we target 3.11 and that we use uv": the second "that" goes too.
        body = re.sub(r"\band that\s+", "and ", remember.group("fact").strip())
        if len(terms(body)) >= 2 and not is_instruction(body):
            text = sentence_case(identifier_user(third_person(body, subject, group=group)))
            return Fact(text, "remember", 5.0, position)
    if is_instruction(sentence):
        return None
    # "Lost my job yesterday": the speaker is the subject a chat leaves out.
    sentence = with_subject(sentence)
    hedge = _HEDGE.match(sentence)
    core = sentence[hedge.end() :] if hedge else sentence
    if hedge and not _FIRST_PERSON.search(core):
        return None  # "I think you'd be great": about the other person, not a fact
    if is_small_talk(core, others | {subject}):
        return None
    # What a sentence says is judged without the photo it shares ("[shares a photo: ...]").
    found = term_set(_BRACKETED.sub("", core))
    if _IMPERATIVE.match(core):
        return None
    kind, score = "", 0.0
    if PREFERENCE.search(core) and found - CHITCHAT:
        kind, score = "preference", 3.0
    elif len(found - CHITCHAT) < 2:
        return None
    elif DECISION.search(core):
        kind, score = "decision", 3.0
    elif _NAMING.search(core) or (_VALUE.search(core) and _FIRST_PERSON.search(core)):
        kind, score = "value", 3.0
    elif _durable(core, found):
        if re.match(r"(?:those|these)\b", core, re.I):
            return None
        kind, score = "statement", 1.0 + min(1.0, len(found - CHITCHAT) / 8)
    elif _claim(core, found) and not _LOOSE_CLAIM.search(core):
        kind, score = "claim", 0.75 + min(1.0, len(found - CHITCHAT) / 8)
    if not kind:
        return None
    if kind in {"statement", "claim"} and _SECOND_PERSON.search(core):
        return None  # "I'm so proud of you": about the listener
    partner = next(iter(others)) if group and len(others) == 1 else None
    text = third_person(clip(core, 400), subject, group=group, partner=partner)
    return Fact(sentence_case(identifier_user(text)), kind, score + _specificity(core), position)


_VOCATIVE_END = re.compile(
    r",\s*(?:my\s+)?(?:dear\s+|ai\s+)?(?:companion|friend|buddy|pal|mate)\s*(?P<stop>[.!?]*)$",
    re.I,
)


_NAME_END = re.compile(r",\s*(?P<name>[A-Z][a-z]+)\s*(?P<stop>[.!?]*)$")


def _vocative(sentence: str, names: frozenset[str]) -> str:
    """``sentence`` without the listener named at its start ("Companion, ...", "Jon, ...")."""
    found = _VOCATIVE.match(sentence)
    if found:
        return sentence[found.end() :]
    head, comma, rest = sentence.partition(", ")
    if comma and head in names and rest:
        return rest
    end = _VOCATIVE_END.search(sentence)
    if end:
        return sentence[: end.start()] + end.group("stop")
    # At the end too: "I won't give up, Gina."
    end = _NAME_END.search(sentence) if names else None
    if end and end.group("name") in names:
        return sentence[: end.start()] + end.group("stop")
    return sentence


_SUBJECT_TERMS: Final = frozenset({"user", "assistant"})
#: Identifier fields of a tool's JSON record a fact names it by (at most this many).
_RECORD_FIELDS: Final = 3
#: Below what is said: a record fact fills a place no statement of the talk wanted.
_RECORD_SCORE: Final = 1.35


#: A string field of a JSON record that says which record it is: ``"reservation_id": "4WQ150"``,
#: ``"first_name": "Mia"``. Read from the text, so that a result cut to its head and tail in
#: the flush request still gives them.
_ID_FIELD = re.compile(
    r'"(?P<key>id|name|\w+_id|first_name|last_name)"\s*:\s*"(?P<value>[^"\\\n]{1,80})"'
)


def _identifiers(text: str) -> list[str]:
    """``name Mia Li``, ``reservation_id 4WQ150``: the fields that say which record a tool
    returned (a first and last name joined), names first, at most ``_RECORD_FIELDS``."""
    fields: dict[str, str] = {}
    for match in _ID_FIELD.finditer(text):
        fields.setdefault(match.group("key"), match.group("value").strip())
    person = " ".join(fields.pop(k) for k in ("first_name", "last_name") if k in fields)
    if person:
        fields["name"] = person
    ordered = sorted(fields.items(), key=lambda item: (item[0] != "name", item[0] == "id"))
    return [f"{key} {value}" for key, value in ordered if value][:_RECORD_FIELDS]


def _record_fact(turn: Turn, call: tuple[str, str] | None, position: int) -> Fact | None:
    """A tool's JSON record, by the identifiers it returned that its call did not give
    ("get_user_details for user_id mia_li_3668 returned name Mia Li"): otherwise the
    extractive flush keeps nothing of what tools return, and a name or an id only a tool
    said is lost."""
    lines = turn.text.strip().splitlines()
    if not lines or not lines[0].startswith("{"):
        return None
    if any(line.lstrip().startswith("{") for line in lines[1:]):
        return None  # JSON Lines (logs, a listing): many records, none of them *the* one
    arguments: Any = {}
    if call is not None and call[1].strip():
        try:
            arguments = json.loads(call[1])
        except ValueError:
            arguments = {}
    given = {
        f"{k} {v}"
        for k, v in (arguments.items() if isinstance(arguments, Mapping) else ())
        if isinstance(v, str) and 0 < len(v) <= 80
    }
    named = [field for field in _identifiers(turn.text) if field not in given]
    if not named:
        return None
    tool = turn.name or (call[0] if call else "a tool")
    asked = f" for {', '.join(sorted(given))}" if given else ""
    text = f"{tool}{asked} returned {', '.join(named)}."
    return Fact(text, "record", _RECORD_SCORE, position)


#: A concrete recommendation ranks below what the user said they want or decided (3 and
#: up), above a plain statement of theirs.
_ADVICE_SCORE: Final = 2.5


def _advice_of(
    turn: Turn, sentences: Sequence[str], asked: bool, listener: str = "the user"
) -> list[str | None]:
    """The recommendation fact of each sentence of an assistant turn (None for the others
    and for every sentence of a user's turn: what a user tells the agent to do is an
    instruction, not advice). ``asked``: the user's turn before asked for recommendations."""
    if turn.role != "assistant":
        return [None] * len(sentences)
    return recommendations(
        [_OPENER.sub("", normalise(strip_markdown(s))).strip() for s in sentences],
        turn.name or "the assistant",
        listener,
        asked=asked,
    )


def _without_listings(text: str, listener: str, position: int) -> tuple[str, list[Fact]]:
    """The records ``text`` lists as facts (one each: the lead-in and its fields), numbered
    from ``position``, and ``text`` without what of their lead-ins they took in. The
    list's own lines stay: a field that is a sentence ("Refund: $6,594 has been processed")
    is still a fact of its own."""
    listings = take_listings(text, listener)
    if not listings:
        return text, []
    lines = text.splitlines()
    records = []
    for number, listing in enumerate(listings, start=position + 1):
        records.append(Fact(listing.text, "listing", _LISTING_SCORE, number))
        lines[listing.line] = listing.rest
    return "\n".join(lines), records


#: A listed record ranks with what the assistant reported done.
_LISTING_SCORE: Final = 3.5


def extract_facts(
    turns: Sequence[Turn],
    reference: str,
    *,
    max_facts: int,
    threshold: float,
    min_score: float = 1.3,
) -> list[str]:
    """New durable facts of ``turns``, in conversation order; none that ``reference`` has."""
    # Who a fact is about is no part of what it says: "the user" in two facts does not
    # make them the same.
    subjects = _SUBJECT_TERMS.union(*(term_set(t.name or "") for t in turns))
    known_lines = [strip_bullet(line) for line in reference.splitlines() if line.strip()]
    known = [term_set(line) - subjects for line in known_lines]
    candidates: list[Fact] = []
    position = 0
    calls: list[tuple[str, str]] = []
    asked = False  # the last user turn asked for recommendations
    names = frozenset(t.name for t in turns if t.name)
    listener = "the user"  # who the assistant's "you" is: the last user who spoke
    for turn in turns:
        calls.extend(turn.calls)
        if turn.role == "tool":
            position += 1
            call = next((c for c in reversed(calls) if c[0] == turn.name), None)
            record = _record_fact(turn, call, position)
            if record is not None and record.score >= min_score:
                candidates.append(record)
            continue
        if turn.role not in {"user", "assistant"}:
            continue
        # The harness's notes about what it cut ("[harnessmem: … left out …]") are no
        # part of what was said.
        # Nor is code: a fenced block goes whole.
        text = FENCE.sub("", strip_markers(turn.text))
        if turn.role == "user":
            listener = turn.name or "the user"
        elif not asked:
            text, records = _without_listings(text, listener, position)
            position += len(records)
            candidates.extend(records)
        sentences = split_sentences(text)
        advice = _advice_of(turn, sentences, asked, listener)
        asked = turn.role == "user" and asks_for_advice(turn.text)
        for sentence, recommended in zip(sentences, advice, strict=True):
            position += 1
            if recommended is not None:
                fact: Fact | None = Fact(recommended, "advice", _ADVICE_SCORE, position)
            else:
                others = names - {turn.name} if turn.name else names
                fact = _candidate(
                    sentence, turn, position, listener=listener, others=frozenset(others)
                )
            if fact is not None and fact.score >= min_score:
                candidates.append(fact)
    on_file = TermSets[str](threshold)
    for terms_of_line, line in zip(known, known_lines, strict=True):
        on_file.add(terms_of_line, line)
    chosen: list[Fact] = []
    taken = TermSets[Fact](threshold)
    listed = TermSets[Fact](threshold)
    for fact in sorted(candidates, key=lambda f: (-f.score, f.position)):
        if len(chosen) >= max_facts:
            break
        found = term_set(fact.text) - subjects
        if any(not replaces(fact.text, line) for line in on_file.near(found)):
            continue  # on file already (a fact that replaces one on file is news)
        # A listing's fields are news beside the sentence that led into them: listings are
        # checked against listings only.
        seen = listed if fact.kind == "listing" else taken
        if next(seen.near(found), None) is not None:
            continue
        chosen.append(fact)
        seen.add(found, fact)
    return [fact.text for fact in sorted(chosen, key=lambda fact: fact.position)]
