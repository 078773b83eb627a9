"""Which messages of a conversation changed since the previous call that saw it.

An agent loop passes the whole conversation on every turn, and most of it is what the
previous turn passed: the same dicts holding the same values. :class:`SeenMessages`
remembers a structural copy of each message it was shown (every dict, list and tuple
inside copied, the texts and numbers shared) and answers which positions of the next
list differ from it, so per-message work (the shape check, token counts) is redone only
for those.

What counts as a change is what equality of the copy with the message sees, at any
depth: a value replaced (``message["content"] = ...``), a key added or removed, a tool
call's arguments edited inside the same call dict, a content part appended to the same
list, a message inserted, removed or moved (each later position then differs), the list
replaced by another. What it does not see: a value replaced by an equal value of another
type (``1`` by ``1.0`` or ``True``), which the shape check treats alike. A message that
holds a container other than a dict, list or tuple (a custom mapping or sequence, whose
contents may change unseen) is never taken as unchanged.

Comparing the copies is one pass over the conversation done in C (list and dict
equality, which return at the first identical object), several times cheaper than the
per-message Python work it spares; copying is done once per new or changed message.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Sequence
from typing import Any, Final

__all__ = ["SeenMessages"]

_LEAVES: Final = frozenset({str, int, float, bool, type(None)})


class _Opaque:
    """Stands in for a message that cannot be copied faithfully: equal to nothing."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return False

    __hash__ = None  # type: ignore[assignment]


_OPAQUE: Final = _Opaque()


class _NotPlain(Exception):
    pass


def _copy(value: Any) -> Any:
    """A copy of ``value`` with every dict, list and tuple copied and the leaves shared."""
    cls = type(value)
    if cls in _LEAVES:
        return value
    if cls is dict:
        return {key: _copy(inner) for key, inner in value.items()}
    if cls is list:
        return [_copy(inner) for inner in value]
    if cls is tuple:
        return tuple(_copy(inner) for inner in value)
    raise _NotPlain


def _copy_message(message: Any) -> Any:
    try:
        return _copy(message)
    except (_NotPlain, RecursionError):  # RecursionError: a structure that holds itself
        return _OPAQUE


class SeenMessages:
    """The messages of the previous call, as copies, to tell which positions changed.

    :meth:`changed` lists the positions of a new list whose message differs from the one
    remembered there (positions past the remembered length are all new);
    :meth:`remember` records the list once it has been handled. Copy only messages that
    passed the shape check (a copy walks every container). Safe to share between threads:
    :attr:`lock` is held by the caller around ``changed`` and ``remember``.
    """

    def __init__(self) -> None:
        self._copies: list[Any] = []
        self.lock = threading.Lock()

    def changed(self, messages: Sequence[Any]) -> list[int]:
        """Positions of ``messages`` whose message is not the one remembered there."""
        copies = self._copies
        known = min(len(copies), len(messages))
        head = messages[:known] if type(messages) is list else list(messages[:known])
        if known == len(copies) and head == copies:
            return list(range(known, len(messages)))
        differs = [i for i, same in enumerate(map(operator.eq, head, copies)) if not same]
        return differs + list(range(known, len(messages)))

    def remember(self, messages: Sequence[Any], changed: Sequence[int]) -> None:
        """Record ``messages``, of which only ``changed`` (from :meth:`changed`) are new."""
        copies = self._copies
        del copies[len(messages) :]
        for index in changed:
            copy = _copy_message(messages[index])
            if index < len(copies):
                copies[index] = copy
            else:
                copies.append(copy)

    def forget(self) -> None:
        """Remember nothing: the next :meth:`changed` lists every position."""
        self._copies = []
