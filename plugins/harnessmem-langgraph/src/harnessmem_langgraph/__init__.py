"""harnessmem for LangGraph.

- :class:`GraphMemory`: a harnessmem session as LangGraph nodes: ``model_node(model)`` (or
  ``pre_model_hook`` before a model node of another's), ``wrap_tool_call`` for ``ToolNode``,
  ``after_turn`` to flush a turn;
- :class:`HarnessStore`: a LangGraph ``BaseStore`` kept in the harness's workspace.
"""

from harnessmem_langgraph.node import GraphMemory
from harnessmem_langgraph.store import HarnessStore

__all__ = ["GraphMemory", "HarnessStore"]
