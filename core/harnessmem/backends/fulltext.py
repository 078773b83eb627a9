"""Query parsing and CJK segmentation for full-text index backends (public, stable).

What the built-in ``sqlite`` backend uses to turn any user text into safe search terms,
offered to third-party index backends so that every backend reads a query the same way:

- :func:`parse_query` gives the distinct :class:`QueryTerm` objects of a text (a word, or
  a phrase of tokens that belong together: ``gpt-4o``, ``2026-11-30``, a CJK word), English
  stop words dropped unless nothing else is left. Tokens hold letters and digits only, so
  no operator, quote or bracket of the user's text survives into an engine's syntax.
- :func:`segment_cjk` writes runs of Han, kana and Hangul as overlapping bigrams plus the
  run's last character; index and query text go through it alike (a one-character CJK
  term is marked ``prefix`` and matches the start of an indexed bigram).
- :func:`select_terms` keeps the rarest ``max_terms`` terms of a long query.
- :func:`neighbour_texts` gives each entry of a file the text of the entry before it in
  its section, for a low-weight column that ranks an entry but never matches it alone
  (the ``sqlite`` backend's ``before`` column; a reply then ranks by its question too).
- :func:`fts5_expression` writes terms as an SQLite FTS5 ``MATCH`` expression with every
  token quoted, so no user text reaches FTS5 as syntax (the query sanitiser the ``sqlite``
  backend uses, property-tested; for any backend built on FTS5).

These names are re-exported from a private module; import them from here.
"""

from harnessmem.backends import _fts
from harnessmem.backends._fts import *  # noqa: F403 (the names are _fts.__all__)

__all__ = list(_fts.__all__)
