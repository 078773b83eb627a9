"""The memory tools' OpenAI function schemas, their names and the bounds of their answers.

:func:`tool_schemas` is what ``Session.tools`` and the MCP server list; the handlers that
run the calls are in :mod:`harnessmem.tools.handlers`.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from harnessmem.settings import HarnessSettings

__all__ = [
    "DEFAULT_LIMIT",
    "FLUSH_SESSION",
    "FORGET_LIMIT",
    "FORGET_TOOL",
    "GET_DEFAULT_LINES",
    "GET_MAX_CHARS",
    "GET_MAX_LINES",
    "HIT_CHARS",
    "LIFECYCLE_TOOL_NAMES",
    "LIMIT_MAX",
    "OUTPUT_CHARS",
    "QUERY_MAX_CHARS",
    "SAVE_MAX_CHARS",
    "TOOL_NAMES",
    "ToolResult",
    "tool_schemas",
]

#: Characters of one hit's text shown by the search tools.
HIT_CHARS = 600
#: Upper bound of any tool result.
OUTPUT_CHARS = 12_000
#: memory_get: lines when ``lines`` is not given, most lines per call, most characters.
GET_DEFAULT_LINES = 60
GET_MAX_LINES = 300
GET_MAX_CHARS = 12_000
DEFAULT_LIMIT = 8
#: Longest query the search tools take: 2-6 keywords find the most, and a query the size
#: of a document is a mistake the model should correct, not a search to run.
QUERY_MAX_CHARS = 2_000
#: Longest text one memory_save takes: about MEMORY.md's whole default budget
#: (consolidation.max_memory_tokens 4,000 ≈ 16,000 characters).
SAVE_MAX_CHARS = 16_000
#: memory_flush: the session whose high-water mark a flush without ``session_id`` moves.
FLUSH_SESSION = "mcp"


def _schema(name: str, description: str, properties: dict[str, Any], required: list[str]) -> Any:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


#: The most hits a search tool's schema allows (more is refused; ``index.max_results`` may
#: serve fewer).
LIMIT_MAX = 50
_LIMIT = {
    "type": "integer",
    "minimum": 1,
    "maximum": LIMIT_MAX,
    "description": f"How many results to return, best first (default {DEFAULT_LIMIT}).",
}

_SCHEMAS: list[dict[str, Any]] = [
    _schema(
        "memory_search",
        "Search your long-term memory: MEMORY.md (curated facts) and the daily logs in "
        "memory/ (facts noted after each conversation). Use it before answering anything "
        "that may depend on earlier conversations: the user's preferences, people, "
        "projects, decisions, dates, past events. Words match in any order and in any "
        "grammatical form; names and rare words find the most, so prefer 2-6 telling "
        "keywords over a full sentence. Returns the best matches as `path:start-end` "
        "with the date and section of each and its text; read around a match with "
        "memory_get. No match means it was never noted, not that it is false.",
        {
            "query": {
                "type": "string",
                "maxLength": QUERY_MAX_CHARS,
                "description": "Keywords or a short question, e.g. 'Kyoto hotel booking'.",
            },
            "limit": _LIMIT,
            "mode": {
                "type": "string",
                "enum": ["any", "all", "phrase"],
                "description": "'any' (default): ranked matches of any of the words; "
                "'all': only entries with every word; 'phrase': the exact words in order.",
            },
            "since": {
                "type": "string",
                "format": "date",
                "description": "Only memories dated on or after this day, 'YYYY-MM-DD' "
                "(e.g. for 'what did we decide last week').",
            },
            "until": {
                "type": "string",
                "format": "date",
                "description": "Only memories dated on or before this day, 'YYYY-MM-DD'.",
            },
        },
        ["query"],
    ),
    _schema(
        "memory_get",
        "Read lines of a memory file: MEMORY.md, a daily log such as "
        "memory/2026-11-30.md, a session log in sessions/, or a saved tool output the "
        "conversation pointed to. Use it after memory_search to see the context around "
        "a match (start a few lines before it). Lines come numbered; a long file is "
        "read a window at a time, and the result says how to read on.",
        {
            "path": {
                "type": "string",
                "description": "Path relative to the memory workspace, exactly as "
                "memory_search or session_search printed it, e.g. 'memory/2026-11-30.md'.",
            },
            "start_line": {
                "type": "integer",
                "minimum": 1,
                "description": "First line to read, 1-based (default 1).",
            },
            "lines": {
                "type": "integer",
                "minimum": 1,
                "maximum": GET_MAX_LINES,
                "description": f"How many lines to read (default {GET_DEFAULT_LINES}).",
            },
        },
        ["path"],
    ),
    _schema(
        "session_search",
        "Search the raw message logs of earlier conversations (what was literally said, "
        "including tool calls), for details that were never noted in memory: exact "
        "wording, numbers, code, error messages. Prefer memory_search first. Returns "
        "matching messages as `sessions/<id>.log.jsonl:line` with their text; read "
        "around one with memory_get.",
        {
            "query": {
                "type": "string",
                "maxLength": QUERY_MAX_CHARS,
                "description": "Keywords to look for.",
            },
            "session_id": {
                "type": "string",
                "description": "Only search this conversation's log (default: all sessions).",
            },
            "limit": _LIMIT,
        },
        ["query"],
    ),
    _schema(
        "memory_save",
        "Save facts to long-term memory (MEMORY.md) so they are remembered in future "
        "conversations: stable preferences, decisions, names, commitments, corrections. "
        "Write each fact as one self-contained Markdown bullet that makes sense without "
        "this conversation (who, what, when). Do not save secrets, passwords or "
        "passing small talk.",
        {
            "text": {
                "type": "string",
                "maxLength": SAVE_MAX_CHARS,
                "description": "One or more facts, one Markdown bullet each, e.g. "
                "'- Alice prefers aisle seats on long flights.'",
            }
        },
        ["text"],
    ),
]

_LIFECYCLE_SCHEMAS: list[dict[str, Any]] = [
    _schema(
        "memory_flush",
        "Hand over the conversation so far: the facts worth remembering from the messages "
        "not handed over before are written to today's daily log in memory/ (searchable "
        "at once with memory_search; consolidated into MEMORY.md later). Call it at the "
        "end of a conversation or every few turns; messages already handed over are "
        "skipped, so sending the whole transcript again is fine. Returns how many "
        "messages were read and how many facts were written or were already on file.",
        {
            "messages": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "properties": {
                        "role": {
                            "type": "string",
                            "enum": ["system", "user", "assistant", "tool"],
                        },
                        "content": {"type": ["string", "array", "null"]},
                    },
                    "required": ["role"],
                },
                "description": "The conversation as chat messages "
                "({'role': 'user', 'content': '...'}), oldest first.",
            },
            "session_id": {
                "type": "string",
                "description": "Which conversation this is; messages already handed over "
                f"under this id are skipped (default {FLUSH_SESSION!r}).",
            },
        },
        ["messages"],
    ),
]

TOOL_NAMES: tuple[str, ...] = tuple(schema["function"]["name"] for schema in _SCHEMAS)
LIFECYCLE_TOOL_NAMES: tuple[str, ...] = tuple(
    schema["function"]["name"] for schema in _LIFECYCLE_SCHEMAS
)


class ToolResult(NamedTuple):
    """What a memory tool answered: the text for the model, and whether that text is an
    ``Error: ...`` the model can act on (a bad argument, a refused path, a timeout)."""

    text: str
    is_error: bool = False


#: The optional tool ``tools.forget`` turns on, and how many facts one call may remove.
FORGET_TOOL = "memory_forget"
FORGET_LIMIT = 5

_FORGET_SCHEMA = _schema(
    FORGET_TOOL,
    "Remove a fact from long-term memory for good, when the user asks you to forget it "
    "or it is wrong and there is nothing to replace it with. Matches every saved fact "
    "that holds all words of the query; refuses when more than "
    f"{FORGET_LIMIT} match. Run it with dry_run first and check what would go.",
    {
        "query": {
            "type": "string",
            "description": "Words of the fact to forget, e.g. 'Alice phone number'.",
        },
        "dry_run": {
            "type": "boolean",
            "description": "Only list what would be removed (default false).",
        },
    },
    ["query"],
)


def tool_schemas(
    settings: HarnessSettings | None = None, *, lifecycle: bool = False
) -> list[dict[str, Any]]:
    """The tool schemas in OpenAI function format (a fresh copy each call): the four
    memory tools, ``memory_forget`` when ``settings.tools.forget`` is on, and with
    ``lifecycle`` ``memory_flush`` after them."""
    schemas = [*_SCHEMAS]
    if settings is not None and settings.tools.forget:
        schemas.append(_FORGET_SCHEMA)
    return copy.deepcopy(schemas + (_LIFECYCLE_SCHEMAS if lifecycle else []))
