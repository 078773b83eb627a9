"""harnessmem for the OpenAI Agents SDK.

- :class:`HarnessSession`: the SDK's ``Session`` protocol, backed by a harnessmem session:
  the history stays compacted in the workspace, the model gets the memory block with its
  instructions, and ``tools`` are the memory tools;
- :class:`MemoryRunHooks`: run hooks that flush each turn into the daily log;
- :func:`to_chat` / :func:`to_items`: between SDK input items and OpenAI chat messages.
"""

from harnessmem_openai_agents.convert import to_chat, to_items
from harnessmem_openai_agents.session import HarnessSession, MemoryRunHooks

__all__ = ["HarnessSession", "MemoryRunHooks", "to_chat", "to_items"]
