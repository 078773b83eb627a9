"""ModelBackendSuite on ScriptedModel, checks of the suite itself, and of what the
ModelBackend base class does for a backend (checks, then ``_complete``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from harnessmem.backends.base import Completion, ModelBackend, ModelRequest
from harnessmem.errors import ContextOverflowError, ModelResponseError, ModelUnavailableError
from harnessmem.testing import (
    ModelBackendSuite,
    ModelFault,
    ScriptedModel,
    suite_integrity_problems,
    suite_override,
)
from harnessmem.testing.model_suite import Script, job_request

_FAULTS: dict[ModelFault, BaseException] = {
    ModelFault.OVERFLOW: ContextOverflowError("scripted: the request does not fit"),
    ModelFault.DOWN: ModelUnavailableError("scripted: the model is down"),
    ModelFault.EMPTY: ModelResponseError("scripted: empty answer"),
}


class TestScriptedModelConformance(ModelBackendSuite):
    """ScriptedModel keeps the contract: texts in order, faults raised as the mapped errors."""

    @pytest.fixture
    def make_model(self) -> Callable[[Script], ModelBackend]:
        def make(script: Script) -> ModelBackend:
            # ScriptedModel has no retries: TRANSIENT is never asked for (capability skip).
            items = [_FAULTS[item] if isinstance(item, ModelFault) else item for item in script]
            return ScriptedModel(items)

        return make


def test_the_scripted_conformance_class_is_intact() -> None:
    assert suite_integrity_problems(TestScriptedModelConformance) == []


def test_a_silently_replaced_suite_test_is_reported() -> None:
    class Weakened(ModelBackendSuite):
        def test_empty_answer_raises_model_response_error(self) -> None:  # type: ignore[override]
            pass

    (problem,) = suite_integrity_problems(Weakened)
    assert "test_empty_answer_raises_model_response_error" in problem
    assert "without @suite_override" in problem


def test_a_marked_replacement_is_accepted() -> None:
    class Replaced(ModelBackendSuite):
        @suite_override("this backend reports empty answers as NO_REPLY on purpose")
        def test_empty_answer_raises_model_response_error(self) -> None:  # type: ignore[override]
            pass

    assert suite_integrity_problems(Replaced) == []


@pytest.mark.parametrize("purpose", ["summary", "flush", "consolidation"])
def test_job_requests_follow_the_prompt_contract(purpose: str) -> None:
    from harnessmem.prompts import read_blocks

    messages = job_request(purpose)
    assert [m["role"] for m in messages] == ["system", "user"]
    blocks = read_blocks(messages)
    expected = {
        "summary": {"conversation"},
        "flush": {"conversation", "memory_md"},
        "consolidation": {"memory_md", "daily_logs"},
    }[purpose]
    assert set(blocks) == expected


def test_job_request_rejects_an_unknown_purpose() -> None:
    with pytest.raises(ValueError, match="unknown purpose"):
        job_request("poetry")


class _OldStyle(ModelBackend):
    """A backend written before ``_complete``: it overrides ``complete`` itself."""

    def complete(self, messages, *, purpose, max_tokens=None):  # type: ignore[no-untyped-def]
        return Completion(f"{purpose} {max_tokens}", 1, 1, "old")


def test_a_backend_that_overrides_complete_still_answers_both_ways() -> None:
    model = _OldStyle(ModelBackend.Options())
    assert model.complete([], purpose="flush", max_tokens=5).text == "flush 5"
    # acomplete's default reaches the overridden complete, not the missing _complete.
    assert asyncio.run(model.acomplete([], purpose="summary")).text == "summary None"


def test_a_backend_without_complete_is_refused_when_built() -> None:
    class Empty(ModelBackend):
        pass

    with pytest.raises(TypeError, match=r"Empty without a _complete method"):
        Empty(ModelBackend.Options())


def test_the_base_checks_the_purpose_before_the_backend_sees_it() -> None:
    model = ScriptedModel("text")
    with pytest.raises(ValueError, match="unknown model purpose 'poetry'"):
        model.complete([], purpose="poetry")
    with pytest.raises(ValueError, match="unknown model purpose 'poetry'"):
        asyncio.run(model.acomplete([], purpose="poetry"))
    assert model.calls == []


def test_complete_hands_the_backend_one_request() -> None:
    seen: list[ModelRequest] = []

    class Recording(ModelBackend):
        def _complete(self, request: ModelRequest) -> Completion:
            seen.append(request)
            return Completion("ok", 1, 1, "rec")

    model = Recording(ModelBackend.Options())
    messages = [{"role": "user", "content": "hi"}]
    model.complete(messages, purpose="flush", max_tokens=7)
    asyncio.run(model.acomplete(messages, purpose="summary"))
    assert seen == [ModelRequest(messages, "flush", 7), ModelRequest(messages, "summary", None)]
