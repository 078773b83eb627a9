"""What a test hands :class:`~harnessmem.testing.FakeOpenAIServer` and gets back: the
replies and faults of its script, and the requests it recorded."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal, TypeAlias

__all__ = ["Fault", "FaultKind", "RecordedRequest", "ServerReply", "is_reply"]

FaultKind: TypeAlias = Literal["status", "timeout", "empty_choice", "malformed", "disconnect"]


@dataclass(frozen=True, slots=True)
class Fault:
    """A failure the server injects instead of a normal answer; build one with a factory."""

    kind: FaultKind
    status_code: int = 200
    error: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    max_wait: float = 30.0

    @classmethod
    def status(
        cls,
        code: int,
        message: str | None = None,
        *,
        error_type: str | None = None,
        error_code: str | None = None,
        param: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Fault:
        """Answer HTTP ``code`` (400-599) with an OpenAI error body.

        ``message`` and ``error_type`` default to what OpenAI sends for the code.
        """
        if not 400 <= code <= 599:
            raise ValueError(f"Fault.status needs an HTTP error code (400-599); got {code}")
        if error_type is None:
            error_type = "server_error" if code >= 500 else "invalid_request_error"
        error = {
            "message": message or _DEFAULT_MESSAGES.get(code) or HTTPStatus(code).phrase,
            "type": error_type,
            "param": param,
            "code": error_code,
        }
        return cls("status", status_code=code, error=error, headers=dict(headers or {}))

    @classmethod
    def rate_limit(cls, retry_after: int | None = 1, message: str | None = None) -> Fault:
        """HTTP 429 as OpenAI sends it; ``retry_after`` seconds go in ``Retry-After``.

        Keep ``retry_after`` small: clients that honour it really wait.
        """
        headers = {} if retry_after is None else {"Retry-After": str(retry_after)}
        return cls.status(
            429,
            message
            or "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1.",
            error_type="requests",
            error_code="rate_limit_exceeded",
            headers=headers,
        )

    @classmethod
    def server_error(cls, message: str | None = None) -> Fault:
        """HTTP 500 with OpenAI's body for an internal error."""
        return cls.status(500, message)

    @classmethod
    def context_length(cls, limit: int = 128_000, requested: int = 130_000) -> Fault:
        """HTTP 400 with OpenAI's exact body for a request over the context window.

        Clients recognise the overflow from this body (litellm raises
        ``ContextWindowExceededError``), so the wording is OpenAI's own.
        """
        return cls.status(
            400,
            f"This model's maximum context length is {limit} tokens. However, your "
            f"messages resulted in {requested} tokens. Please reduce the length of the "
            "messages.",
            error_type="invalid_request_error",
            error_code="context_length_exceeded",
            param="messages",
        )

    @classmethod
    def timeout(cls, max_wait: float = 30.0) -> Fault:
        """Send nothing until the client gives up; hang up after ``max_wait`` or on close."""
        return cls("timeout", max_wait=max_wait)

    @classmethod
    def empty_choice(cls) -> Fault:
        """HTTP 200 whose ``choices`` list is empty."""
        return cls("empty_choice")

    @classmethod
    def malformed(cls) -> Fault:
        """HTTP 200 whose body is cut off mid-JSON."""
        return cls("malformed")

    @classmethod
    def disconnect(cls) -> Fault:
        """Close the connection without sending any response."""
        return cls("disconnect")


_DEFAULT_MESSAGES = {
    500: "The server had an error while processing your request. Sorry about that!",
    503: "The engine is currently overloaded, please try again later.",
}

#: One scripted answer: assistant text, a full assistant message (OpenAI shape,
#: e.g. with ``tool_calls``), or a fault.
ServerReply: TypeAlias = "str | Mapping[str, Any] | Fault"


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the server received, recorded before it was answered."""

    method: str
    path: str
    #: Header names are lower-cased.
    headers: dict[str, str]
    #: The parsed JSON body; ``{}`` when there was none or it was not a JSON object.
    body: dict[str, Any]

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header as sent (the server requires none)."""
        return self.headers.get("authorization")

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages of the body; empty when there are none."""
        messages = self.body.get("messages")
        return messages if isinstance(messages, list) else []


def is_reply(item: object) -> bool:
    """Whether ``item`` may stand in a script: a text, an assistant message or a fault."""
    return isinstance(item, str | Fault | Mapping)
