"""A small reference agent loop with memory, on litellm tool calling.

:class:`Agent` is what ``harnessmem chat`` runs, and the loop docs/integrating.md walks
through: copy it, or the part you need, into your own. It uses the
:class:`~harnessmem.harness.Session` API exactly at its lifecycle points::

    messages = session.before_reasoning(messages)         # before every model call:
                                                          # MEMORY.md into the system message
                                                          # (context.inject = "system")
    reply = litellm.completion(model, messages, tools=session.tools + your tools)
    # context-length error: messages = session.recover_overflow(messages, error); retry once
    output = session.call_tool(name, args)  or  your_tool(**args)
    content = session.after_tool(call, output)            # after every tool call
    session.after_call(messages)                          # end of the user's turn: the flush

Your own tools are plain Python functions wrapped in :class:`Tool` (``Tool.from_function``
builds the JSON schema from the signature and docstring).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harnessmem.errors import ContextOverflowError, ModelError, ModelUnavailableError
from harnessmem.telemetry import names, provider_of, usage_attributes

if TYPE_CHECKING:
    from harnessmem.harness import Session
    from harnessmem.memory.flush import FlushResult

__all__ = ["DEFAULT_INSTRUCTIONS", "Agent", "AgentReply", "Tool"]

Message = dict[str, Any]

DEFAULT_INSTRUCTIONS = (
    "You are a helpful assistant with a long-term memory. What you learned in earlier "
    "conversations is below under MEMORY.md, and more is searchable with memory_search "
    "(memory_get reads the lines it points to; session_search finds raw past messages). "
    "When the user tells you something worth keeping for later (a preference, a decision, a "
    "fact about them or their work), save it with memory_save. Answer briefly."
)

_JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class Tool:
    """A tool the agent may call: an OpenAI function schema and the function behind it.

    ``function`` takes the model's arguments as keyword arguments and returns text (other
    values are sent as JSON).
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    function: Callable[..., Any]

    @classmethod
    def from_function(cls, function: Callable[..., Any], description: str | None = None) -> Tool:
        """A tool from a function: its name, its docstring, and its parameters' annotations
        (``str``, ``int``, ``float``, ``bool``; a parameter without a default is required)."""
        signature = inspect.signature(function)
        hints = inspect.get_annotations(function, eval_str=True)
        properties: dict[str, Any] = {}
        required = []
        for name, parameter in signature.parameters.items():
            properties[name] = {"type": _JSON_TYPES.get(hints.get(name, str), "string")}
            if parameter.default is inspect.Parameter.empty:
                required.append(name)
        text = description or inspect.getdoc(function) or function.__name__
        schema = {"type": "object", "properties": properties, "required": required}
        return cls(function.__name__, text, schema, function)

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


@dataclass(frozen=True)
class AgentReply:
    """What one :meth:`Agent.run` did.

    ``text``: the final answer. ``model_calls``: requests sent (overflow retries included).
    ``tool_calls``: the names of the tools called, in order. ``overflow_retries``: how
    often a context-length error was recovered by a forced compaction (at most once per
    model call). ``flush``: the end-of-turn :class:`~harnessmem.memory.flush.FlushResult`.
    """

    text: str
    model_calls: int = 0
    tool_calls: tuple[str, ...] = ()
    overflow_retries: int = 0
    flush: FlushResult | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    context_messages: int = 0


@dataclass
class _Turn:
    model_calls: int = 0
    overflow_retries: int = 0
    tool_calls: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Agent:
    """A chat agent with memory: one :class:`~harnessmem.harness.Session`, one message list.

    ``model`` is any litellm model name (``openai/gpt-4o-mini``,
    ``anthropic/claude-3-5-haiku-latest``, ``ollama/llama3.1``, ...); ``litellm_options``
    go to every ``litellm.completion`` call (``api_base``, ``api_key``, ``temperature``,
    ``num_retries``, ...). ``max_steps`` bounds the model calls of one turn; past it the
    model is asked to answer without tools.
    """

    def __init__(
        self,
        session: Session,
        model: str,
        *,
        instructions: str = DEFAULT_INSTRUCTIONS,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        max_steps: int = 8,
        **litellm_options: Any,
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.session = session
        self.model = model
        self.instructions = instructions
        self.max_steps = max_steps
        self.options = litellm_options
        self.tools: dict[str, Tool] = {}
        for item in tools:
            tool = item if isinstance(item, Tool) else Tool.from_function(item)
            self.tools[tool.name] = tool
        self._memory_tools = {schema["function"]["name"] for schema in session.tools}
        clash = self._memory_tools & set(self.tools)
        if clash:
            raise ValueError(f"tool names taken by the memory tools: {', '.join(sorted(clash))}")
        #: The conversation as the model sees it (compaction rewrites it).
        self.messages: list[Message] = [{"role": "system", "content": instructions}]
        # The agent's own spans (its model and tool calls) go where the memory layer's go.
        self._telemetry = session.kernel.telemetry

    # the turn --------------------------------------------------------------------------------

    def run(self, text: str) -> AgentReply:
        """One user turn: model and tool calls until the model answers; then the flush."""
        turn = _Turn()
        self._refresh_system()
        self.messages.append({"role": "user", "content": text})
        answer = ""
        steps = 0
        while True:
            last = steps >= self.max_steps
            steps += 1
            self.messages = self.session.before_reasoning(self.messages)
            message = self._complete(turn, tools=not last)
            self.messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                answer = str(message.get("content") or "")
                break
            for call in calls:
                name = call["function"]["name"]
                with self._telemetry.span(
                    f"execute_tool {name}",
                    attributes={
                        names.OPERATION_NAME: "execute_tool",
                        names.TOOL_NAME: name,
                        names.TOOL_CALL_ID: call["id"],
                        "gen_ai.tool.type": "function",
                    },
                ):
                    output = self._run_tool(call)
                    turn.tool_calls.append(name)
                    content = self.session.after_tool(call, output)
                self.messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": content}
                )
        ctx = self.session.after_call(self.messages)
        return AgentReply(
            text=answer,
            model_calls=turn.model_calls,
            tool_calls=tuple(turn.tool_calls),
            overflow_retries=turn.overflow_retries,
            flush=ctx.outcomes.get("flush"),
            prompt_tokens=turn.prompt_tokens,
            completion_tokens=turn.completion_tokens,
            context_messages=len(self.messages),
        )

    def compact(self, focus: str | None = None) -> tuple[int, int]:
        """Compact the conversation now (``/compact``); messages before and after.

        ``focus`` tells the summariser what to keep in particular."""
        before = len(self.messages)
        self.messages = self.session.compact(self.messages, focus=focus)
        return before, len(self.messages)

    def _refresh_system(self) -> None:
        """The instructions at the head of the conversation, with the memory block.

        Under ``context.inject = "system"`` ``before_reasoning`` places the block, fresh
        at every model call; under ``"manual"`` it is read here, once per user turn.
        """
        from harnessmem.memory.context import place_memory_block

        manual = self.session.kernel.settings.context.inject == "manual"
        memory = self.session.system_context() if manual else ""
        system = {"role": "system", "content": place_memory_block(self.instructions, memory)}
        if self.messages and self.messages[0].get("role") == "system":
            self.messages[0] = system
        else:
            self.messages.insert(0, system)

    # the model -------------------------------------------------------------------------------

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The memory tools and the agent's own, as sent to the model."""
        return [*self.session.tools, *(tool.schema for tool in self.tools.values())]

    def _complete(self, turn: _Turn, *, tools: bool) -> Message:
        """One model call; after a context-length error, compact by force and retry once."""
        try:
            return self._call(turn, tools)
        except Exception as exc:
            from harnessmem.backends.overflow import is_context_overflow

            if not is_context_overflow(exc):
                raise _model_error(self.model, exc) from exc
            try:
                self.messages = self.session.recover_overflow(self.messages, exc)
            except Exception as again:
                raise _model_error(self.model, again) from again
            turn.overflow_retries += 1
        try:
            return self._call(turn, tools)
        except Exception as exc:
            raise _model_error(self.model, exc) from exc

    def _call(self, turn: _Turn, tools: bool) -> Message:
        from harnessmem.backends.litellm_backend import import_litellm, no_stray_event_loop

        litellm = import_litellm(quiet=True)
        request: dict[str, Any] = {**self.options, "model": self.model, "messages": self.messages}
        request["tools"] = self.tool_schemas
        if not tools:
            request["tool_choice"] = "none"
        turn.model_calls += 1
        compaction = self.session.last_outcomes.get("compaction")
        with self._telemetry.span(
            f"{names.CHAT} {self.model}",
            kind="client",
            attributes={
                names.OPERATION_NAME: names.CHAT,
                names.PROVIDER_NAME: provider_of(self.model, "litellm"),
                names.REQUEST_MODEL: self.model,
                names.CONVERSATION_ID: self.session.id,
                # The conventions' flag, on the inference after a compaction (true only).
                names.CONVERSATION_COMPACTED: True
                if getattr(compaction, "compacted", False)
                else None,
            },
        ) as span:
            with no_stray_event_loop():
                response = litellm.completion(**request)
            usage = getattr(response, "usage", None)
            prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
            completion = int(getattr(usage, "completion_tokens", 0) or 0)
            span.set_attributes(
                usage_attributes(
                    model=getattr(response, "model", None),
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                )
            )
        turn.prompt_tokens += prompt
        turn.completion_tokens += completion
        return _assistant_message(response, tools)

    # tools -----------------------------------------------------------------------------------

    def _run_tool(self, call: Mapping[str, Any]) -> str:
        """The tool's text for the model; mistakes come back as ``Error: ...`` text."""
        function = call.get("function") or {}
        name = str(function.get("name") or "")
        arguments = function.get("arguments")
        if name in self._memory_tools:
            return self.session.call_tool(name, arguments)
        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(sorted([*self._memory_tools, *self.tools]))
            return f"Error: there is no tool {name!r}; the tools are: {known}."
        try:
            args = json.loads(arguments) if isinstance(arguments, str) and arguments else {}
        except ValueError as exc:
            return f"Error: {name}: the arguments are not valid JSON ({exc})."
        if not isinstance(args, dict):
            return f"Error: {name}: the arguments must be a JSON object."
        try:
            output = tool.function(**args)
        except TypeError as exc:
            return f"Error: {name}: {exc}."
        except Exception as exc:  # the model can often work around a failing tool
            return f"Error: {name} failed: {type(exc).__name__}: {exc}"
        return output if isinstance(output, str) else json.dumps(output, default=str)


def _assistant_message(response: Any, tools: bool) -> Message:
    """The assistant message of a litellm response as a plain OpenAI dict."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise ModelError("the model answered with no choices", hint="try again or another model")
    raw = choices[0].message
    message: Message = {"role": "assistant", "content": getattr(raw, "content", None)}
    calls = []
    for call in (getattr(raw, "tool_calls", None) or []) if tools else []:
        function = call.function
        calls.append(
            {
                "id": call.id,
                "type": "function",
                "function": {"name": function.name, "arguments": function.arguments or "{}"},
            }
        )
    if calls:
        message["tool_calls"] = calls
    elif message["content"] is None:
        message["content"] = ""
    return message


def _model_error(model: str, exc: BaseException) -> Exception:
    """A harnessmem error for a failed model call (litellm's own exceptions mapped)."""
    from harnessmem.backends.overflow import is_context_overflow
    from harnessmem.errors import HarnessMemError

    if isinstance(exc, HarnessMemError):
        return exc
    detail = " ".join(str(exc).split())[:300] or type(exc).__name__
    if is_context_overflow(exc):
        return ContextOverflowError(
            f"{model}: the conversation does not fit the context window even after "
            f"compaction: {detail}",
            hint="lower compaction.trigger_tokens, or use a model with a larger window",
        )
    name = type(exc).__name__
    if name in ("AuthenticationError", "PermissionDeniedError"):
        return ModelUnavailableError(
            f"{model}: {name}: {detail}",
            hint="check the API key (e.g. OPENAI_API_KEY) and the model's access",
        )
    if name in ("NotFoundError", "BadRequestError"):
        return ModelError(
            f"{model}: the request was rejected: {detail}",
            hint="check the model name (provider/model, as litellm spells it)",
        )
    return ModelUnavailableError(
        f"{model}: {name}: {detail}",
        hint="check the network and api_base; the provider may be down or rate-limiting",
    )
