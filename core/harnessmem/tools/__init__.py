"""The agent's memory tools: OpenAI function schemas and the handlers behind them.

``Session.tools`` returns :func:`tool_schemas`; ``Session.call_tool(name, arguments)``
runs :func:`call_tool`. Four tools, and one behind a setting:

- ``memory_search(query, limit, mode, since, until)``: ranked hits from MEMORY.md and
  memory/*.md (those dated within ``since``..``until`` when given), each as
  ``path:start-end`` with its date, headings and text;
- ``memory_get(path, start_line, lines)``: numbered lines of a memory file, session log
  or evicted tool result (``MemoryHarness.get`` confines the path);
- ``session_search(query, session_id, limit)``: the same over raw session logs;
- ``memory_save(text)``: appends facts to MEMORY.md through ``MemoryHarness.save``;
- ``memory_forget(query, dry_run)`` (only with ``tools.forget``): removes at most
  :data:`FORGET_LIMIT` matching facts for good through ``MemoryHarness.forget``.

One more, ``memory_flush(messages, session_id)``, is a lifecycle tool for clients that
hand over their transcript rather than call ``Session.after_call`` (the MCP server offers
it when ``mcp.flush_tool`` is on): :func:`tool_schemas` and :func:`run_tool` include it
only when asked (``lifecycle=True``); ``Session.tools`` never does.

Every result is text for the model and is bounded (these tools are exempt from
eviction, so they must never flood the context). Mistakes the model can fix — a bad
argument, a path it may not read, a missing file, a search that timed out, a tool
that is not available — come back as a one-line ``Error: ...`` text it can act on;
an unknown tool name raises ``ValueError`` (the caller routed a call that is not ours),
and failures of the harness itself (a closed harness, a broken index) raise.
:func:`run_tool` returns the same text with a flag saying whether it is such an error
(the MCP server turns it into a tool error); :func:`call_tool` returns the text alone.
"""

from harnessmem.tools import handlers, schemas
from harnessmem.tools.handlers import *
from harnessmem.tools.schemas import *

__all__ = [*schemas.__all__, *handlers.__all__]
