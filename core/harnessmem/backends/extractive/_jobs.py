"""The three jobs of the extractive backend, done with classical methods.

- :func:`summarise`: the four-section compaction summary (intent from the user turns,
  salient sentences ranked by TF-IDF term weight with a redundancy check, artifacts pulled
  by pattern from tool calls, tool results and text, next steps from the last turns).
- :func:`extract_facts`: durable facts for the daily log (explicit "remember" requests,
  preferences, decisions, named values, specific first-person statements), rewritten in the
  third person and checked against the reference memory.
- :func:`consolidate`: MEMORY.md from the current file and new log entries: near-duplicate
  bullets merged, a newer value of the same key replacing the older, trimmed to the token
  budget keeping recent and repeated facts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
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
from harnessmem.backends.extractive._person import rewrite_person, third_person, with_subject
from harnessmem.backends.extractive._replacement import replaces
from harnessmem.backends.extractive._text import (
    CHITCHAT,
    MARKDOWN_HEADING,
    TermSets,
    TermWeights,
    clip,
    find_artifacts,
    is_question,
    jaccard,
    near_duplicate,
    normalise,
    sentence_case,
    split_sentences,
    strip_bullet,
    strip_markdown,
    term_set,
    terms,
)
from harnessmem.prompts import strip_markers

Message = Mapping[str, Any]
SECTIONS: Final = ("SESSION INTENT", "SUMMARY", "ARTIFACTS", "NEXT STEPS")

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
_FUTURE = re.compile(
    r"\b(?:I'll|I will|we'll|we will|next,? I|next step|then I|I'm going to|going to|plan to|"
    r"need to|needs to|still have to|remaining|todo|to do|let me|follow up|pending|"
    r"waiting for|will now)\b",
    re.I,
)
_REQUEST = re.compile(
    r"\b(?:please|can you|could you|would you|make sure|I want|I need|I'd like|help me)\b", re.I
)


@dataclass
class Turn:
    """One message of the conversation, as the jobs see it."""

    role: str
    text: str
    name: str | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)

    @property
    def speaker(self) -> str:
        if self.name:
            return self.name
        return {"user": "User", "assistant": "Assistant", "tool": "Tool"}.get(self.role, self.role)


def turns_of(messages: Iterable[Message]) -> list[Turn]:
    """OpenAI-style messages as turns (system messages and compaction summaries dropped)."""
    found = []
    for message in messages:
        role = str(message.get("role") or "")
        if role in {"system", "developer"} or message.get("name") == "__compaction_summary__":
            continue
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        if isinstance(content, list):
            text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            arguments = function.get("arguments")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, default=str)
            calls.append((str(function.get("name") or "?"), arguments))
        name = message.get("name")
        found.append(Turn(role, text.strip(), name if isinstance(name, str) else None, calls))
    return found


# -- summary ------------------------------------------------------------------------------------


def parse_sections(summary: str) -> dict[str, list[str]]:
    """The four sections of a previous summary, as lists of lines ("None" left out)."""
    sections: dict[str, list[str]] = {name: [] for name in SECTIONS}
    current: str | None = None
    for line in summary.splitlines():
        heading = MARKDOWN_HEADING.match(line)
        if heading:
            title = heading.group(2).strip().upper()
            current = title if title in sections else None
            continue
        stripped = line.strip()
        if current and stripped and stripped.lower().strip(".") != "none":
            sections[current].append(stripped)
    return sections


def _intent(turns: Sequence[Turn], previous: list[str]) -> list[str]:
    asks = [t for t in turns if t.role == "user" and len(terms(t.text)) >= 2]

    def gist(turn: Turn) -> str:
        sentences = [s for s in split_sentences(turn.text) if len(terms(s)) >= 2]
        return clip(" ".join(sentences[:2]), 300)

    lines = [line for line in previous if not line.startswith("Latest request:")]
    if not lines and asks:
        lines.append(gist(asks[0]))
    if asks and (previous or asks[-1] is not asks[0]):
        lines.append("Latest request: " + gist(asks[-1]))
    return lines


def _salient(turns: Sequence[Turn], limit: int) -> list[str]:
    documents = [terms(t.text) for t in turns]
    weights = TermWeights(documents)
    candidates: list[tuple[float, int, str, frozenset[str]]] = []
    position = 0
    for turn in turns:
        if turn.role not in {"user", "assistant"}:
            continue
        for sentence in split_sentences(turn.text):
            position += 1
            found = term_set(sentence)
            # Four words that are not numbers: list fragments ("Cabin: Economy ($112)")
            # and small talk are not what a summary is for.
            if len({t for t in found - CHITCHAT if t.isalpha()}) < 4:
                continue
            if turn.role == "assistant" and is_question(sentence):
                continue
            score = weights.score(found) * (1.2 if turn.role == "user" else 1.0)
            if DECISION.search(sentence) or PREFERENCE.search(sentence):
                score *= 1.3
            if re.search(r"\d|\b[A-Z][a-z]+\b.*\b[A-Z][a-z]+\b", sentence[1:]):
                score *= 1.1
            line = f"{turn.speaker}: {clip(sentence, 280)}"
            candidates.append((score, position, line, found))
    chosen: list[tuple[int, str, frozenset[str]]] = []
    for _score, position, line, found in sorted(candidates, key=lambda c: (-c[0], c[1])):
        if len(chosen) >= limit:
            break
        if all(jaccard(found, other) < 0.5 for _, _, other in chosen):
            chosen.append((position, line, found))
    return [line for _, line, _ in sorted(chosen)]


def _flatten(value: Any, key: str = "", depth: int = 0) -> Iterable[tuple[str, Any]]:
    if isinstance(value, Mapping) and depth < 3:
        for sub, item in value.items():
            yield from _flatten(item, f"{key}.{sub}" if key else str(sub), depth + 1)
    elif isinstance(value, list) and depth < 3:
        for item in value[:10]:
            yield from _flatten(item, key, depth + 1)
    else:
        yield key, value


def _artifacts(turns: Sequence[Turn]) -> list[tuple[str, str]]:
    """``(value, line)`` pairs: what was operated on first, then what was named in the talk,
    then what came back from tools (at most five per result)."""
    found: list[tuple[str, str]] = []
    for turn in turns:
        for name, arguments in turn.calls:
            try:
                parsed = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                parsed = arguments
            for key, value in _flatten(parsed):
                if isinstance(value, bool) or value is None:
                    continue
                text = str(value).strip()
                if not text:
                    continue
                if isinstance(value, int | float) or (len(text) <= 80 and "\n" not in text):
                    shown = f"{key}={text}" if key else text
                    found.append((text, f"{shown} ({name} argument)"))
                else:
                    for kind, item in find_artifacts(text)[:8]:
                        found.append((item, f"{item} ({kind} in {name} arguments)"))
    for turn in turns:
        if turn.role in {"user", "assistant"}:
            for kind, item in find_artifacts(turn.text)[:8]:
                if kind != "money":
                    found.append((item, f"{item} ({kind}, mentioned by {turn.speaker})"))
    for turn in turns:
        if turn.role == "tool":
            source = f"{turn.name} result" if turn.name else "tool result"
            for kind, item in find_artifacts(turn.text)[:5]:
                found.append((item, f"{item} ({kind}, {source})"))
    return found


def _next_steps(turns: Sequence[Turn]) -> list[str]:
    talk = [t for t in turns if t.role in {"user", "assistant"} and t.text]
    steps: list[str] = []
    if talk and talk[-1].role == "user":
        steps.append(f"Answer {talk[-1].speaker}'s latest message: {clip(talk[-1].text, 240)}")
    for turn in talk[-4:]:
        for sentence in split_sentences(turn.text):
            if turn.role == "assistant" and _FUTURE.search(sentence) and not is_question(sentence):
                steps.append(f"{turn.speaker}: {clip(sentence, 240)}")
            elif turn.role == "user" and turn is not talk[-1] and _REQUEST.search(sentence):
                steps.append(f"{turn.speaker} asked: {clip(sentence, 240)}")
    unique: list[str] = []
    for step in steps:
        if all(jaccard(term_set(step), term_set(other)) < 0.7 for other in unique):
            unique.append(step)
    return unique[:6]


def summarise(
    turns: Sequence[Turn],
    previous: str | None,
    *,
    max_sentences: int,
    max_artifacts: int,
) -> str:
    """The four-section summary of ``turns``, merged with the ``previous`` summary if any."""
    old = parse_sections(previous) if previous else {name: [] for name in SECTIONS}
    intent = _intent(turns, old["SESSION INTENT"])

    new_points = _salient(turns, max_sentences)
    old_points = [strip_bullet(line) for line in old["SUMMARY"]]
    old_points = [
        p
        for p in old_points
        if not any(near_duplicate(term_set(p), term_set(n), 0.6) for n in new_points)
    ]
    points = [*old_points[-max_sentences:], *new_points]

    old_items = [strip_bullet(line) for line in old["ARTIFACTS"]]
    seen = {item.split(" (", 1)[0] for item in old_items}
    new_items: list[str] = []
    for value, line in _artifacts(turns):
        if value not in seen and len(new_items) < max_artifacts:
            seen.add(value)
            new_items.append(line)
    # Over the cap, the oldest of the previous summary's items give way.
    items = [*old_items[max(0, len(old_items) + len(new_items) - max_artifacts) :], *new_items]

    steps = _next_steps(turns) or [strip_bullet(line) for line in old["NEXT STEPS"]]

    def section(title: str, lines: Sequence[str], bullets: bool = True) -> str:
        if not lines:
            return f"## {title}\nNone"
        body = "\n".join(f"- {line}" if bullets else line for line in lines)
        return f"## {title}\n{body}"

    return "\n\n".join(
        [
            section("SESSION INTENT", intent, bullets=False),
            section("SUMMARY", points),
            section("ARTIFACTS", items),
            section("NEXT STEPS", steps),
        ]
    )


# -- flush --------------------------------------------------------------------------------------


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
        sentences = split_sentences(FENCE.sub("", strip_markers(turn.text)))
        if turn.role == "user":
            listener = turn.name or "the user"
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
    for fact in sorted(candidates, key=lambda f: (-f.score, f.position)):
        if len(chosen) >= max_facts:
            break
        found = term_set(fact.text) - subjects
        if any(not replaces(fact.text, line) for line in on_file.near(found)):
            continue  # on file already (a fact that replaces one on file is news)
        if next(taken.near(found), None) is not None:
            continue
        chosen.append(fact)
        taken.add(found, fact)
    return [fact.text for fact in sorted(chosen, key=lambda fact: fact.position)]
