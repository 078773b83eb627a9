"""A deterministic model backend for tests and offline demos.

``ScriptedModel`` answers from a script instead of a network, records every
call it gets, and can be told to fail, so tests can check what the harness
sent to the model and how it copes with failures::

    model = ScriptedModel(["summary one", ModelUnavailableError("down"), "summary two"])
    harness = MemoryHarness.open(tmp_path, model=model)
    ...
    assert model.calls_for("summary")[0].messages[-1]["role"] == "user"
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from harnessmem.backends.base import Completion, ModelBackend, ModelRequest
from harnessmem.errors import ModelUnavailableError

if TYPE_CHECKING:
    from harnessmem.tokens import TokenCounter

__all__ = ["ModelCall", "ReplyFunction", "ScriptedModel", "ScriptedReply"]

#: A reply function gets a deep copy of the messages and the purpose. It returns the
#: text, or an exception instance to raise; it may also raise (e.g. a ``ModelError``).
ReplyFunction: TypeAlias = Callable[[list[dict[str, Any]], str], "str | BaseException"]

#: What ``ScriptedModel`` accepts as its script.
ScriptedReply: TypeAlias = "str | Sequence[str | BaseException] | ReplyFunction"


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call a ``ScriptedModel`` received, failed ones included.

    ``messages`` is a deep copy taken when the call arrived, so later changes
    the caller makes to its own list do not rewrite the record.
    """

    messages: list[dict[str, Any]]
    purpose: str
    max_tokens: int | None


class ScriptedModel(ModelBackend):
    """A ``ModelBackend`` that answers from a script; deterministic and offline.

    ``reply`` is one of:

    - a ``str``: returned for every call;
    - a sequence of items used in order, one per call: a ``str`` is returned,
      an exception instance is raised (so a test can script a failure followed
      by a success). When the items run out, calls raise
      ``ModelUnavailableError("ScriptedModel ran out of replies after N calls")``;
    - a callable ``(messages, purpose) -> str``. It may raise (a ``ModelError``
      subclass simulates a model failure), or return an exception instance,
      which is raised as if it were a scripted item.

    ``fail_with``, when set (here or later, as an attribute), makes every call
    raise it without using up a scripted reply; set it back to ``None`` and the
    script resumes where it stopped. Use it to take the model down at a point
    chosen by the test's logic rather than by a call count.

    Every call, failed or not, is appended to ``calls`` before it is answered.
    ``max_tokens`` is recorded but not enforced. Usage is counted with
    ``harnessmem.tokens.TokenCounter``; cost is always ``0.0``.

    Thread-safe: the cursor and the record are guarded by a lock. A reply
    callable runs outside the lock (so it may block, e.g. on an event a test
    sets) and must be thread-safe itself when the model is shared.
    """

    name: ClassVar[str] = "scripted"
    capabilities: ClassVar[frozenset[str]] = frozenset({"offline"})

    def __init__(
        self,
        reply: ScriptedReply,
        *,
        model: str = "scripted",
        fail_with: BaseException | None = None,
    ) -> None:
        # No options to validate: a script cannot come from a config file.
        super().__init__(self.Options())
        self._fixed: str | None = None
        self._script: tuple[str | BaseException, ...] | None = None
        self._function: ReplyFunction | None = None
        if isinstance(reply, str):
            self._fixed = reply
        elif callable(reply):
            self._function = reply
        elif isinstance(reply, Sequence):
            self._script = tuple(reply)
            for position, item in enumerate(self._script):
                if not isinstance(item, str | BaseException):
                    raise TypeError(
                        f"ScriptedModel reply item {position} is {type(item).__name__}; "
                        "items must be str (returned) or exception instances (raised)"
                    )
        else:
            raise TypeError(
                "ScriptedModel reply must be a str, a list of str/exception items, or a "
                f"callable (messages, purpose) -> str; got {type(reply).__name__}"
            )
        self.model = model
        self.fail_with = fail_with
        self.calls: list[ModelCall] = []
        self._cursor = 0
        self._lock = threading.Lock()
        self._counter: TokenCounter | None = None

    @property
    def remaining(self) -> int | None:
        """Scripted items not used yet; ``None`` for a fixed text or a callable."""
        with self._lock:
            return None if self._script is None else len(self._script) - self._cursor

    def calls_for(self, purpose: str) -> list[ModelCall]:
        """The recorded calls made with ``purpose``, in arrival order."""
        with self._lock:
            return [call for call in self.calls if call.purpose == purpose]

    def _complete(self, request: ModelRequest) -> Completion:
        """Record the call, then answer with the next scripted reply or raise it."""
        messages, purpose = request.messages, request.purpose
        recorded = ModelCall(
            copy.deepcopy([dict(m) for m in messages]), purpose, request.max_tokens
        )
        with self._lock:
            self.calls.append(recorded)
            answer = self._next_answer()
        if answer is None:
            # Only a reply function leaves the answer open; it runs unlocked (see class doc).
            assert self._function is not None
            # Its own copy: a function that edits the messages must not edit the record.
            answer = self._function(copy.deepcopy(recorded.messages), purpose)
            if not isinstance(answer, str | BaseException):
                raise TypeError(
                    "ScriptedModel reply function must return a str or an exception "
                    f"instance; got {type(answer).__name__}"
                )
        if isinstance(answer, BaseException):
            # Scripted instances may be raised again (a fixed fail_with); drop the old
            # traceback so each failure shows only its own frames.
            raise answer.with_traceback(None)
        counter = self._token_counter()
        return Completion(
            text=answer,
            prompt_tokens=counter.count_messages(recorded.messages),
            completion_tokens=counter.count_text(answer),
            model=self.model,
            cost=0.0,
        )

    async def _acomplete(self, request: ModelRequest) -> Completion:
        """Answer on the event loop's thread, not a worker.

        A worker thread would let concurrently awaited calls reach the script in
        any order; answering inline keeps the order the order of the awaits. The
        cost: a reply function that blocks also blocks the event loop.
        """
        return self.complete(
            request.messages, purpose=request.purpose, max_tokens=request.max_tokens
        )

    def _next_answer(self) -> str | BaseException | None:
        """The answer for the call just recorded; ``None`` means ask the function."""
        if self.fail_with is not None:
            return self.fail_with
        if self._fixed is not None:
            return self._fixed
        if self._script is None:
            return None
        if self._cursor >= len(self._script):
            return ModelUnavailableError(
                f"ScriptedModel ran out of replies after {len(self._script)} calls",
                hint="Script one reply per expected model call, or pass a str or a "
                "callable to answer any number of calls.",
            )
        item = self._script[self._cursor]
        self._cursor += 1
        return item

    def _token_counter(self) -> TokenCounter:
        # Imported and built on first use: importing the fakes stays cheap, and
        # usage is measured the way the harness measures it. A race only builds a
        # second, identical counter.
        if self._counter is None:
            from harnessmem.tokens import TokenCounter

            self._counter = TokenCounter()
        return self._counter
