"""Text handling shared by full-text backends: query terms, CJK segmentation, FTS5 syntax.

Everything here is pure (no database), so it is fuzzed directly:

- :func:`parse_query` turns any user text into :class:`QueryTerm` objects. A term is a
  word, or a phrase of tokens that belong together (``gpt-4o``, ``2026-11-30``,
  ``don't``, a CJK word). English stop words are dropped unless nothing else is left.
- :func:`segment_cjk` rewrites CJK runs as overlapping bigrams plus the run's last
  character. SQLite's ``unicode61`` tokenizer keeps a run of Han, kana or Hangul as one
  token (CJK text has no spaces), so without this ``寿司`` would not match ``我喜欢寿司``.
  Index and query go through the same function, the approach of Lucene's CJK bigram
  filter. The trailing single character lets a one-character query match as a prefix.
- :func:`neighbour_texts` gives each entry the text of the entry before it in its section,
  which a backend indexes as a low-weight column that ranks but does not match (an answer
  then ranks by the words of the question it answers too).
- :func:`fts5_expression` writes the terms as an FTS5 MATCH expression in which every
  token is inside double quotes. Tokens contain only letters and digits, so quotes,
  operators (AND, OR, NOT, NEAR), column filters, parentheses and ``*`` in the user's
  text can never become FTS5 syntax: no query reaches SQLite as a syntax error.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from harnessmem.backends.base import SearchMode

__all__ = [
    "MAX_QUERY_CHARS",
    "NEIGHBOUR_CHARS",
    "STOP_WORDS",
    "QueryTerm",
    "fts5_expression",
    "has_cjk",
    "neighbour_texts",
    "parse_query",
    "segment_cjk",
    "select_terms",
]


#: What :func:`neighbour_texts` keeps of the entry before (the start of its text).
NEIGHBOUR_CHARS = 1_000

#: Longer query text is cut here (after normalisation): a pasted page is not a query, and
#: the term cap would drop most of it anyway.
MAX_QUERY_CHARS = 2_000

# Han (unified, extension A, compatibility, supplementary planes), hiragana, katakana
# (incl. half-width), the iteration mark, Hangul syllables.
_CJK_CLASS = (
    "\u3005\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
    "\uff66-\uff9f\U00020000-\U0002ffff"
)
_CJK = re.compile(f"[{_CJK_CLASS}]")
_CJK_RUN = re.compile(f"[{_CJK_CLASS}]+")
# A "chunk" is a run of letters/digits joined by single connector characters without
# spaces: gpt-4o, node.js, 2026-11-30, a@b.com, don't. Its parts form one phrase.
_CHUNK = re.compile(r"[^\W_]+(?:[-./@:+#_'\u2019][^\W_]+)*")
_PART = re.compile(r"[^\W_]+")
_POSSESSIVE = re.compile(r"['\u2019][sS]$")
# Above this length a CJK run is a sentence, not a word: its bigrams become separate terms.
_CJK_WORD_MAX = 4

#: Dropped from "any" and "all" queries (never from phrases, never when nothing else is
#: left). English only; other languages keep every word, which costs ranking little
#: because bm25 gives very common words almost no weight.
_STOP_TEXT = """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing don down during each few
    for from further had has have having he her here hers herself him himself his how i
    if in into is it its itself just let me more most my myself no nor not now of off on
    once only or other ought our ours ourselves out over own same shall she should so
    some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom
    why will with would you your yours yourself yourselves s t d ll m re ve
    isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't didn't won't wouldn't
    shan't shouldn't can't cannot couldn't mustn't let's that's who's what's here's
    there's when's where's why's how's i'm you're he's she's it's we're they're i've
    you've we've they've i'd you'd he'd she'd we'd they'd i'll you'll he'll she'll we'll
    they'll
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


@dataclass(frozen=True, slots=True)
class QueryTerm:
    """One unit of a query: ``tokens`` match as a phrase (one token for a plain word).

    ``prefix`` marks a single CJK character, matched as the start of an indexed bigram.
    """

    tokens: tuple[str, ...]
    prefix: bool = False

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a Han, kana or Hangul character."""
    return _CJK.search(text) is not None


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def segment_cjk(text: str) -> str:
    """``text`` with every CJK run written as space-separated bigrams plus its last character.

    Text without CJK comes back unchanged (the common case costs one regex scan).
    """
    if _CJK.search(text) is None:
        return text
    return _CJK_RUN.sub(lambda m: " " + " ".join([*_bigrams(m.group()), m.group()[-1]]) + " ", text)


def _normalise(text: str) -> str:
    # NFKC folds full-width letters and compatibility forms the way users type them;
    # NUL and other control characters carry no meaning in a query.
    text = unicodedata.normalize("NFKC", text[: MAX_QUERY_CHARS * 2])
    return "".join(c if c.isprintable() else " " for c in text)[:MAX_QUERY_CHARS]


def _split_part(part: str) -> list[tuple[str, bool]]:
    """Alternating non-CJK and CJK pieces of an alphanumeric run, flagged ``is_cjk``."""
    pieces: list[tuple[str, bool]] = []
    last = 0
    for match in _CJK_RUN.finditer(part):
        if match.start() > last:
            pieces.append((part[last : match.start()], False))
        pieces.append((match.group(), True))
        last = match.end()
    if last < len(part):
        pieces.append((part[last:], False))
    return pieces


def _chunk_terms(chunk: str) -> tuple[list[QueryTerm], bool]:
    """Terms of one chunk, and whether the chunk is a stop word."""
    chunk = _POSSESSIVE.sub("", chunk)
    lowered = chunk.lower().replace("\u2019", "'")
    stop = lowered in STOP_WORDS
    latin: list[str] = []
    terms: list[QueryTerm] = []
    for part in _PART.findall(lowered):
        for piece, is_cjk in _split_part(part):
            if not is_cjk:
                latin.append(piece)
                continue
            if latin:
                terms.append(QueryTerm(tuple(latin)))
                latin = []
            if len(piece) == 1:
                terms.append(QueryTerm((piece,), prefix=True))
            elif len(piece) <= _CJK_WORD_MAX:
                terms.append(QueryTerm(tuple(_bigrams(piece))))
            else:
                terms.extend(QueryTerm((bigram,)) for bigram in _bigrams(piece))
    if latin:
        terms.append(QueryTerm(tuple(latin)))
    return terms, stop


def parse_query(text: str, *, keep_stop_words: bool = False) -> list[QueryTerm]:
    """The distinct terms of ``text`` in order of first appearance; never raises on str input.

    Stop words are dropped unless ``keep_stop_words`` or unless every term is one.
    """
    if not isinstance(text, str):
        raise TypeError(f"a query is a str, got {type(text).__name__}")
    kept: list[QueryTerm] = []
    stopped: list[QueryTerm] = []
    for chunk in _CHUNK.findall(_normalise(text)):
        terms, stop = _chunk_terms(chunk)
        (stopped if stop and not keep_stop_words else kept).extend(terms)
    return list(dict.fromkeys(kept or stopped))


def select_terms(
    terms: Sequence[QueryTerm],
    max_terms: int,
    document_frequency: Callable[[QueryTerm], int] | None = None,
) -> list[QueryTerm]:
    """At most ``max_terms`` of ``terms``: the rarest by ``document_frequency``, in query order.

    bm25 already weights each term by its rarity (IDF); the cap bounds the work of a
    long query and keeps its most telling words. Without frequencies, longer terms win
    (length is a fair proxy for rarity). Ties keep the earlier term.
    """
    if len(terms) <= max_terms:
        return list(terms)
    if document_frequency is None:

        def rank(item: tuple[int, QueryTerm]) -> tuple[float, int]:
            return (-float(len(item[1].text)), item[0])

    else:
        frequency = document_frequency

        def rank(item: tuple[int, QueryTerm]) -> tuple[float, int]:
            return (float(frequency(item[1])), item[0])

    chosen = sorted(enumerate(terms), key=rank)[:max_terms]
    return [term for _, term in sorted(chosen, key=lambda item: item[0])]


def _quote(term: QueryTerm) -> str:
    # Tokens hold letters and digits only (see _PART), so no quote needs escaping; the
    # doubling is kept as a guard should that ever change.
    body = " ".join(token.replace('"', '""') for token in term.tokens)
    return f'"{body}"' + (" *" if term.prefix else "")


def fts5_expression(terms: Iterable[QueryTerm], mode: SearchMode = "any") -> str | None:
    """An FTS5 MATCH expression for ``terms``; None when there is nothing to match.

    ``any``: entries with at least one term (bm25 ranks those with more, and rarer, terms
    first); ``all``: entries with every term; ``phrase``: the tokens of all terms in order.
    """
    terms = list(terms)
    if not terms:
        return None
    if mode == "phrase":
        tokens = [token for term in terms for token in term.tokens]
        return _quote(QueryTerm(tuple(tokens)))
    if mode not in ("any", "all"):
        raise ValueError(f"unknown search mode {mode!r}; expected 'any', 'all' or 'phrase'")
    return (" OR " if mode == "any" else " AND ").join(_quote(term) for term in terms)


def neighbour_texts(contents: Sequence[str], sections: Sequence[int]) -> list[str]:
    """For each entry of a file (its entries in order, by column), the content of the entry
    before it in the same ``section``, cut at :data:`NEIGHBOUR_CHARS` ("" for a section's first).

    A backend indexes it as a low-weight column that ranks but never matches on its own:
    of the entries holding a query's words, one that follows an entry with more of them
    (a reply to the question asked, the detail under a bullet) comes first.
    """
    if not contents:
        return []
    # A list built in one go, not entry by entry: this runs for every entry of a rebuild.
    if sections.count(sections[0]) == len(sections) and max(map(len, contents)) <= NEIGHBOUR_CHARS:
        return ["", *contents[:-1]]  # one section and nothing to cut: most daily logs
    after = zip(contents, sections, sections[1:], strict=False)  # the last entry is no one's
    return ["", *[text[:NEIGHBOUR_CHARS] if here == last else "" for text, last, here in after]]
