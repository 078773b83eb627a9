"""The shape check every lifecycle call makes of the messages it is given.

``Session.before_reasoning`` and its siblings run on every turn, so the check is one
pass over the list that looks at each message's own keys and walks only the containers
inside it (content parts, tool calls, whatever extra a framework attached); no copies.
It rejects what would otherwise fail somewhere deep inside a plugin with a plain Python
error: a list that is not a list, a message that is not a dict, a field of the wrong type,
and values nested so deeply (or referring to themselves) that ``json.dumps``, ``copy``
or a recursive walk runs out of stack.

It checks types, not provider rules: :func:`harnessmem.messages.validate_messages` is the
strict check (known roles, required fields, call/result pairing) for transcripts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from harnessmem.errors import MessageFormatError
from harnessmem.messages._seen import MessageChanges, SeenMessages

__all__ = [
    "MAX_DEPTH",
    "check_changes",
    "check_messages",
    "check_tool_call",
    "nesting_problem",
    "value_nesting_problem",
]

Message = dict[str, Any]

#: How deeply containers may nest inside one message. Real messages nest a few levels
#: (content part > image_url > url); the interpreter's stack gives out near 1,000 nested
#: levels in ``json.dumps`` and ``copy.deepcopy``, and sooner in a plugin's own walk.
MAX_DEPTH: Final = 100
_MAX_PROBLEMS: Final = 20
_TEXT_KEYS: Final = ("role", "name", "tool_call_id")
# Types that hold nothing to walk; everything else is looked at once.
_LEAVES: Final[frozenset[type]] = frozenset({str, int, float, bool, type(None)})
_TEXT: Final[frozenset[type]] = frozenset({str})
_HINT: Final = (
    "pass the conversation as a list of OpenAI-format message dicts: role (text), content "
    "(text, a list of parts or None), tool_calls (a list of call dicts), tool_call_id (text)"
)


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _show_path(path: Sequence[Any]) -> str:
    shown = "".join(f"[{step!r}]" for step in path[:4])
    return shown + ("..." if len(path) > 4 else "")


def _too_deep(value: Any, limit: int, depth: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` or has a key that is not text.

    The fast walk behind :func:`nesting_problem`: exact type checks first (messages are
    plain dicts, lists and strings), no paths; only a failure is walked again to say where.
    """
    stack = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if level > limit:
            return True
        cls = type(item)
        if cls is dict or (cls not in _LEAVES and isinstance(item, Mapping)):
            for key, inner in item.items():
                if type(key) is not str:
                    return True
                if type(inner) not in _LEAVES:
                    stack.append((inner, level + 1))
        elif cls is list or cls is tuple or isinstance(item, list | tuple):
            for inner in item:
                if type(inner) not in _LEAVES:
                    stack.append((inner, level + 1))
    return False


def _flat(items: list[Any] | tuple[Any, ...], leaves: frozenset[type] = _LEAVES) -> bool:
    """Whether every item is one of ``leaves``, or a dict of leaves and of dicts of leaves
    (text keys).

    The shape of nearly every content list (``leaves``: text) and extra list value;
    answering it with plain loops spares those the general walk and the shape checks.
    """
    for item in items:
        if type(item) in leaves:
            continue
        if type(item) is not dict:
            return False
        for key, value in item.items():
            if type(key) is not str:
                return False
            if type(value) in _LEAVES:
                continue
            if type(value) is not dict:
                return False
            for inner_key, inner in value.items():
                if type(inner_key) is not str or type(inner) not in _LEAVES:
                    return False
    return True


def nesting_problem(value: Any, limit: int = MAX_DEPTH, depth: int = 0) -> tuple[str, str] | None:
    """Where and why ``value`` nests dicts/lists deeper than ``limit`` or has a non-text
    key, as ``("[0]['extra']...", "nested more than 100 levels deep")``; None when fine.

    Iterative, so a structure of any depth (a cycle included: it is infinitely deep)
    is measured without recursion. ``depth`` is how deep ``value`` itself sits.
    """
    if not _too_deep(value, limit, depth):
        return None
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, depth, ())]
    while stack:
        item, level, path = stack.pop()
        if level > limit:
            return _show_path(path), f"nested more than {limit} levels deep (or refers to itself)"
        if isinstance(item, Mapping):
            for key, inner in item.items():
                if type(key) is not str:
                    return _show_path(path), f"key {key!r} is {_kind(key)}, expected text"
                stack.append((inner, level + 1, (*path, key)))
        elif isinstance(item, list | tuple):
            stack.extend((inner, level + 1, (*path, i)) for i, inner in enumerate(item))
    raise AssertionError("unreachable: the fast walk found a problem")  # pragma: no cover


def _plain_calls(calls: list[Any]) -> bool:
    """Whether every call is a dict of leaves and of dicts of leaves, with ``function`` a
    dict: the shape of nearly every tool-call list, answered in one loop."""
    for call in calls:
        if type(call) is not dict:
            return False
        for key, value in call.items():
            if type(value) is dict:
                if type(key) is not str:
                    return False
                for inner_key, inner in value.items():
                    if type(inner_key) is not str or type(inner) not in _LEAVES:
                        return False
            elif type(value) not in _LEAVES or key == "function" or type(key) is not str:
                return False
    return True


def _calls_problem(calls: Any) -> str | None:
    if not isinstance(calls, list | tuple):
        return f"tool_calls is {_kind(calls)}, expected a list of tool call dicts"
    for position, call in enumerate(calls):
        if type(call) is not dict and not isinstance(call, Mapping):
            return f"tool call {position} is {_kind(call)}, expected a dict"
        function = call.get("function")
        if (
            function is not None
            and type(function) is not dict
            and not isinstance(function, Mapping)
        ):
            return f"tool call {position}: function is {_kind(function)}, expected a dict"
    return None


def _slow_problem(key: str, value: Any) -> str | None:
    """The problem of a message value that is neither text nor None, or None when fine."""
    if key == "content":
        if not isinstance(value, list | tuple):
            return f"content is {_kind(value)}, expected text, a list of parts or None"
        for position, part in enumerate(value):
            if type(part) is not dict and not isinstance(part, str | Mapping):
                return f"content part {position} is {_kind(part)}, expected a dict or text"
    elif key == "tool_calls":
        problem = _calls_problem(value)
        if problem:
            return problem
    elif key in _TEXT_KEYS:
        return f"{key} is {_kind(value)}, expected text"
    return value_nesting_problem(key, value)


def value_nesting_problem(key: str, value: Any) -> str | None:
    """The nesting problem of message field ``key`` (``meta['a']...: nested ...``), or None."""
    if type(value) in _LEAVES or (type(value) in (list, tuple) and _flat(value)):
        return None
    if isinstance(value, Mapping | list | tuple):
        deep = nesting_problem(value, depth=1)
        if deep is not None:
            return f"{key}{deep[0]}: {deep[1]}"
    return None


def _message_problem(message: Any) -> str | None:
    if not isinstance(message, Mapping):
        return f"is {_kind(message)}, expected a message dict"
    if type(message.get("role")) is not str:
        role = message.get("role")
        return "has no role" if role is None else f"role is {_kind(role)}, expected text"
    for key, value in message.items():
        if type(key) is not str:
            return f"key {key!r} is {_kind(key)}, expected text"
        if value is None or (type(value) is str and key != "tool_calls"):
            continue
        problem = _slow_problem(key, value)
        if problem is not None:
            return problem
    return None


def check_messages(messages: Any, where: str, *, seen: SeenMessages | None = None) -> list[Message]:
    """``messages`` as a new list (the same message objects) once their shape is checked.

    With ``seen`` (a session's memory of the messages of its previous call), only the
    messages that differ from the remembered ones are checked, at any depth (see
    :class:`~harnessmem.messages.SeenMessages`); the others passed this check then. The
    list is then remembered for the next call.

    Raises :class:`~harnessmem.errors.MessageFormatError` whose first line names ``where``
    (the call, e.g. ``before_reasoning``; "" for none), the message index and the field, and whose
    ``problems`` list every bad message (up to 20). One pass; the work per message is two
    type checks per key unless a value is a container, which is then walked once.
    """
    if seen is None:
        out = _as_list(messages, where)
        _raise_problems(out, range(len(out)), where)
        return out
    return check_changes(messages, where, seen)[0]


def check_changes(
    messages: Any, where: str, seen: SeenMessages
) -> tuple[list[Message], MessageChanges]:
    """:func:`check_messages` with ``seen``, and what the comparison found, for the plugins
    of the call (:class:`~harnessmem.messages.MessageChanges`)."""
    out = _as_list(messages, where)
    with seen.lock:
        changed = seen.changed(out)
        try:
            _raise_problems(out, changed, where)
        except MessageFormatError:
            seen.forget()
            raise
        call = seen.remember(out, changed)
    return out, MessageChanges(seen, call, list(out))


def _as_list(messages: Any, where: str) -> list[Any]:
    if isinstance(messages, str | bytes | bytearray | Mapping) or not isinstance(
        messages, Sequence
    ):
        raise MessageFormatError(
            f"{where}: messages is {_kind(messages)}, expected a list of message dicts",
            hint=_HINT,
        )
    return list(messages)


def _raise_problems(out: list[Any], indexes: Iterable[int], where: str) -> None:
    """Raise ``MessageFormatError`` naming the bad messages among ``out[i]`` for ``indexes``."""
    problems: list[str] = []
    for index in indexes:
        message = out[index]
        if type(message) is dict and type(message.get("role")) is str:
            # Most messages hold only text, or one plain tool call or content list: a few
            # checks a key, no call to the general check.
            for key, value in message.items():
                if type(key) is not str:
                    break
                if value is None or (type(value) is str and key != "tool_calls"):
                    continue
                if type(value) is not list or not (
                    (key == "tool_calls" and _plain_calls(value))
                    or (key == "content" and _flat(value, _TEXT))
                ):
                    break
            else:
                continue
        problem = _message_problem(message)
        if problem is not None:
            problems.append(f"message {index}: {problem}")
            if len(problems) >= _MAX_PROBLEMS:
                break
    if problems:
        headline = f"{where}: {problems[0]}" if where else problems[0]
        if len(problems) > 1:
            headline += f" (and {len(problems) - 1} more: {'; '.join(problems[1:])})"
        raise MessageFormatError(headline, hint=_HINT, problems=problems)


def check_tool_call(call: Any, where: str) -> None:
    """Raise ``MessageFormatError`` unless ``call`` is a tool call dict ``where`` can copy."""
    if not isinstance(call, Mapping):
        raise MessageFormatError(
            f"{where}: call is {_kind(call)}, expected the tool call dict the model sent",
            hint="pass the assistant message's tool_calls item: {'id', 'function': {...}}",
        )
    deep = nesting_problem(call, depth=1)
    if deep is not None:
        raise MessageFormatError(
            f"{where}: call{deep[0]}: {deep[1]}",
            hint="a tool call holds an id, a function name and JSON arguments as text",
        )
