"""``HarnessSession``: an Agents SDK ``Session`` whose history harnessmem keeps bounded.

The SDK calls a session to load the history before a run and to add each step's items;
its ``RunConfig.call_model_input_filter`` runs before every model call. ``HarnessSession``
is both: the store (the conversation as chat messages in the workspace, at
``sessions/<id>.agents.json``, so it follows the workspace to S3) and the filter (evict and
compact what is sent, append the memory block to the instructions). When the filter
compacts, the stored history is rewritten to the compacted form, so the next run starts
from it and a compaction is summarised once, not once per turn.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import openai
from agents import FunctionTool, RunConfig, RunHooks, Runner
from agents.run import CallModelData, ModelInputData

from harnessmem.layout import SESSIONS_DIR, safe_id
from harnessmem.memory.context import place_memory_block, take_memory_block
from harnessmem_openai_agents.convert import to_chat, to_items

if TYPE_CHECKING:
    from agents import Agent, RunContextWrapper, RunResult, TResponseInputItem
    from agents.items import ModelResponse
    from agents.memory import SessionSettings
    from agents.tool_context import ToolContext

    from harnessmem import MemoryHarness, TurnContext

__all__ = ["HISTORY_SUFFIX", "HarnessSession", "MemoryRunHooks"]

Message = dict[str, Any]
#: The history file of a session: ``sessions/<id>.agents.json``.
HISTORY_SUFFIX = ".agents.json"


class HarnessSession:
    """The Agents SDK ``Session`` protocol over a harnessmem session (same id).

    Pass it as ``session=`` with :meth:`run_config` and :attr:`hooks`, or call :meth:`run`,
    which passes all three and retries once after a context-length error.
    """

    session_settings: SessionSettings | None = None

    def __init__(self, harness: MemoryHarness, session_id: str) -> None:
        self.harness = harness
        self.session_id = session_id
        self.memory = harness.session(session_id)
        self.path = f"{SESSIONS_DIR}/{safe_id(session_id)}{HISTORY_SUFFIX}"
        self._history: list[Message] | None = None
        # (what the SDK sent, as chat; what harnessmem made of it): the SDK keeps adding to
        # its own uncompacted list during a run, so later calls map that prefix again.
        self._rewrite: tuple[list[Message], list[Message]] | None = None
        #: The chat messages the last model call was sent (after eviction and compaction).
        self.sent: list[Message] = []
        #: The last model answer, as chat messages (set by :class:`MemoryRunHooks`).
        self.answer: list[Message] = []

    # the Session protocol ----------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The stored history (the compacted conversation), the last ``limit`` items."""
        items = to_items(self._load())
        return items[-limit:] if limit else items  # type: ignore[return-value]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items``; a compaction made since applies to what is stored."""
        history = to_chat([*to_items(self._load()), *copy.deepcopy(items)])
        self._store(self._rewritten(history))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the last item (the SDK rolls back a failed attempt with it)."""
        items = to_items(self._load())
        if not items:
            return None
        last = items.pop()
        self._store(to_chat(items))
        return last  # type: ignore[return-value]

    async def clear_session(self) -> None:
        """Forget the stored history (the session log and the memory files stay)."""
        self._rewrite = None
        self._store([])

    # the model input filter --------------------------------------------------------------

    async def call_model_input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """Before every model call: evict, compact, add the memory block to the instructions."""
        raw = to_chat(data.model_data.input)
        chat = self._rewritten(raw)
        # The block before_reasoning put in a system message goes to the instructions:
        # the stored history stays free of it, and the instructions hold it once.
        sent, memory = take_memory_block(await self.memory.abefore_reasoning(chat))
        sent = _normal(sent)
        if sent != chat:
            self._rewrite = (raw, sent)
            self._store(self._rewritten(self._load()))
        self.sent = sent
        memory = memory or self.memory.system_context()  # context.inject = "manual"
        instructions = place_memory_block(data.model_data.instructions or "", memory)
        return ModelInputData(input=to_items(sent), instructions=instructions)  # type: ignore[arg-type]

    def run_config(self, base: RunConfig | None = None) -> RunConfig:
        """``base`` (or a default ``RunConfig``) with this session's model input filter."""
        base = base or RunConfig()
        if base.call_model_input_filter is not None:
            raise ValueError(
                "run_config: the RunConfig already has a call_model_input_filter\n"
                "call HarnessSession.call_model_input_filter from yours instead"
            )
        return dataclasses.replace(base, call_model_input_filter=self.call_model_input_filter)

    @property
    def hooks(self) -> MemoryRunHooks:
        """Run hooks that flush the turn when the agent answers."""
        return MemoryRunHooks(self)

    # tools -------------------------------------------------------------------------------

    @property
    def tools(self) -> list[FunctionTool]:
        """The memory tools (memory_search, memory_get, session_search, memory_save)."""
        return [self._memory_tool(schema["function"]) for schema in self.memory.tools]

    def _memory_tool(self, function: Mapping[str, Any]) -> FunctionTool:
        name = function["name"]

        async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
            return self.memory.call_tool(name, arguments)

        return FunctionTool(
            name=name,
            description=function["description"],
            params_json_schema=function["parameters"],
            on_invoke_tool=invoke,
            strict_json_schema=False,
        )

    def evicting(self, tool: FunctionTool) -> FunctionTool:
        """``tool`` with its text output passed through ``after_tool`` (with the SDK's call
        id): a huge output goes to a file and the model gets a preview and the path."""
        invoke_tool = tool.on_invoke_tool

        async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
            output = await invoke_tool(ctx, arguments)
            if not isinstance(output, str):
                return output
            call = {
                "id": ctx.tool_call_id,
                "type": "function",
                "function": {"name": ctx.tool_name, "arguments": arguments},
            }
            return await self.memory.aafter_tool(call, output)

        return dataclasses.replace(tool, on_invoke_tool=invoke)

    # running -----------------------------------------------------------------------------

    async def run(
        self,
        agent: Agent[Any],
        input: str | list[TResponseInputItem],
        *,
        run_config: RunConfig | None = None,
        **kwargs: Any,
    ) -> RunResult:
        """``Runner.run`` with this session, its filter and hooks; after a context-length
        error, the stored history is compacted by force and the turn runs once more."""
        kwargs.setdefault("hooks", self.hooks)
        config = self.run_config(run_config)
        try:
            return await Runner.run(agent, input, session=self, run_config=config, **kwargs)
        except openai.BadRequestError as error:  # "maximum context length ..."
            given = to_chat(
                [{"role": "user", "content": input}] if isinstance(input, str) else input
            )
            stored = self._load()
            await self.recover_overflow(error)
            # The SDK stored the turn's input before the call failed: the history has it.
            again = [] if given and stored[-len(given) :] == _normal(given) else input
            return await Runner.run(agent, again, session=self, run_config=config, **kwargs)

    async def recover_overflow(self, error: BaseException) -> None:
        """Compact the stored history by force after ``error``; re-raise any other error."""
        shorter = _normal(await self.memory.arecover_overflow(self._load(), error))
        self._rewrite = None
        self._store(shorter)

    async def aclose(self) -> TurnContext:
        """End of the conversation: the flush writes what its batching held back."""
        return await self.memory.aclose([*self.sent, *self.answer])

    # storage -----------------------------------------------------------------------------

    def _load(self) -> list[Message]:
        if self._history is None:
            workspace = self.harness.workspace
            text = workspace.read_text(self.path) if workspace.exists(self.path) else "[]"
            self._history = json.loads(text)
        return copy.deepcopy(self._history)

    def _store(self, history: Sequence[Message]) -> None:
        self._history = _normal(history)
        self.harness.workspace.write_text(self.path, json.dumps(self._history, indent=1))

    def _rewritten(self, chat: list[Message]) -> list[Message]:
        if self._rewrite is None:
            return chat
        raw, compacted = self._rewrite
        if chat[: len(raw)] == raw:
            return [*copy.deepcopy(compacted), *chat[len(raw) :]]
        return chat

    def __repr__(self) -> str:
        return f"<HarnessSession {self.session_id!r} of {self.harness.workspace.url}>"


def _normal(chat: Sequence[Message]) -> list[Message]:
    """``chat`` as the converters give it back (only what the SDK can carry)."""
    return to_chat(to_items(chat))


class MemoryRunHooks(RunHooks[Any]):
    """Run hooks that flush the turn into memory when the agent has its final answer.

    Subclass it to add your own hooks (call ``super()`` in the two it uses).
    """

    def __init__(self, session: HarnessSession) -> None:
        self.session = session
        #: What the last flush returned (its ``flush`` result says what was written).
        self.turn: TurnContext | None = None

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        self.session.answer = to_chat(item.model_dump() for item in response.output)

    async def on_agent_end(self, context: RunContextWrapper[Any], agent: Any, output: Any) -> None:
        conversation = [*self.session.sent, *self.session.answer]
        self.turn = await self.session.memory.aafter_call(conversation)
