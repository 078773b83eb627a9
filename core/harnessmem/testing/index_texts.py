"""What the index suite syncs and searches: the memory texts, the queries that break naive
query builders, and :func:`sync_text`, which indexes a text as the harness cuts it."""

from __future__ import annotations

from harnessmem.backends.base import IndexBackend, SearchHit
from harnessmem.index import chunk_markdown, chunk_session_log, content_hash

__all__ = [
    "ALICE",
    "BOB",
    "MEMORY",
    "NASTY_QUERIES",
    "OTHER_WORKSPACE",
    "hit_paths",
    "sync_text",
]

#: Queries that break naive FTS query builders; none may raise.
NASTY_QUERIES = [
    "",
    "   ",
    '"',
    '""',
    '"unbalanced',
    "'single'",
    "a AND",
    "OR",
    "NOT",
    "AND OR NOT",
    "NEAR(a b, 3)",
    "content:word",
    "col:",
    "*",
    "prefix*",
    "^start",
    "(",
    ")",
    "((a OR b)",
    "a) OR (b",
    "-minus +plus",
    "a:b:c",
    "\x00",
    "nul\x00inside",
    "\u200b\u200d",
    "🧠🔥 emoji only",
    "emoji🧠glued",
    "\\backslash\\",
    "%_like%",
    "; DROP TABLE entries; --",
    "x" * 5_000,
    "word " * 1_000,
    " ".join(f"w{i}" for i in range(600)),
    "寿司" * 2_500,
    "\ud800",  # a lone surrogate
]


def sync_text(
    index: IndexBackend,
    path: str,
    text: str,
    *,
    source: str = "memory",
    token: str | None = None,
) -> bool:
    """Index ``text`` as the content of ``path``, cut as the harness cuts it."""
    chunk = chunk_session_log if source == "sessions" else chunk_markdown
    return index.sync_file(
        path,
        content_hash(text.encode("utf-8", "surrogatepass")),
        chunk(path, text),
        source=source,
        change_token=token,
    )


#: The id of the second workspace the isolation tests put on the store of ``index``.
OTHER_WORKSPACE = "suite://other-workspace"

#: The memories of the two workspaces the isolation tests keep apart.
ALICE = """# Memory

- Alice parks the bicycle behind the bakery.
- The staging password hint is a lighthouse.
"""
BOB = """# Memory

- Bob parks the van near the harbour.
- Bob's staging password hint is a lemon.
"""


def hit_paths(hits: list[SearchHit]) -> list[str]:
    """The path of each hit, in order."""
    return [hit.path for hit in hits]


MEMORY = """# Memory

## Travel
- Prefers aisle seats on long flights.
- Booked the Kyoto ryokan for March 3-5.
  It has an onsen and serves kaiseki dinners.

## People
- Alice is the CTO of Acme; she reviews every architecture decision.
- Bob runs the Berlin office.

A paragraph about the quarterly roadmap
that spans two lines.
"""
