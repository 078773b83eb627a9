"""Tombstones: what ``forget`` removed, so that flush and consolidation never bring it back.

``memory/.tombstones.json`` holds, for each forgotten query, the salted hashes of its
words (:func:`harnessmem.memory.files.query_words`), never the words themselves: a fact
is covered by a tombstone when its own words include every word the tombstone hashes. The
salt is random per workspace, so the hashes of one workspace say nothing about another's
and cannot be looked up in a precomputed table. They are not a secret against someone who
can read the workspace: such a reader can hash candidate words with the salt and test
them, which is cheap for short, common words. The trade-off is deliberate: storing the
text would keep what the user asked to be forgotten; storing nothing would let the next
flush of an old conversation, or a consolidation of an older daily log, write it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harnessmem import layout
from harnessmem.memory import files as mf

if TYPE_CHECKING:
    from harnessmem.workspace import Workspace

__all__ = ["Tombstones", "add_tombstone", "read_tombstones"]

logger = logging.getLogger("harnessmem.memory.forget")

_VERSION = 1
_DIGEST = 8  # bytes of each word hash


def _hash(salt: bytes, word: str) -> str:
    data = word.encode("utf-8", "replace")
    return hashlib.blake2b(data, key=salt, digest_size=_DIGEST).hexdigest()


@dataclass(frozen=True)
class Tombstones:
    """The tombstones of a workspace (empty when none was ever written)."""

    salt: bytes = b""
    entries: tuple[frozenset[str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.entries)

    def covers(self, text: str) -> bool:
        """Whether ``text`` (one fact) holds every word of some tombstone."""
        if not self.entries:
            return False
        own = {_hash(self.salt, word) for word in mf.query_words(text)}
        return any(entry <= own for entry in self.entries)

    def keep(self, facts: Sequence[str]) -> list[str]:
        """The facts no tombstone covers."""
        return [fact for fact in facts if not self.covers(fact)]

    def scrub(self, markdown: str) -> str:
        """``markdown`` (a memory file's text) without the facts a tombstone covers."""
        if not self.entries:
            return markdown
        return mf.rewrite_units(markdown, self.covers)[0]

    def dumps(self) -> str:
        data = {
            "version": _VERSION,
            "salt": self.salt.hex(),
            "tombstones": [sorted(entry) for entry in self.entries],
        }
        return json.dumps(data, indent=1) + "\n"

    @classmethod
    def parse(cls, raw: str) -> Tombstones:
        if not raw.strip():
            return cls()
        try:
            data = json.loads(raw)
            salt = bytes.fromhex(data["salt"])
            entries = tuple(frozenset(map(str, words)) for words in data["tombstones"] if words)
        except (ValueError, KeyError, TypeError) as exc:
            # Written atomically, so this is damage, not a torn write. Forgetting nothing
            # silently would be worse than a loud warning on every read.
            logger.warning("%s is unreadable (%s); no tombstone applies", layout.TOMBSTONES, exc)
            return cls()
        return cls(salt, entries)


def read_tombstones(workspace: Workspace) -> Tombstones:
    """The workspace's tombstones, read now (they must be current where they are honoured)."""
    try:
        return Tombstones.parse(workspace.read_text(layout.TOMBSTONES))
    except FileNotFoundError:
        return Tombstones()


def add_tombstone(workspace: Workspace, words: Iterable[str]) -> None:
    """Add a tombstone for ``words`` (one compare-and-swap: concurrent adds are all kept)."""
    wanted = sorted(set(words))

    def add(current: str) -> str | None:
        stones = Tombstones.parse(current)
        salt = stones.salt or secrets.token_bytes(16)
        entry = frozenset(_hash(salt, word) for word in wanted)
        if entry in stones.entries:
            return None
        return Tombstones(salt, (*stones.entries, entry)).dumps()

    workspace.update_text(layout.TOMBSTONES, add)
