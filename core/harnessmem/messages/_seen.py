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

The session compares once per call and logs the positions that changed
(:meth:`SeenMessages.changed_between`); the comparison's result travels with the call as
:class:`MessageChanges` (``ctx.changes``). A plugin that works per message over the turn's
list (the eviction sweep, the compactor's token count) keeps a :class:`Follower`, which
tells from that log which positions may differ from the list the plugin saw at its previous
turn, without comparing the conversation again: the positions the caller changed since
(the log), those where the plugin's list differs from the list the session checked, now or
then (a plugin before it put another object there: found by identity, in C), and the new
ones. Plugins change a message by putting a new object in its place (the dicts are the
caller's); an edit made inside a caller's dict by a plugin is seen by the session's
comparison at the next call.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

__all__ = ["Follower", "Look", "MessageChanges", "SeenMessages"]

_LEAVES: Final = frozenset({str, int, float, bool, type(None)})
#: Calls whose changed positions a SeenMessages keeps: a follower further behind compares.
_LOG: Final = 16
_TOKENS = itertools.count(1)


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
    :meth:`remember` records the list once it has been handled, numbers the call and logs
    its changed positions for :meth:`changed_between`. Copy only messages that passed the
    shape check (a copy walks every container). Safe to share between threads:
    :attr:`lock` is held by the caller around ``changed`` and ``remember``.
    """

    def __init__(self) -> None:
        self._copies: list[Any] = []
        self.lock = threading.Lock()
        #: Tells this object's call numbers from another's (a new Session under the same id).
        self.token = next(_TOKENS)
        self._calls = 0
        self._log: deque[tuple[int, Sequence[int]]] = deque(maxlen=_LOG)

    def changed(self, messages: Sequence[Any]) -> list[int]:
        """Positions of ``messages`` whose message is not the one remembered there."""
        copies = self._copies
        known = min(len(copies), len(messages))
        head = messages[:known] if type(messages) is list else list(messages[:known])
        if known == len(copies) and head == copies:
            return list(range(known, len(messages)))
        differs = [i for i, same in enumerate(map(operator.eq, head, copies)) if not same]
        return differs + list(range(known, len(messages)))

    def changed_among(self, messages: Sequence[Any], positions: Sequence[int]) -> list[int]:
        """:meth:`changed` when only ``positions`` (sorted) and those past the remembered
        length can differ: compares only those."""
        copies = self._copies
        known = min(len(copies), len(messages))
        differs = [i for i in positions if i < known and messages[i] != copies[i]]
        return differs + list(range(known, len(messages)))

    def remember(self, messages: Sequence[Any], changed: Sequence[int]) -> int:
        """Record ``messages``, of which only ``changed`` (from :meth:`changed`) are new;
        the number of this call."""
        copies = self._copies
        del copies[len(messages) :]
        for index in changed:
            copy = _copy_message(messages[index])
            if index < len(copies):
                copies[index] = copy
            else:
                copies.append(copy)
        self._calls += 1
        self._log.append((self._calls, changed))
        return self._calls

    def forget(self) -> None:
        """Remember nothing: the next :meth:`changed` lists every position."""
        self._copies = []

    def changed_between(self, after: int, upto: int) -> set[int] | None:
        """Every position that changed in calls ``after + 1`` to ``upto``; None when the log
        no longer goes back that far (or those calls are not this object's)."""
        with self.lock:
            if not 0 <= after <= upto <= self._calls:
                return None
            logged = [positions for call, positions in self._log if after < call <= upto]
        if len(logged) != upto - after:
            return None
        return set().union(*logged)


@dataclass(frozen=True)
class MessageChanges:
    """One session call's comparison, for the plugins of that call (``ctx.changes``).

    ``checked`` is the list the session checked (its own copy of the references, which no
    plugin changes), ``call`` the number :meth:`SeenMessages.remember` gave the call.
    """

    seen: SeenMessages
    call: int
    checked: list[Any]


class Look(NamedTuple):
    """What :meth:`Follower.look` found; hand it to :meth:`Follower.saw` once handled."""

    #: Positions that may differ from the list seen last (sorted); None: any may.
    positions: list[int] | None
    #: What :meth:`Follower.saw` was given with the list seen last (with ``positions`` only).
    kept: Any
    state: tuple[int, int, int, list[int], Any] | None


class Follower:
    """What one plugin saw of a session's messages at its previous turn.

    :meth:`look` tells which positions of the plugin's list may differ from the list it
    saw last, from the session's log (see the module's docstring), so the plugin redoes its
    per-message work only there. Positions not listed hold a message equal to the one at
    that position last time. Thread-safe: the state is replaced as one value.
    """

    __slots__ = ("_state",)

    def __init__(self) -> None:
        # (seen token, call, length, positions differing from the checked list, kept)
        self._state: tuple[int, int, int, list[int], Any] | None = None

    def look(self, messages: list[Any], changes: MessageChanges | None) -> Look:
        """Which positions of ``messages`` may differ from the list seen last."""
        if changes is None:
            return Look(None, None, None)
        differ = _differing(messages, changes.checked)
        if differ is None:
            return Look(None, None, None)
        state = (changes.seen.token, changes.call, len(messages), differ, None)
        last = self._state
        if last is None or last[0] != changes.seen.token:
            return Look(None, None, state)
        since = changes.seen.changed_between(last[1], changes.call)
        if since is None:
            return Look(None, None, state)
        since.update(differ, last[3], range(last[2], len(messages)))
        count = len(messages)
        return Look(sorted(p for p in since if p < count), last[4], state)

    def saw(self, look: Look, kept: Any = None) -> None:
        """Record the list of ``look`` as handled, with ``kept`` for the next look."""
        self._state = None if look.state is None else (*look.state[:4], kept)

    def reset(self) -> None:
        """Forget the list seen last: the next look lists every position."""
        self._state = None


def _differing(messages: list[Any], checked: list[Any]) -> list[int] | None:
    """Positions where ``messages`` holds a message unequal to ``checked``'s; None when the
    lengths differ (a message inserted or removed: positions no longer line up)."""
    if len(messages) != len(checked):
        return None
    if messages == checked:  # in C; an identical object is equal without a look inside
        return []
    others = itertools.compress(range(len(messages)), map(operator.is_not, messages, checked))
    return [i for i in others if messages[i] != checked[i]]
