"""The ``litellm`` model backend: any provider litellm speaks (OpenAI, Anthropic, Gemini,
Bedrock, Azure, vLLM, Ollama, ...), with retries, timeouts and errors mapped to harnessmem's.

litellm is imported on the first call, never at ``import harnessmem`` nor when the backend
is built (the import takes seconds). Before it, the backend sets
``LITELLM_LOCAL_MODEL_COST_MAP=True`` (unless the user set it to false) so litellm reads
its bundled price list instead of fetching one, and points ``TIKTOKEN_CACHE_DIR`` at
litellm's bundled BPE files unless the user chose a cache dir. The start-up check of the
key answers from ``provider_keys`` for the usual providers, and asks litellm only for
other names. Requests are plain (not streamed) chat
completions with ``num_retries=0``: this backend retries itself, so the wait between
attempts is injectable (``backend.sleep`` / ``backend.asleep``) and tests never sleep.

Failures map to:

- ``ContextOverflowError``: litellm's ``ContextWindowExceededError``, or any error that
  ``harnessmem.compaction.is_context_overflow`` recognises as a provider's context-length
  message; never retried;
- ``ModelUnavailableError``: rate limits, 5xx, timeouts and connection errors once the
  retries are spent (``options.num_retries``, default 2, exponential backoff with jitter,
  ``Retry-After`` honoured up to ``options.max_backoff``); authentication, permission and
  not-found errors at once (retrying cannot fix them);
- ``ModelResponseError``: an answer with no choices, empty text, a body that is not valid
  JSON, or a content-filter refusal;
- ``ModelError``: any other rejected request (a 400 that is not about length).
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import io
import logging
import os
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, ClassVar, NoReturn, cast

from pydantic import Field, SecretStr

from harnessmem.backends.base import BackendOptions, Completion, ModelBackend, ModelRequest
from harnessmem.backends.overflow import is_context_overflow
from harnessmem.backends.provider_keys import (
    AMBIENT_CREDENTIALS,
    KEY_VARIABLE,
    key_variables,
    missing_key,
)
from harnessmem.errors import (
    ConfigError,
    ContextOverflowError,
    ModelError,
    ModelResponseError,
    ModelUnavailableError,
)
from harnessmem.settings import Seconds

__all__ = [
    "LiteLLMBackend",
    "LiteLLMOptions",
    "import_litellm",
    "key_variables",
    "missing_key",
    "no_stray_event_loop",
]

logger = logging.getLogger("harnessmem.models")

# A provider answer litellm could not parse (it reports it as a 500 with the raw response).
_MALFORMED = re.compile(
    r"Received response|Expecting (?:value|property name)|Unterminated string|JSONDecodeError",
    re.IGNORECASE,
)
# litellm forces its bundled price list only for "true" (any case); anything else, "1" and
# an empty value included, fetches it from GitHub at import: 3 tries, warnings, seconds.
_REMOTE_COST_MAP = frozenset({"false", "0", "no", "off"})


@contextlib.contextmanager
def no_stray_event_loop() -> Iterator[None]:
    """Close the event loop litellm's sync path leaves behind in this thread, if any.

    litellm's service logging calls ``asyncio.get_event_loop()`` from ``completion``; in a
    main thread without a loop that creates one and sets it as current. The next
    ``asyncio.run()`` in the thread replaces it without closing it, and it is collected
    with a ``ResourceWarning``. The thread's loop state is put back as it was.
    """
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    before = getattr(local, "_loop", None)
    set_before = getattr(local, "_set_called", None)
    try:
        yield
    finally:
        created = getattr(local, "_loop", None)
        if before is None and created is not None and not created.is_running():
            with contextlib.suppress(AttributeError):
                local._loop = None  # type: ignore[union-attr]
                if set_before is not None:
                    local._set_called = set_before  # type: ignore[union-attr]
                created.close()


class LiteLLMOptions(BackendOptions):
    """Options of the litellm backend (``model.options``, or ``model.<purpose>.options``)."""

    api_base: str | None = Field(None, description="Base URL of the API (proxies, vLLM, Ollama).")
    api_key: SecretStr | None = Field(
        None, description="API key; unset: the provider's variable (OPENAI_API_KEY, ...)."
    )
    api_version: str | None = Field(None, description="API version (Azure OpenAI).")
    custom_llm_provider: str | None = Field(
        None, description="Provider to use when the model name does not say it."
    )
    timeout: Seconds = Field(60.0, gt=0, description="Seconds one attempt may take.")
    num_retries: int = Field(
        2, ge=0, le=10, description="Retries after a rate limit, 5xx, timeout or lost connection."
    )
    backoff: Seconds = Field(1.0, ge=0, description="Wait before the first retry; doubles.")
    max_backoff: Seconds = Field(
        30.0, ge=0, description="Longest wait between attempts (Retry-After included)."
    )
    temperature: float | None = Field(
        None, ge=0, le=2, description="Sampling temperature; unset: the provider's default."
    )
    extra_headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers added to every request."
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="More keyword arguments for litellm.completion (e.g. top_p, seed).",
    )
    check_environment: bool = Field(
        True,
        description="At start, fail when litellm cannot tell the provider or its key is missing.",
    )
    quiet: bool = Field(
        True,
        description="Turn off litellm's debug banners on stdout (litellm.suppress_debug_info).",
    )


def _local_cost_map() -> None:
    """Make litellm read its bundled price list, unless the user asked for the remote one."""
    value = os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "").strip().lower()
    if value not in _REMOTE_COST_MAP:
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


def import_litellm(quiet: bool) -> Any:
    """litellm, imported offline: no price-list fetch, tiktoken on the bundled BPE files."""
    from harnessmem.tokens import ensure_cache_dir

    _local_cost_map()
    ensure_cache_dir()
    import litellm

    if quiet:
        litellm.suppress_debug_info = True
    return litellm


def _first_line(error: BaseException, limit: int = 300) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _retry_after(error: BaseException) -> float | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None  # an HTTP date: fall back to the backoff


class LiteLLMBackend(ModelBackend):
    """A chat model reached through litellm; serves when ``model.name`` is set."""

    name: ClassVar[str] = "litellm"
    Options: ClassVar[type[BackendOptions]] = LiteLLMOptions
    capabilities: ClassVar[frozenset[str]] = frozenset({"retries", "cost"})

    options: LiteLLMOptions

    def __init__(self, options: BackendOptions, **context: Any) -> None:
        super().__init__(options, **context)
        where = str(context.get("where") or "model")
        if not self.model_name:
            raise ConfigError(
                f"{where}.name is not set: the litellm backend needs a model name",
                hint="set model.name, e.g. 'openai/gpt-4o-mini', or leave model.backend unset "
                "to use the offline extractive backend",
            )
        self.where = where
        #: Called with the seconds to wait between attempts; replace it in tests.
        sleep, asleep = context.get("sleep"), context.get("asleep")
        self.sleep: Callable[[float], None] = time.sleep if sleep is None else sleep
        #: The async twin of ``sleep``.
        self.asleep: Callable[[float], Awaitable[None]] = (
            asyncio.sleep if asleep is None else asleep
        )
        self.random = random.Random()
        self._module: Any = None
        if self.options.check_environment:
            self._check_environment()

    @property
    def _litellm(self) -> Any:
        """litellm, imported on the first call: a harness that never calls pays nothing."""
        if self._module is None:
            self._module = import_litellm(self.options.quiet)
        return self._module

    # -- configuration -------------------------------------------------------------------------

    def _check_environment(self) -> None:
        """One-line ``ConfigError`` for an unknown provider or a missing key; no network.

        The usual providers are checked without importing litellm; other names by litellm.
        """
        options = self.options
        key = options.api_key.get_secret_value() if options.api_key else None
        variables = key_variables(
            str(self.model_name),
            custom_llm_provider=options.custom_llm_provider,
            api_base=options.api_base,
        )
        if variables is None:
            self._check_with_litellm(key)
        elif not key and missing_key(variables):
            self._missing_key(variables)

    def _check_with_litellm(self, key: str | None) -> None:
        litellm, model, options = self._litellm, self.model_name, self.options
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                _, provider, _, _ = litellm.get_llm_provider(
                    model,
                    custom_llm_provider=options.custom_llm_provider,
                    api_base=options.api_base,
                    api_key=key,
                )
        except Exception:
            prefix = str(model).split("/", 1)[0] if "/" in str(model) else None
            known = [str(getattr(p, "value", p)) for p in litellm.provider_list]
            close = difflib.get_close_matches(prefix or "", known, n=1)
            guess = f"; did you mean '{close[0]}/...'?" if close else ""
            what = f"unknown provider {prefix!r}" if prefix else "no provider in the name"
            raise ConfigError(
                f"{self.where}.name {model!r}: litellm cannot tell the provider ({what}){guess}",
                hint="prefix the name with a litellm provider, e.g. 'openai/gpt-4o-mini' or "
                "'anthropic/claude-3-5-haiku-latest', or set "
                f"{self.where}.options.custom_llm_provider",
            ) from None
        if key or provider in AMBIENT_CREDENTIALS:
            return
        found = litellm.validate_environment(
            model=model, api_key=key, api_base=options.api_base, api_version=options.api_version
        )
        missing = [k for k in found.get("missing_keys", []) if KEY_VARIABLE.search(k)]
        if missing and not found.get("keys_in_environment"):
            self._missing_key(tuple(missing))

    def _missing_key(self, variables: tuple[str, ...]) -> NoReturn:
        raise ConfigError(
            f"{self.where}.name {self.model_name!r} needs an API key: "
            f"{' or '.join(variables)} is not set",
            hint=f"export {variables[0]}, or set {self.where}.options.api_key",
        )

    # -- calls -----------------------------------------------------------------------------------

    def _arguments(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``litellm.completion`` for ``request``."""
        options, max_tokens = self.options, request.max_tokens
        arguments: dict[str, Any] = {
            **options.params,
            "model": self.model_name,
            "messages": [dict(m) for m in request.messages],
            "timeout": options.timeout,
            "num_retries": 0,
            "max_retries": 0,
        }
        limit = max_tokens if max_tokens is not None else self.context.get("max_tokens")
        optional = {
            "max_tokens": limit,
            "api_base": options.api_base,
            "api_key": options.api_key.get_secret_value() if options.api_key else None,
            "api_version": options.api_version,
            "custom_llm_provider": options.custom_llm_provider,
            "temperature": options.temperature,
            "extra_headers": dict(options.extra_headers) or None,
        }
        arguments.update({k: v for k, v in optional.items() if v is not None})
        return arguments

    def _complete(self, request: ModelRequest) -> Completion:
        """One chat completion, retried on transient failures; see the module doc for errors."""
        arguments = self._arguments(request)
        for attempt in range(self.options.num_retries + 1):
            try:
                with no_stray_event_loop():
                    response = self._litellm.completion(**arguments)
            except Exception as exc:
                self.sleep(self._failure(exc, attempt, request.purpose))
                continue
            return self._completion(response, request.purpose)
        raise AssertionError("unreachable: the last attempt raises or returns")  # pragma: no cover

    async def _acomplete(self, request: ModelRequest) -> Completion:
        """Async twin of :meth:`_complete` (``litellm.acompletion``, waits with ``asleep``)."""
        arguments = self._arguments(request)
        for attempt in range(self.options.num_retries + 1):
            try:
                response = await self._litellm.acompletion(**arguments)
            except Exception as exc:
                await self.asleep(self._failure(exc, attempt, request.purpose))
                continue
            return self._completion(response, request.purpose)
        raise AssertionError("unreachable: the last attempt raises or returns")  # pragma: no cover

    # -- answers and failures --------------------------------------------------------------------

    def _completion(self, response: Any, purpose: str) -> Completion:
        who = f"{self.model_name} ({purpose})"
        choices = getattr(response, "choices", None)
        if not choices:
            raise ModelResponseError(
                f"{who} answered with no choices",
                hint="the provider returned an empty answer; try again or another model",
            )
        choice = choices[0]
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None)
        finish = getattr(choice, "finish_reason", None)
        if not isinstance(text, str) or not text.strip():
            raise ModelResponseError(
                f"{who} answered with empty text (finish_reason={finish!r})",
                hint="a content filter or a too-small max_tokens can cause this",
            )
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        return Completion(
            text=text.strip(),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            model=str(getattr(response, "model", None) or self.model_name),
            cost=self._cost(response),
            finish_reason=str(finish) if finish is not None else None,
            cache_read_tokens=_cached_tokens(usage),
        )

    def _cost(self, response: Any) -> float | None:
        hidden = getattr(response, "_hidden_params", None) or {}
        cost = hidden.get("response_cost") if isinstance(hidden, Mapping) else None
        if cost is None:
            try:
                cost = self._litellm.completion_cost(completion_response=response)
            except Exception:  # the price list does not know the model
                return None
        try:
            return float(cast("float", cost))
        except (TypeError, ValueError):
            return None

    def _failure(self, error: Exception, attempt: int, purpose: str) -> float:
        """Raise the mapped error, or return how long to wait before the next attempt."""
        litellm = self._litellm
        who = f"{self.model_name} ({purpose})"
        detail = _first_line(error)
        if isinstance(error, litellm.ContextWindowExceededError) or is_context_overflow(error):
            raise ContextOverflowError(
                f"{who}: the request does not fit the context window: {detail}",
                hint="compact the conversation, or route this purpose to a model with a "
                "larger window",
            ) from error
        if isinstance(error, litellm.ContentPolicyViolationError):
            raise ModelResponseError(f"{who}: refused by a content filter: {detail}") from error
        if _MALFORMED.search(str(error)) and not isinstance(error, litellm.Timeout):
            raise ModelResponseError(
                f"{who}: the answer is not valid JSON: {detail}",
                hint="a proxy may have cut the response; check model.options.api_base",
            ) from error
        fatal = (litellm.AuthenticationError, litellm.PermissionDeniedError, litellm.NotFoundError)
        if isinstance(error, fatal):
            raise ModelUnavailableError(
                f"{who}: {type(error).__name__}: {detail}",
                hint="check the API key, the model name and the account's access to the model",
            ) from error
        transient = (
            litellm.RateLimitError,
            litellm.Timeout,
            litellm.APIConnectionError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
            litellm.BadGatewayError,
        )
        status = getattr(error, "status_code", None)
        retriable = isinstance(error, transient) or (isinstance(status, int) and status >= 500)
        if not retriable:
            raise ModelError(
                f"{who}: the request was rejected: {detail}",
                hint="check model.options and the messages the harness sent",
            ) from error
        attempts = attempt + 1
        if attempts > self.options.num_retries:
            raise ModelUnavailableError(
                f"{who}: {type(error).__name__} after {attempts} attempt"
                f"{'s' if attempts > 1 else ''}: {detail}",
                hint="the provider is down or rate-limiting; raise model.options.num_retries "
                "or model.options.timeout, or route this purpose to another model",
            ) from error
        delay = self._delay(attempt, _retry_after(error))
        logger.info(
            "%s failed (%s); retry %d of %d in %.1fs",
            who,
            type(error).__name__,
            attempts,
            self.options.num_retries,
            delay,
        )
        return delay

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with equal jitter; a server's Retry-After wins, both capped."""
        cap = self.options.max_backoff
        if retry_after is not None:
            return min(retry_after, cap)
        base = min(cap, self.options.backoff * (2**attempt))
        return float(base / 2 + self.random.uniform(0, base / 2))


def _cached_tokens(usage: Any) -> int:
    """Prompt tokens served from the provider's cache: OpenAI's
    ``prompt_tokens_details.cached_tokens``, Anthropic's ``cache_read_input_tokens``
    (litellm passes both through); 0 when the provider reports neither."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None)
    if cached is None:
        cached = getattr(usage, "cache_read_input_tokens", None)
    try:
        return max(0, int(cached or 0))
    except (TypeError, ValueError):
        return 0
