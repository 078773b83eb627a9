"""Reading a transcript file for a replay: JSON, JSON lines, LoCoMo, tau-bench, SWE-agent
and harnessmem's own session logs, with one clear error for a file it cannot read."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessmem.errors import MessageFormatError
from harnessmem.messages import MAX_DEPTH, check_messages

Message = dict[str, Any]


@dataclass(frozen=True)
class Transcript:
    """A transcript file as read: its messages and, for a LoCoMo file, which conversation.

    ``conversation``: the ``sample_id`` of the LoCoMo conversation the messages are (None
    for other formats); ``conversations``: those the file holds, in order; ``speakers``:
    the names the messages carry, in order of appearance.
    """

    messages: list[Message]
    conversation: str | None = None
    conversations: tuple[str, ...] = ()
    speakers: tuple[str, ...] = ()
    #: A file of runs (tau-bench's): the runs chosen, each ``(name, its messages)``, to be
    #: replayed as sessions of their own; ``runs`` is how many the file holds.
    parts: tuple[tuple[str, list[Message]], ...] = ()
    runs: int = 0


def load_transcript(path: str | Path, *, sample: str | int | None = None) -> list[Message]:
    """The OpenAI messages of the transcript file at ``path`` (see :func:`read_transcript`)."""
    return read_transcript(path, sample=sample).messages


def read_transcript(path: str | Path, *, sample: str | int | None = None) -> Transcript:
    """The transcript file at ``path``: its OpenAI messages, and which conversation.

    ``sample`` picks a conversation of a LoCoMo file by ``sample_id`` or 0-based index
    (default: the first), or the runs of a file of runs (tau-bench's) by 0-based index or
    inclusive range (``"3"``, ``"3-5"``; default: all), each then one of ``parts``; it is
    an error for a file of another format.

    Raises ``FileNotFoundError`` / ``IsADirectoryError`` for a missing path and
    ``MessageFormatError`` for a file that is not JSON / JSON Lines (naming the line and
    column) or holds no conversation: one error naming the problem, with what the file
    looks like and the formats harnessmem reads.
    """
    source = Path(path)
    data = source.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MessageFormatError(
            f"{source} is not UTF-8 text (byte {exc.start})",
            hint="a transcript is a JSON list of messages or JSON Lines, in UTF-8",
        ) from None
    if not text.strip():
        raise MessageFormatError(
            f"{source} is empty", hint="a transcript is a JSON list of messages or JSON Lines"
        )
    parsed, lines = _parse_json_or_lines(text, source)
    try:
        transcript = _normalise(parsed, sample)
        messages = check_messages(transcript.messages, "")
    except _InRecognisedFile as exc:
        raise MessageFormatError(f"{source}: {exc.message}", hint=exc.hint) from None
    except MessageFormatError as exc:
        raise _rejected(source, parsed, lines, exc) from None
    if not messages:
        raise MessageFormatError(f"{source} holds no messages")
    return transcript


def _rejected(source: Path, data: Any, lines: bool, exc: MessageFormatError) -> MessageFormatError:
    """The one error for a file harnessmem cannot replay: the problem, what the file looks
    like, and the formats it reads."""
    from harnessmem.messages import FORMATS, describe

    problem = exc.message
    if (
        isinstance(data, list)
        and data
        and all(isinstance(item, Mapping) and "role" not in item for item in data)
    ):
        problem = f"none of its {len(data)} items is a chat message (none has a 'role')"
    hint = f"{exc.hint}; " if exc.hint else ""
    # One error line and one hint line, as every command's errors are.
    return MessageFormatError(
        f"{source}: {problem}; the file is {describe(data, lines=lines)}",
        hint=f"{hint}harnessmem replays {'; '.join(FORMATS)}",
        problems=exc.problems,
    )


class _InRecognisedFile(MessageFormatError):
    """A problem in a file whose format was recognised (a LoCoMo file), or with the
    conversation asked for: the list of formats would not help."""


def _too_deep(source: Path, line: int | None = None) -> MessageFormatError:
    where = f"{source} line {line}" if line is not None else str(source)
    return MessageFormatError(
        f"{where} nests JSON arrays or objects too deeply to read",
        hint=f"a message may nest containers at most {MAX_DEPTH} levels deep",
    )


def _parse_json_or_lines(text: str, source: Path) -> tuple[Any, bool]:
    """The parsed file, and whether it was JSON Lines."""
    try:
        return json.loads(text), False
    except RecursionError:
        raise _too_deep(source) from None
    except json.JSONDecodeError as whole:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2 or not lines[0].lstrip().startswith("{"):
            raise _json_error(source, whole) from None
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except RecursionError:
            raise _too_deep(source, number) from None
        except json.JSONDecodeError as exc:
            raise MessageFormatError(
                f"{source} line {number} is not valid JSON: {exc.msg} (column {exc.colno})",
                hint="JSON Lines hold one complete JSON object per line",
            ) from None
    return records, True


def _json_error(source: Path, exc: json.JSONDecodeError) -> MessageFormatError:
    return MessageFormatError(
        f"{source} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})",
        hint="a transcript is a JSON list of OpenAI messages, or JSON Lines with one a line",
    )


def _normalise(data: Any, sample: str | int | None) -> Transcript:
    from harnessmem.messages import is_locomo, is_locomo_list, normalize_messages

    if is_locomo_list(data) or is_locomo(data):
        return _locomo(data if isinstance(data, list) else [data], sample)
    if isinstance(data, list) and data and all(_is_run(item) for item in data):
        # A list of runs (tau-bench's file shape): each its own conversation.
        parts = tuple(
            (f"run-{index}", normalize_messages(data[index]))
            for index in _chosen_runs(len(data), sample)
        )
        messages = [m for _, part in parts for m in part]
        return Transcript(messages, speakers=_speakers(messages), parts=parts, runs=len(data))
    if sample is not None:
        raise _InRecognisedFile(
            f"sample {sample!r} was asked for, but the file holds one conversation",
            hint="a sample picks a conversation of a LoCoMo file or runs of a runs file; "
            "leave it out",
        )
    messages = normalize_messages(data)
    return Transcript(messages, speakers=_speakers(messages))


_RUN_RANGE = re.compile(r"^\s*(\d+)\s*(?:(?:-|\.\.)\s*(\d+)\s*)?$")


def _chosen_runs(count: int, sample: str | int | None) -> range:
    """The runs ``sample`` names (``3``, ``"3-5"``, ``"3..5"``: 0-based, inclusive); all
    without one."""
    if sample is None:
        return range(count)
    found = _RUN_RANGE.match(str(sample))
    hint = f"pick runs by 0-based index (0 to {count - 1}): one, --sample 3, or a range, 3-5"
    if found is None:
        raise _InRecognisedFile(f"sample {sample!r} is not a run number or a range", hint=hint)
    first = int(found[1])
    last = int(found[2]) if found[2] is not None else first
    if first > last:
        raise _InRecognisedFile(f"runs {first}-{last}: the range runs backwards", hint=hint)
    if last >= count:
        raise _InRecognisedFile(
            f"no run {last} in the file: it holds {count} run{'s' if count != 1 else ''}",
            hint=hint,
        )
    return range(first, last + 1)


def _locomo(samples: list[Any], sample: str | int | None) -> Transcript:
    """One conversation of a LoCoMo file: ``sample`` by id or 0-based index, else the first."""
    from harnessmem.messages import from_locomo, sample_name

    names = tuple(sample_name(item, index) for index, item in enumerate(samples))
    if sample is None:
        index = 0
    elif str(sample) in names:
        index = names.index(str(sample))
    elif isinstance(sample, int) or str(sample).strip().isdigit():
        index = int(sample)
    else:
        index = -1
    if not 0 <= index < len(samples):
        raise _InRecognisedFile(
            f"no conversation {sample!r} in the file",
            hint=f"it holds {', '.join(names)}; pick one by sample_id or by index "
            f"(0 to {len(samples) - 1})",
        )
    try:
        messages = from_locomo(samples[index])
    except MessageFormatError as exc:
        raise _InRecognisedFile(
            f"conversation {names[index]}: {exc.message}", hint=exc.hint
        ) from None
    return Transcript(messages, names[index], names, _speakers(messages))


def _speakers(messages: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    names = (m.get("name") for m in messages if m.get("role") in ("user", "assistant"))
    return tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n))


def _is_run(item: Any) -> bool:
    return (
        isinstance(item, Mapping)
        and "role" not in item
        and any(isinstance(item.get(key), list) for key in ("messages", "traj", "history"))
    )
