"""ModelBackendSuite on ScriptedModel, and checks of the suite itself."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harnessmem.backends.base import ModelBackend
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
