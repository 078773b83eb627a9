"""Text primitives of the extractive backend: words, sentences, term weights, similarity,
artifacts, markdown, and verbs in the third person (who a fact is about: ``_person``).

Classical and deterministic: regular expressions, a stop-word list and counts. Nothing
here knows about the jobs (see ``_summary`` and ``_facts``).
"""

from __future__ import annotations

import itertools
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, Generic, TypeVar


# A compact English stop-word list: function words plus conversational filler, so that
# what is left is what a sentence is about.
def word_set(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS: Final = word_set(
    """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have
    haven't having he he'd he'll he's her here here's hers herself him himself his how how's i
    i'd i'll i'm i've if in into is isn't it it's its itself just let's me more most mustn't my
    myself no nor not now of off on once only or other ought our ours ourselves out over own
    same shan't she she'd she'll she's should shouldn't so some such than that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this
    those through to too under until up very was wasn't we we'd we'll we're we've were weren't
    what what's when when's where where's which while who who's whom why why's will with won't
    would wouldn't you you'd you'll you're you've your yours yourself yourselves yes yeah yep
    ok okay oh hey hi hello thanks thank please really well sure right like get got go going
    gonna wanna also still even much many lot lots thing things something anything everything
    one ones would could might may must shall im ive id ill dont cant wont isnt didnt doesnt
    """
)

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*", re.UNICODE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_SENTENCE_END = re.compile(
    r"(?<=[.!?\u3002\uff01\uff1f])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9\u4e00-\u9fff])"
)
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
_QUESTION = re.compile(r"\?[\s\"')\]]*$")


def is_question(sentence: str) -> bool:
    """Whether a sentence ends with a question mark (closing quotes and brackets aside)."""
    return _QUESTION.search(sentence) is not None


def normalise(text: str) -> str:
    """NFKC, straight quotes, single spaces."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    return " ".join(text.replace("\u201c", '"').replace("\u201d", '"').split())


def words(text: str) -> list[str]:
    """Lower-cased words; each CJK character counts as a word."""
    found: list[str] = []
    for token in _WORD.findall(normalise(text).casefold()):
        if _CJK.search(token):
            found.extend(ch for ch in token if not ch.isspace())
        else:
            found.append(token.replace("\u2019", "'"))
    return found


def stem(word: str) -> str:
    """A light suffix stripper (plural, -ing, -ed, -ly): enough to match word forms."""
    if len(word) <= 3 or not word.isalpha() or _CJK.match(word):
        return word
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("ly", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            base = word[: -len(suffix)] + keep
            if suffix in {"ing", "ed"} and len(base) > 3 and base[-1] == base[-2]:
                base = base[:-1]  # "planned" -> "plan", "swimming" -> "swim"
            return base
    return word


# Words that carry feeling or politeness rather than facts; a sentence made only of these
# and stop words is small talk.
CHITCHAT_WORDS: Final = word_set(
    """
    great awesome cool nice good glad happy love amazing wow wonderful fantastic lovely sweet
    sounds sound totally definitely absolutely exactly agree true thanks thank sorry hope
    hopefully welcome bye goodbye see soon take care catch later talk morning evening night
    fun interesting incredible beautiful proud congrats congratulations super gorgeous stunning
    appreciate means meant know think guess mean feel feeling feels glad excited impressive
    inspiring awesome yay haha lol bad shame care
    """
)


def _chitchat() -> frozenset[str]:
    return frozenset(stem(word) for word in CHITCHAT_WORDS) | CHITCHAT_WORDS


#: The stems of :data:`CHITCHAT_WORDS` (compare with :func:`terms`' output).
CHITCHAT: Final = _chitchat()


def terms(text: str) -> list[str]:
    """Stemmed content words: no stop words, no one-letter words (digits and CJK kept)."""
    found = []
    for word in words(text):
        if word in STOPWORDS:
            continue
        if len(word) == 1 and not (word.isdigit() or _CJK.match(word)):
            continue
        found.append(stem(word.strip("'")))
    return found


#: A Markdown heading: its hashes, then its words.
MARKDOWN_HEADING = re.compile(r"^\s*(#{1,6})\s+(.*?)\s*#*\s*$")


def term_set(text: str) -> frozenset[str]:
    """The distinct content terms of ``text``."""
    return frozenset(terms(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """Shared terms over all terms; 0 when both are empty."""
    union = len(a | b)
    return len(a & b) / union if union else 0.0


def containment(a: frozenset[str], b: frozenset[str]) -> float:
    """The share of ``a``'s terms that ``b`` also has; 0 when ``a`` is empty."""
    return len(a & b) / len(a) if a else 0.0


def near_duplicate(a: frozenset[str], b: frozenset[str], threshold: float) -> bool:
    """Whether two term sets say the same: Jaccard, or one nearly inside the other.

    Different numbers make different facts ("room 101" is not "room 102").
    """
    if a and b and _digits(a) != _digits(b):
        return False
    return _similar(a, b, threshold)


def _digits(terms: frozenset[str]) -> frozenset[str]:
    return frozenset(t for t in terms if any(c.isdigit() for c in t))


T = TypeVar("T")


class TermSets(Generic[T]):
    """Term sets, each with a value, that answer "which of you says the same as this?"
    without comparing it with every one: only sets that share a term with it can be its
    near duplicates (:func:`near_duplicate`), so each is looked up through its terms."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._sets: list[tuple[frozenset[str], frozenset[str], T]] = []
        self._by_term: dict[str, list[int]] = {}
        self._empty: list[int] = []

    def add(self, terms: frozenset[str], value: T) -> None:
        number = len(self._sets)
        self._sets.append((terms, _digits(terms), value))
        for term in terms:
            self._by_term.setdefault(term, []).append(number)
        if not terms:
            self._empty.append(number)

    def near(self, terms: frozenset[str]) -> Iterator[T]:
        """The values of the sets that are near duplicates of ``terms``, in the order added."""
        if not terms:
            numbers: Iterable[int] = self._empty
        elif self.threshold <= 0:  # then sets that share no term are near too
            numbers = range(len(self._sets))
        else:
            numbers = self._candidates(terms)
        digits = _digits(terms)
        for number in numbers:
            other, other_digits, value = self._sets[number]
            if other_digits == digits and _similar(terms, other, self.threshold):
                yield value

    def _candidates(self, terms: frozenset[str]) -> list[int]:
        """The sets that may be near duplicates of ``terms`` (not empty), in the order added.

        Each set's count of the probed terms it holds, plus the known terms left unprobed
        (it can share at most those besides), bounds the terms it shares with ``terms``: a
        set whose bound is below the fewest a near duplicate of its size must share is
        passed over (Jaccard ``t`` needs ``t (|a| + |b|) / (1 + t)`` shared, containment
        0.9 of the smaller set). As the facts grow, most sets sharing one rare term fall
        there, and are counted in C rather than compared one by one.
        """
        known = [term for term in terms if term in self._by_term]
        probe = self._probe_terms(known, len(terms))
        slack = len(known) - len(probe)
        shared = Counter(itertools.chain.from_iterable(self._by_term[term] for term in probe))
        size, threshold, sets = len(terms), self.threshold, self._sets
        kept = []
        for number, count in shared.items():
            other = len(sets[number][0])
            least = threshold * (size + other) / (1 + threshold)
            if min(size, other) >= 3:
                least = min(least, 0.9 * min(size, other))
            if count + slack >= least - 1e-9:
                kept.append(number)
        kept.sort()
        return kept

    def _probe_terms(self, known: list[str], size: int) -> list[str]:
        """The terms of ``known`` (those of a query of ``size`` terms that some set holds)
        whose sets must be looked at: all but the ``k - 1`` most common, where ``k`` is the
        fewest terms a near duplicate shares with the query (``threshold`` of them for
        Jaccard, 3 for containment). A set that shares ``k`` terms shares one of the rest,
        so none is missed, and the longest lists are skipped."""
        need = max(1, min(math.ceil(self.threshold * size - 1e-9), 3))
        if need <= 1 or len(known) < need:
            return known if len(known) >= need else []
        common_last = sorted(known, key=lambda term: len(self._by_term[term]))
        return common_last[: len(known) - (need - 1)]


def _similar(a: frozenset[str], b: frozenset[str], threshold: float) -> bool:
    if not a or not b:
        return a == b
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    return jaccard(a, b) >= threshold or (len(small) >= 3 and containment(small, large) >= 0.9)


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``: split at line breaks, bullets and sentence-ending punctuation."""
    found: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        for piece in _SENTENCE_END.split(line):
            piece = piece.strip()
            if piece:
                found.append(piece)
    return found


def strip_bullet(line: str) -> str:
    """A line without its list marker (``-``, ``*``, ``1.``, ``- [ ]``)."""
    return _BULLET.sub("", line).strip()


def is_bullet(line: str) -> bool:
    return bool(_BULLET.match(line))


class TermWeights:
    """TF-IDF weights over a set of documents (messages): frequent here, rare across."""

    def __init__(self, documents: Sequence[Iterable[str]]) -> None:
        self.count: Counter[str] = Counter()
        document_frequency: Counter[str] = Counter()
        for document in documents:
            seen = list(document)
            self.count.update(seen)
            document_frequency.update(set(seen))
        total = max(1, len(documents))
        self.weight = {
            term: (1.0 + math.log(self.count[term])) * math.log(1.0 + total / df)
            for term, df in document_frequency.items()
        }

    def score(self, sentence_terms: frozenset[str]) -> float:
        """Sum of the weights of the distinct terms, damped by length."""
        if not sentence_terms:
            return 0.0
        total = sum(self.weight.get(term, 0.0) for term in sentence_terms)
        return total / math.sqrt(len(sentence_terms) + 2.0)


# -- artifacts ----------------------------------------------------------------------------------

_EXTENSIONS = (
    "py|pyi|js|jsx|ts|tsx|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|csv|tsv|html|css|java|kt|"
    "go|rs|c|h|cc|cpp|hpp|cs|rb|php|sh|bash|sql|ipynb|lock|xml|log|pdf|png|jpg|jpeg|gif|svg|"
    "zip|tar|gz|parquet|db|sqlite|env|conf|dockerfile|tf"
)
_PATTERNS: Final = (
    ("url", re.compile(r"\bhttps?://[^\s<>\"'`)\]]+", re.I)),
    ("email", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("path", re.compile(r"(?<![\w/.:-])(?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]+(?![\w/])")),
    ("file", re.compile(rf"(?<![\w/.-])[\w-]+(?:\.[\w-]+)*\.(?:{_EXTENSIONS})\b", re.I)),
    (
        "uuid",
        re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
    ),
    ("id", re.compile(r"(?<![\w#])#?[A-Za-z]{1,6}[-_]?\d[\w-]{2,}\b|#\w*\d\w*")),
    ("hash", re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")),
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?Z?)?\b")),
    (
        "money",
        re.compile(r"(?:[$€£¥]\s?\d[\d,]*(?:\.\d+)?|\b\d[\d,]*(?:\.\d+)?\s?(?:USD|EUR|GBP)\b)"),
    ),
)
_TRAILING = ".,;:!?'\")]}>"


def find_artifacts(text: str) -> list[tuple[str, str]]:
    """``(kind, value)`` of every URL, e-mail, path, file name, id, hash, date and amount.

    In order of appearance; a value inside a longer one already found (a file name inside
    its path) is left out.
    """
    spans: list[tuple[int, int, str, str]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            value = match.group(0).rstrip(_TRAILING)
            if len(value) < 3 or (kind == "path" and "/" not in value.strip("/")):
                continue
            if kind == "path" and not re.search(r"[A-Za-z]", value):
                continue  # "1/2/3" is a fraction or a date, not a path
            start = match.start()
            end = start + len(value)
            if any(s <= start and end <= e for s, e, _, _ in spans):
                continue
            spans = [span for span in spans if not (start <= span[0] and span[1] <= end)]
            spans.append((start, end, kind, value))
    return [(kind, value) for _, _, kind, value in sorted(spans)]


# -- verbs in the third person ---------------------------------------------------------------------

_IRREGULAR = {"am": "is", "have": "has", "do": "does", "go": "goes", "was": "was", "'m": " is"}
_NOT_VERBS = word_set(
    """
    just really also still always never usually often sometimes recently finally actually
    definitely probably already even only too so then now currently mostly totally kind sort
    no not
    can could will would should might must may shall did was were had
    """
)
#: Past forms of irregular verbs (a verb in the past needs no third-person ending).
PAST_FORMS: Final = word_set(
    """
    went saw made had got took came gave bought told felt found thought met left ran began
    wrote read kept heard sent spent built lost won ate drove flew grew knew paid said sat stood
    taught understood wore chose fell forgot held led meant put set cut let hit quit brought
    caught did was were became drew sang swam threw woke rode broke spoke stole sold slept
    hurt cost spread shut beat bet burst split shook struck swept fed fled lent bent dealt
    hung lit fought sought bore tore froze hid bit rang sank shot shrank spun stuck swung
    wept wound forgave arose awoke dug slid
    """
)
#: Prefixes of verbs whose past is the plain verb's: "retook", "rebuilt", "overslept".
_VERB_PREFIXES: Final = ("re", "over", "under", "mis", "with", "out", "up", "fore")


def _past_form(lower: str) -> bool:
    """Whether ``lower`` is an irregular past form, prefixed or not ("retook")."""
    return lower in PAST_FORMS or any(
        lower.startswith(prefix) and lower[len(prefix) :] in PAST_FORMS for prefix in _VERB_PREFIXES
    )


def third_person_verb(verb: str) -> str:
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if lower in _NOT_VERBS or _past_form(lower) or not lower.isalpha():
        return verb
    if (lower.endswith("ed") and not lower.endswith("eed")) or (
        lower.endswith("s") and not lower.endswith("ss")
    ):
        return verb
    if lower.endswith(("ch", "sh", "ss", "x", "z", "o")):
        return verb + "es"
    if lower.endswith("y") and len(lower) > 2 and lower[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def sentence_case(text: str) -> str:
    """``text`` with a capital first letter and a final full stop (for an exclamation mark
    too: a fact is stated, not exclaimed)."""
    text = re.sub(r"\s*(?<!\?)!+[!1]*$", ".", text.strip())
    if not text:
        return text
    first = text.split(maxsplit=1)[0]
    if not re.search(r"[_\[(=/]", first):  # an identifier keeps its case
        text = text[:1].upper() + text[1:]
    return text if text[-1] in ".!?)\"'\u3002\uff01\uff1f" else text + "."


_MD_LINK = re.compile(r"!?\[(?P<text>[^\]\n]{1,200})\]\((?P<url>[^)\s]{1,500})\)")
_MD_EMPHASIS = (
    re.compile(r"\*\*(?=\S)(?P<text>[^\n]+?)(?<=\S)\*\*"),
    re.compile(r"(?<![\w*])\*(?=[^\s*])(?P<text>[^*\n]+?)(?<=[^\s*])\*(?![\w*])"),
    re.compile(r"(?<![\w])_(?=[^\s_])(?P<text>[^_\n]+?)(?<=[^\s_])_(?!\w)"),
    re.compile(r"(`+)(?P<text>[^`\n]+?)\1"),
    re.compile(r"~~(?P<text>[^~\n]+?)~~"),
)
_MD_MARKS = re.compile(r"[*_`\[#>~]")
_MD_LINE = re.compile(r"^\s*(?:#{1,6}\s+|>\s*)+", re.M)


def strip_markdown(text: str) -> str:
    """``text`` without markdown's marks: bold (``**``), italics, code spans, strike-through, links
    (their text, the address after it in brackets unless it is the text), images (their
    alternative text), headings and quote marks (list markers go with
    :func:`split_sentences`). Identifiers keep their underscores (``mia_li_3668``)."""

    def link(match: re.Match[str]) -> str:
        said, url = match.group("text"), match.group("url")
        if match.group(0).startswith("!") or url in said or not url.startswith("http"):
            return said
        return f"{said} ({url})"

    if not _MD_MARKS.search(text):
        return text
    text = _MD_LINK.sub(link, text)
    for pattern in _MD_EMPHASIS:
        text = pattern.sub(lambda m: m.group("text"), text)
    return _MD_LINE.sub("", text)


def clip(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return cut.rstrip(",;:") + "…"
