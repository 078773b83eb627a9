"""Conformance suite for model backends (:class:`harnessmem.backends.base.ModelBackend`).

Subclass :class:`ModelBackendSuite` in a test module (its name must start with ``Test``) and
override one fixture, ``make_model``: a function that takes a *script* and returns a backend
whose next calls behave as the script says. A script item is the text the model should
answer, or a :class:`ModelFault` the model should suffer on that call::

    class TestMyBackend(ModelBackendSuite):
        @pytest.fixture
        def make_model(self):
            def make(script):
                return MyBackend.create({...}, model_name="my-model")   # wired to a fake server
            return make

A backend that computes its answers (the offline ``extractive`` one) cannot be scripted: set
``scriptable = False``; ``make_model`` then gets an empty script and the tests that need
scripted texts or faults skip with the reason. Tests also skip by the capabilities the
backend declares (``ModelBackend.capabilities``): ``retries``, ``deterministic``,
``offline``, ``cost``. Each test's docstring says what to check when it fails.
"""

from __future__ import annotations

import asyncio
import copy
import enum
import socket
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeAlias

import pytest

from harnessmem.backends.base import MODEL_CAPABILITIES, PURPOSES, Completion, ModelBackend
from harnessmem.errors import (
    ConfigError,
    ContextOverflowError,
    ModelResponseError,
    ModelUnavailableError,
)
from harnessmem.prompts import consolidation_request, flush_request, summary_request
from harnessmem.testing._suite import ConformanceSuite

__all__ = ["ModelBackendSuite", "ModelFault", "Script", "job_request"]


class ModelFault(enum.Enum):
    """A failure ``make_model`` must arrange for one call of the script."""

    #: The provider rejects the request as longer than the context window.
    OVERFLOW = "overflow"
    #: Every attempt of the call fails (5xx, connection lost); retries do not help.
    DOWN = "down"
    #: One attempt fails in a way worth retrying (429, 5xx); the next item answers it.
    TRANSIENT = "transient"
    #: The provider answers, but with no text.
    EMPTY = "empty"


Script: TypeAlias = Sequence["str | ModelFault"]
MakeModel: TypeAlias = Callable[[Script], ModelBackend]

_CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "Please remember that my cat is called Miso."},
    {"role": "assistant", "content": "Noted: your cat is Miso."},
    {"role": "user", "content": "We decided to deploy the billing service on Fridays."},
    {
        "role": "assistant",
        "content": "I'll schedule it.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "schedule", "arguments": '{"service": "billing"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "scheduled job JOB-4821 for Friday"},
]


def job_request(purpose: str) -> list[dict[str, Any]]:
    """A small but real request for ``purpose``, built as the harness builds it."""
    if purpose == "summary":
        return summary_request(_CONVERSATION)
    if purpose == "flush":
        return flush_request(_CONVERSATION, memory="- The user lives in Porto.")
    if purpose == "consolidation":
        return consolidation_request(
            "## Facts\n- The user lives in Porto.",
            "## Memory Flush — 2026-01-05T10:00:00Z\n- The user's cat is called Miso.",
            max_tokens=4_000,
        )
    raise ValueError(f"unknown purpose {purpose!r}")


class ModelBackendSuite(ConformanceSuite):
    """The contract every model backend meets; override the ``make_model`` fixture."""

    __harnessmem_suite__: ClassVar[bool] = True
    #: Whether ``make_model`` can make the backend answer scripted texts and faults.
    scriptable: ClassVar[bool] = True

    @pytest.fixture
    def make_model(self) -> MakeModel:
        """Override: a function ``(script) -> ModelBackend`` (see the module docstring)."""
        raise NotImplementedError("override the make_model fixture of ModelBackendSuite")

    # helpers -------------------------------------------------------------------------------

    def _needs_script(self) -> None:
        if not self.scriptable:
            pytest.skip(f"{type(self).__name__} computes its answers; it cannot be scripted")

    @staticmethod
    def _needs(model: ModelBackend, capability: str) -> None:
        if capability not in model.capabilities:
            pytest.skip(f"{type(model).__name__} does not declare the {capability!r} capability")

    def _answer(self, completion: Completion, expected: str) -> None:
        assert isinstance(completion, Completion), f"complete() returned {completion!r}"
        if self.scriptable:
            assert completion.text == expected
        else:
            assert isinstance(completion.text, str)
            assert completion.text.strip()

    # answers -------------------------------------------------------------------------------

    def test_answers_every_purpose_in_text(self, make_model: MakeModel) -> None:
        """Each job gets its answer as ``Completion.text``.

        If this fails, check that ``complete`` accepts ``purpose`` = summary, flush and
        consolidation and returns the model's text (stripped of surrounding whitespace only).
        """
        script = [f"answer for {purpose}" for purpose in PURPOSES]
        model = make_model(script if self.scriptable else [])
        for purpose, expected in zip(PURPOSES, script, strict=True):
            self._answer(model.complete(job_request(purpose), purpose=purpose), expected)

    def test_reports_usage_and_the_model(self, make_model: MakeModel) -> None:
        """A completion says how many tokens it took and which model answered.

        If this fails, fill ``prompt_tokens`` and ``completion_tokens`` from the provider's
        usage (or count them), ``model`` with the answering model's name, and ``cost`` with
        a price (None when unknown; required when the backend declares ``cost``).
        """
        model = make_model(["The user's cat is called Miso."] if self.scriptable else [])
        completion = model.complete(job_request("flush"), purpose="flush")
        assert completion.prompt_tokens > 0
        assert completion.completion_tokens > 0
        assert completion.total_tokens == completion.prompt_tokens + completion.completion_tokens
        assert isinstance(completion.model, str)
        assert completion.model
        assert completion.cost is None or completion.cost >= 0
        if "cost" in model.capabilities:
            assert completion.cost is not None, "a backend declaring 'cost' must price calls"

    def test_leaves_the_messages_unchanged(self, make_model: MakeModel) -> None:
        """The caller's messages are not modified.

        If this fails, copy the messages before adapting them for the provider.
        """
        model = make_model(["ok"] if self.scriptable else [])
        messages = job_request("summary")
        before = copy.deepcopy(messages)
        model.complete(messages, purpose="summary")
        assert messages == before

    def test_accepts_max_tokens(self, make_model: MakeModel) -> None:
        """``max_tokens`` caps the answer and is accepted for every purpose.

        If this fails, accept ``max_tokens=None`` and an int, and pass it to the provider.
        """
        model = make_model(["short"] if self.scriptable else [])
        completion = model.complete(job_request("summary"), purpose="summary", max_tokens=400)
        self._answer(completion, "short")

    def test_async_twin_answers_like_the_sync_call(self, make_model: MakeModel) -> None:
        """``acomplete`` answers like ``complete``.

        If this fails, check ``acomplete`` (the base class runs ``complete`` in a thread;
        an override must return the same ``Completion`` shape).
        """
        model = make_model(["sync answer", "async answer"] if self.scriptable else [])
        sync = model.complete(job_request("flush"), purpose="flush")
        answer = asyncio.run(model.acomplete(job_request("flush"), purpose="flush"))
        self._answer(sync, "sync answer")
        self._answer(answer, "async answer")
        if "deterministic" in model.capabilities:
            assert answer.text == sync.text

    # failures ------------------------------------------------------------------------------

    def test_overflow_raises_context_overflow_error(self, make_model: MakeModel) -> None:
        """A request longer than the window raises ``ContextOverflowError`` (never retried).

        If this fails, map the provider's context-length error to ContextOverflowError
        (``harnessmem.compaction.is_context_overflow`` recognises the usual messages).
        """
        self._needs_script()
        model = make_model([ModelFault.OVERFLOW, "after"])
        with pytest.raises(ContextOverflowError):
            model.complete(job_request("summary"), purpose="summary")
        assert model.complete(job_request("summary"), purpose="summary").text == "after"

    def test_persistent_failure_raises_model_unavailable_error(self, make_model: MakeModel) -> None:
        """A model that keeps failing raises ``ModelUnavailableError`` once retries are spent.

        If this fails, map rate limits, 5xx, timeouts and connection errors to
        ModelUnavailableError after the last retry (not the provider's own exception).
        """
        self._needs_script()
        model = make_model([ModelFault.DOWN, "after"])
        with pytest.raises(ModelUnavailableError):
            model.complete(job_request("flush"), purpose="flush")
        assert model.complete(job_request("flush"), purpose="flush").text == "after"

    def test_transient_failure_is_retried(self, make_model: MakeModel) -> None:
        """One rate limit or 5xx is retried and the call succeeds.

        If this fails, retry transient failures (and wait through the injectable sleep, so
        tests never wait); or drop 'retries' from the declared capabilities.
        """
        self._needs_script()
        self._needs(make_model([]), "retries")
        model = make_model([ModelFault.TRANSIENT, "recovered"])
        completion = model.complete(job_request("consolidation"), purpose="consolidation")
        assert completion.text == "recovered"

    def test_empty_answer_raises_model_response_error(self, make_model: MakeModel) -> None:
        """An answer without text raises ``ModelResponseError``.

        If this fails, check for missing choices and blank text before returning.
        """
        self._needs_script()
        model = make_model([ModelFault.EMPTY])
        with pytest.raises(ModelResponseError):
            model.complete(job_request("summary"), purpose="summary")

    # declared capabilities -----------------------------------------------------------------

    def test_same_request_same_answer(self, make_model: MakeModel) -> None:
        """A deterministic backend answers the same request with the same text.

        If this fails, remove randomness (sets iterated in hash order, clocks) from the
        answer, or drop 'deterministic' from the declared capabilities.
        """
        model = make_model(["same", "same"] if self.scriptable else [])
        self._needs(model, "deterministic")
        for purpose in PURPOSES:
            first = model.complete(job_request(purpose), purpose=purpose).text
            again = model.complete(job_request(purpose), purpose=purpose).text
            assert first == again, purpose

    def test_answers_without_network(
        self, make_model: MakeModel, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """An offline backend answers with every socket connection refused.

        If this fails, find what opens a connection (a tokenizer download, a price-list
        fetch, a telemetry ping), or drop 'offline' from the declared capabilities.
        """
        model = make_model(["offline"] if self.scriptable else [])
        self._needs(model, "offline")

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise OSError("network disabled by ModelBackendSuite")

        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(socket, "create_connection", refuse)
        monkeypatch.setattr(socket, "getaddrinfo", refuse)
        self._answer(model.complete(job_request("flush"), purpose="flush"), "offline")

    def test_declares_known_capabilities(self, make_model: MakeModel) -> None:
        """Capabilities come from the known set, so the suite can act on them.

        If this fails, use names from ``harnessmem.backends.base.MODEL_CAPABILITIES``.
        """
        model = make_model([])
        assert model.capabilities <= MODEL_CAPABILITIES, model.capabilities - MODEL_CAPABILITIES

    def test_unknown_options_are_config_errors(self, make_model: MakeModel) -> None:
        """An unknown option is a ``ConfigError`` naming where it was set.

        If this fails, derive the backend's ``Options`` from ``BackendOptions`` (which
        forbids unknown keys) and validate with ``parse_options``.
        """
        model = make_model([])
        with pytest.raises(ConfigError, match=r"model\.options"):
            type(model).parse_options({"no_such_option_xyz": 1}, where="model.options")

    def test_close_twice_is_harmless(self, make_model: MakeModel) -> None:
        """``close`` releases clients and may be called again.

        If this fails, make ``close`` idempotent.
        """
        model = make_model([])
        model.close()
        model.close()
