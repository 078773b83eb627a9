"""``GraphMemory``: a harnessmem session at the points of a LangGraph agent.

- :meth:`GraphMemory.model_node` is the model node of a ``StateGraph``: the thread passes
  through ``before_reasoning`` (evict, compact), ``MEMORY.md`` goes into the system message,
  a context-length error compacts by force and retries once, and when compaction rewrote the
  thread the stored messages are replaced by the compacted ones;
- :meth:`GraphMemory.pre_model_hook` does the same before a model node that is not yours
  (``create_react_agent(pre_model_hook=...)``): it returns the messages to send as
  ``llm_input_messages``;
- :meth:`GraphMemory.wrap_tool_call` is ``ToolNode(wrap_tool_call=...)``: the memory tools
  run in the session and every output passes through ``after_tool`` with the call's id;
- :meth:`GraphMemory.after_turn` flushes a finished turn's state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    BaseMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from harnessmem.memory.context import place_memory_block, take_memory_block

if TYPE_CHECKING:
    from langchain_core.language_models import LanguageModelInput
    from langchain_core.runnables import Runnable
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.types import Command

    from harnessmem import Session, TurnContext

__all__ = ["GraphMemory"]

State = Mapping[str, Any]


class GraphMemory:
    """The lifecycle points of one harnessmem session, as LangGraph nodes and wrappers."""

    def __init__(self, session: Session, instructions: str = "") -> None:
        self.session = session
        self.instructions = instructions

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The memory tools' OpenAI schemas, for ``model.bind_tools([*memory.tools, ...])``."""
        return self.session.tools

    @property
    def tool_names(self) -> set[str]:
        return {schema["function"]["name"] for schema in self.session.tools}

    def system_message(self, memory: str | None = None) -> SystemMessage:
        """The instructions and the memory block: ``memory`` (the one ``before_reasoning``
        placed), or as read now."""
        block = self.session.system_context() if memory is None else memory
        return SystemMessage(place_memory_block(self.instructions, block))

    def _prepare(self, state: State) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
        """The thread, what to send of it, and the memory block for the system message.

        The block ``before_reasoning`` put in a system message (``context.inject =
        "system"``) goes to the node's own system message, never into the graph's state;
        with ``"manual"`` it is read here.
        """
        thread = _openai(state["messages"])
        sent, memory = take_memory_block(self.session.before_reasoning(thread))
        return thread, sent, memory or self.session.system_context()

    @staticmethod
    def _update(thread: list[dict[str, Any]], sent: list[dict[str, Any]]) -> list[BaseMessage]:
        """The state update that replaces the thread by ``sent`` (nothing when unchanged)."""
        if sent == thread:
            return []
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *convert_to_messages(sent)]

    def pre_model_hook(self, state: State) -> dict[str, Any]:
        """A node before the model node: ``llm_input_messages`` is what to send."""
        thread, sent, memory = self._prepare(state)
        update: dict[str, Any] = {
            "llm_input_messages": [self.system_message(memory), *convert_to_messages(sent)]
        }
        if rewrite := self._update(thread, sent):
            update["messages"] = rewrite
        return update

    def model_node(
        self, model: Runnable[LanguageModelInput, BaseMessage]
    ) -> Callable[[State], dict[str, Any]]:
        """The model node of a ``MessagesState`` graph, calling ``model`` (tools bound)."""

        def call_model(state: State) -> dict[str, Any]:
            thread, sent, memory = self._prepare(state)
            system = self.system_message(memory)
            try:
                reply = model.invoke([system, *convert_to_messages(sent)])
            except Exception as error:  # recover_overflow re-raises all but a context overflow
                sent = self.session.recover_overflow(sent, error)
                reply = model.invoke([system, *convert_to_messages(sent)])
            return {"messages": [*self._update(thread, sent), reply]}

        return call_model

    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        execute: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the memory tools in the session; pass every text output through ``after_tool``."""
        call = request.tool_call
        if call["name"] in self.tool_names:
            output = self.session.call_tool(call["name"], call["args"])
        else:
            result = execute(request)
            if not isinstance(result, ToolMessage) or not isinstance(result.content, str):
                return result  # a Command, or content that is not text: as the tool gave it
            output = result.content
        function = {"name": call["name"], "arguments": json.dumps(call["args"])}
        content = self.session.after_tool({"id": call["id"], "function": function}, output)
        return ToolMessage(content, tool_call_id=call["id"], name=call["name"])

    def after_turn(self, state: State) -> TurnContext:
        """End of the user's turn: flush the new facts of ``state["messages"]``."""
        return self.session.after_call(_openai(state["messages"]))

    def close(self, state: State | None = None) -> TurnContext:
        """End of the conversation: the flush writes what its batching held back."""
        return self.session.close(_openai(state["messages"]) if state else None)


def _openai(messages: Sequence[Any]) -> list[dict[str, Any]]:
    return list(convert_to_openai_messages(messages))
