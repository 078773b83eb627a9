"""The litellm backend, end to end through litellm's real HTTP client against FakeOpenAIServer.

No test reaches the network: every request goes to a FakeOpenAIServer on 127.0.0.1, and
retries wait through an injected sleep that only records the delay.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harnessmem import MemoryHarness
from harnessmem.backends.base import ModelBackend
from harnessmem.backends.litellm_backend import LiteLLMBackend, import_litellm
from harnessmem.compaction import is_context_overflow
from harnessmem.errors import (
    ConfigError,
    ContextOverflowError,
    ModelError,
    ModelResponseError,
    ModelUnavailableError,
)
from harnessmem.testing import FakeOpenAIServer, Fault, ModelBackendSuite, ModelFault
from harnessmem.testing.model_suite import Script, job_request
from harnessmem.tokens import TokenCounter

MODEL = "openai/gpt-4o-mini"
MESSAGES = [
    {"role": "system", "content": "Extract facts."},
    {"role": "user", "content": "I prefer green tea."},
]


class Sleeps(list[float]):
    """An injectable sleep that records each delay and returns at once."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.append(seconds)


def make_backend(server: FakeOpenAIServer, sleeps: Sleeps, **options: Any) -> LiteLLMBackend:
    backend = LiteLLMBackend.create(
        {"api_base": server.base_url, "api_key": "sk-test", **options},
        model_name=MODEL,
        max_tokens=512,
        sleep=sleeps,
        asleep=sleeps.asleep,
    )
    return backend


class TestLiteLLMConformance(ModelBackendSuite):
    """The litellm backend against FakeOpenAIServer: scripted texts and injected faults."""

    @pytest.fixture
    def make_model(
        self, servers: Callable[[Any], FakeOpenAIServer]
    ) -> Callable[[Script], ModelBackend]:
        def make(script: Script) -> ModelBackend:
            replies: list[Any] = []
            for item in script:
                if item is ModelFault.OVERFLOW:
                    replies.append(Fault.context_length())
                elif item is ModelFault.DOWN:
                    replies.extend([Fault.server_error()] * 3)  # num_retries 2 + 1
                elif item is ModelFault.TRANSIENT:
                    replies.append(Fault.rate_limit(retry_after=None))
                elif item is ModelFault.EMPTY:
                    replies.append(Fault.empty_choice())
                else:
                    replies.append(item)
            return make_backend(servers(replies), Sleeps())

        return make


# -- the six scenarios of the issue -------------------------------------------------------------


def test_success_returns_text_usage_cost_and_model(
    servers: Callable[[Any], FakeOpenAIServer],
) -> None:
    server = servers(["The user prefers green tea."])
    sleeps = Sleeps()
    completion = make_backend(server, sleeps).complete(MESSAGES, purpose="flush")

    assert completion.text == "The user prefers green tea."
    assert completion.prompt_tokens == TokenCounter().count_messages(MESSAGES)
    assert completion.completion_tokens > 0
    assert completion.model == "gpt-4o-mini"
    assert completion.cost is not None
    assert completion.cost > 0, "gpt-4o-mini is in litellm's bundled price list"
    assert completion.finish_reason == "stop"
    (request,) = server.requests
    assert request.body["model"] == "gpt-4o-mini"
    assert request.body["max_tokens"] == 512
    assert request.body.get("stream") is not True
    assert request.authorization == "Bearer sk-test"
    assert request.messages == MESSAGES
    assert sleeps == []


def test_rate_limit_then_success_waits_as_told(
    servers: Callable[[Any], FakeOpenAIServer],
) -> None:
    server = servers([Fault.rate_limit(retry_after=7), "after the limit"])
    sleeps = Sleeps()

    completion = make_backend(server, sleeps).complete(MESSAGES, purpose="flush")

    assert completion.text == "after the limit"
    assert len(server.requests) == 2
    assert sleeps == [7.0], "Retry-After is honoured (through the injected sleep)"


def test_three_server_errors_make_the_model_unavailable(
    servers: Callable[[Any], FakeOpenAIServer],
) -> None:
    server = servers([Fault.server_error()] * 3 + ["never reached"])
    sleeps = Sleeps()

    with pytest.raises(ModelUnavailableError) as caught:
        make_backend(server, sleeps).complete(MESSAGES, purpose="summary")

    assert len(server.requests) == 3, "default: two retries"
    message = str(caught.value).splitlines()[0]
    assert message.startswith(f"{MODEL} (summary): InternalServerError after 3 attempts")
    assert type(caught.value.__cause__).__name__ == "InternalServerError"
    # Exponential backoff with equal jitter: [0.5, 1] then [1, 2] seconds.
    assert len(sleeps) == 2
    assert 0.5 <= sleeps[0] <= 1.0
    assert 1.0 <= sleeps[1] <= 2.0


def test_a_timeout_is_retried_then_reported(servers: Callable[[Any], FakeOpenAIServer]) -> None:
    server = servers([Fault.timeout(), "late but fine", Fault.timeout()])
    sleeps = Sleeps()
    backend = make_backend(server, sleeps, timeout=1.0, num_retries=1)

    assert backend.complete(MESSAGES, purpose="flush").text == "late but fine"
    backend.options = backend.options.model_copy(update={"num_retries": 0})
    with pytest.raises(ModelUnavailableError, match=r"Timeout after 1 attempt"):
        backend.complete(MESSAGES, purpose="flush")

    assert len(server.requests) == 3
    assert len(sleeps) == 1


def test_context_length_error_is_an_overflow_and_not_retried(
    servers: Callable[[Any], FakeOpenAIServer],
) -> None:
    server = servers([Fault.context_length(), "unused"])
    sleeps = Sleeps()

    with pytest.raises(ContextOverflowError) as caught:
        make_backend(server, sleeps).complete(MESSAGES, purpose="summary")

    assert "maximum context length is 128000 tokens" in str(caught.value)
    assert type(caught.value.__cause__).__name__ == "ContextWindowExceededError"
    assert is_context_overflow(caught.value)
    assert len(server.requests) == 1
    assert sleeps == []


def test_an_empty_choice_is_a_response_error(servers: Callable[[Any], FakeOpenAIServer]) -> None:
    server = servers([Fault.empty_choice(), {"content": "   "}, "unused"])
    backend = make_backend(server, Sleeps())

    with pytest.raises(ModelResponseError, match="answered with no choices"):
        backend.complete(MESSAGES, purpose="flush")
    with pytest.raises(ModelResponseError, match="answered with empty text"):
        backend.complete(MESSAGES, purpose="flush")
    assert len(server.requests) == 2, "empty answers are not retried"


# -- more failures ------------------------------------------------------------------------------


def test_a_malformed_body_is_a_response_error(servers: Callable[[Any], FakeOpenAIServer]) -> None:
    server = servers([Fault.malformed(), "unused"])

    with pytest.raises(ModelResponseError, match="not valid JSON"):
        make_backend(server, Sleeps()).complete(MESSAGES, purpose="flush")
    assert len(server.requests) == 1


def test_a_dropped_connection_is_retried(servers: Callable[[Any], FakeOpenAIServer]) -> None:
    server = servers([Fault.disconnect(), Fault.status(503), "third time lucky"])
    sleeps = Sleeps()

    assert make_backend(server, sleeps).complete(MESSAGES, purpose="flush").text == (
        "third time lucky"
    )
    assert len(sleeps) == 2


@pytest.mark.parametrize(
    ("fault", "error", "text"),
    [
        (Fault.status(401, "Incorrect API key provided"), ModelUnavailableError, "API key"),
        (Fault.status(404, "The model `gpt-9` does not exist"), ModelUnavailableError, "gpt-9"),
        (
            Fault.status(400, "Invalid value for 'temperature': 3 is above the maximum."),
            ModelError,
            "rejected",
        ),
    ],
)
def test_errors_retries_cannot_fix_are_raised_at_once(
    servers: Callable[[Any], FakeOpenAIServer], fault: Fault, error: type[Exception], text: str
) -> None:
    server = servers([fault, "unused"])
    sleeps = Sleeps()

    with pytest.raises(error, match=text) as caught:
        make_backend(server, sleeps).complete(MESSAGES, purpose="flush")

    assert not isinstance(caught.value, ContextOverflowError)
    assert len(server.requests) == 1
    assert sleeps == []


def test_async_calls_retry_through_the_async_sleep(
    servers: Callable[[Any], FakeOpenAIServer],
) -> None:
    server = servers([Fault.server_error(), "async answer"])
    sleeps = Sleeps()
    backend = make_backend(server, sleeps)

    completion = asyncio.run(backend.acomplete(MESSAGES, purpose="consolidation"))

    assert completion.text == "async answer"
    assert len(sleeps) == 1
    assert len(server.requests) == 2


def test_options_reach_the_request(servers: Callable[[Any], FakeOpenAIServer]) -> None:
    server = servers(["ok"])
    backend = make_backend(
        server,
        Sleeps(),
        temperature=0.2,
        extra_headers={"X-Team": "memory"},
        params={"seed": 7},
    )

    backend.complete(MESSAGES, purpose="flush", max_tokens=64)

    (request,) = server.requests
    assert request.body["temperature"] == 0.2
    assert request.body["seed"] == 7
    assert request.body["max_tokens"] == 64
    assert request.headers["x-team"] == "memory"


# -- context-length messages of the providers ---------------------------------------------------

#: Real context-length error texts, as each provider words them.
OVERFLOW_MESSAGES = {
    "openai": "This model's maximum context length is 128000 tokens. However, your messages "
    "resulted in 130000 tokens. Please reduce the length of the messages.",
    "openai (newer models)": "Input tokens exceed the configured limit of 272000 tokens. Your "
    "messages resulted in 280000 tokens. Please reduce the length of the messages.",
    "azure openai": "This model's maximum context length is 8192 tokens. However, you requested "
    "8505 tokens (7505 in the messages, 1000 in the completion). Please reduce the length of "
    "the messages or completion.",
    "anthropic": "prompt is too long: 208310 tokens > 200000 maximum",
    "anthropic (with max_tokens)": "input length and `max_tokens` exceed context limit: "
    "198000 + 8192 > 200000, decrease input length or `max_tokens` and try again",
    "gemini": "The input token count (1234567) exceeds the maximum number of tokens allowed "
    "(1048576).",
    "bedrock": "An error occurred (ValidationException) when calling the InvokeModel "
    "operation: Input is too long for requested model.",
    "bedrock converse": "ValidationException: Too many input tokens. Max input tokens: 8192, "
    "request input token count: 9000",
    "vllm": "This model's maximum context length is 4096 tokens. However, you requested 5000 "
    "tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the "
    "messages or completion.",
    "vllm (newer)": "The decoder prompt (length 5000) is longer than the maximum model length "
    "of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
    "ollama": "the input length exceeds the context length",
    "llama.cpp": "the request exceeds the available context size, try increasing it",
}

NOT_OVERFLOW = [
    "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1.",
    "Incorrect API key provided: sk-test.",
    "The model `gpt-9` does not exist or you do not have access to it.",
    "Invalid value for 'temperature': 3 is above the maximum of 2.",
]


@pytest.mark.parametrize("provider", sorted(OVERFLOW_MESSAGES))
def test_each_providers_context_length_message_is_recognised(provider: str) -> None:
    assert is_context_overflow(RuntimeError(OVERFLOW_MESSAGES[provider]))


@pytest.mark.parametrize("message", NOT_OVERFLOW)
def test_other_errors_are_not_overflows(message: str) -> None:
    assert not is_context_overflow(RuntimeError(message))


def test_provider_messages_through_the_http_client_become_overflows(
    servers: Callable[[Any], FakeOpenAIServer],
) -> None:
    """Each message, sent by a provider as a 400, maps to ContextOverflowError end to end."""
    names = sorted(OVERFLOW_MESSAGES)
    server = servers([Fault.status(400, OVERFLOW_MESSAGES[name]) for name in names])
    backend = make_backend(server, Sleeps())
    for name in names:
        with pytest.raises(ContextOverflowError, match="does not fit the context window"):
            backend.complete(MESSAGES, purpose="summary")
        assert server.requests[-1].messages == MESSAGES, name
    assert len(server.requests) == len(names), "no overflow is retried"


# -- configuration at start ---------------------------------------------------------------------


def test_a_missing_key_is_a_config_error_when_the_harness_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    with pytest.raises(ConfigError) as caught:
        MemoryHarness.open(tmp_path / "ws", model={"name": MODEL})

    first, hint = str(caught.value).splitlines()
    assert first == f"model.name {MODEL!r} needs an API key: OPENAI_API_KEY is not set"
    assert hint == "export OPENAI_API_KEY, or set model.options.api_key"


def test_a_missing_key_of_a_purpose_names_that_purpose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    with pytest.raises(ConfigError, match=r"^model\.flush\.name 'anthropic/claude-3-5-haiku"):
        MemoryHarness.open(
            tmp_path / "ws",
            model={"name": MODEL, "flush": {"name": "anthropic/claude-3-5-haiku-latest"}},
        )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("openi/gpt-4o-mini", r"unknown provider 'openi'\); did you mean 'openai/...'\?"),
        ("gpt-unknown-model", r"no provider in the name"),
    ],
)
def test_an_unknown_provider_is_a_config_error(tmp_path: Path, name: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        MemoryHarness.open(tmp_path / "ws", model={"name": name, "options": {"api_key": "k"}})


def test_litellm_without_a_model_name_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"model\.name is not set"):
        MemoryHarness.open(tmp_path / "ws", model={"backend": "litellm"})


def test_keys_from_the_environment_or_the_machine_are_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.delenv("AWS_ACCESS_KEY_ID", raising=False)
    assert LiteLLMBackend.create({}, model_name=MODEL).model_name == MODEL
    # Bedrock may use the instance role: no variable needed.
    bedrock = "bedrock/anthropic.claude-3-haiku-20240307-v1:0"
    assert LiteLLMBackend.create({}, model_name=bedrock).model_name == bedrock
    monkeypatch.delenv("OPENAI_API_KEY")
    unchecked = LiteLLMBackend.create({"check_environment": False}, model_name=MODEL)
    assert unchecked.model_name == MODEL


# -- start-up: what building the backend and importing litellm cost ---------------------------

# Runs litellm's import in a fresh interpreter where every name lookup fails and is recorded,
# so a price-list fetch shows up as a lookup (and never leaves the machine).
_OFFLINE_IMPORT = """
import os, socket, sys
looked_up = []
def refuse(host, *args, **kwargs):
    looked_up.append(host)
    raise socket.gaierror(socket.EAI_NONAME, "offline test")
socket.getaddrinfo = refuse
from harnessmem.backends.litellm_backend import import_litellm
import_litellm(quiet=True)
print(looked_up, os.environ["LITELLM_LOCAL_MODEL_COST_MAP"], os.environ.get("TIKTOKEN_CACHE_DIR"))
"""


def _clean_env(**values: str | None) -> dict[str, str]:
    dropped = ("LITELLM_", "TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "HARNESSMEM_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update({k: v for k, v in values.items() if v is not None})
    return env


def _run(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )


@pytest.mark.parametrize("value", [None, "", "1", "TRUE"])
def test_litellm_is_imported_without_fetching_the_price_list(value: str | None) -> None:
    """litellm forces its bundled price list only for "true": "1" or "" fetched it, with retry
    warnings on stderr, for seconds."""
    result = _run(_OFFLINE_IMPORT, _clean_env(LITELLM_LOCAL_MODEL_COST_MAP=value))

    assert result.returncode == 0, result.stderr
    looked_up, forced, _ = result.stdout.split()
    assert looked_up == "[]", "no host is looked up at import"
    assert forced == "True"
    assert "cost map" not in result.stderr


@pytest.mark.parametrize("value", ["false", "0", "off"])
def test_a_user_who_wants_the_remote_price_list_keeps_it(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    # litellm as already imported: the import cannot fetch anything, and what is left to
    # check is what import_litellm does to the variable before it imports.
    monkeypatch.setitem(sys.modules, "litellm", types.ModuleType("litellm"))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)  # import_litellm may set it
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", value)
    import_litellm(quiet=True)
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == value
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "")
    import_litellm(quiet=True)
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True", "unset: the bundled list"


def test_importing_litellm_points_tiktoken_at_the_bundled_files(tmp_path: Path) -> None:
    """litellm sets TIKTOKEN_CACHE_DIR only when it first counts tokens itself; from the
    import on, any tiktoken use in the process reads the bundled files, unless the user
    chose a cache dir."""
    unset = _run(_OFFLINE_IMPORT, _clean_env())
    assert unset.returncode == 0, unset.stderr
    bundled = Path(unset.stdout.split()[2])
    assert bundled.parts[-2:] == ("litellm_core_utils", "tokenizers"), "litellm's own copies"
    assert (bundled / "fb374d419588a4632f3f557e76b4b70aebbca790").is_file()

    chosen = _run(_OFFLINE_IMPORT, _clean_env(TIKTOKEN_CACHE_DIR=str(tmp_path)))
    assert chosen.returncode == 0, chosen.stderr
    assert chosen.stdout.split()[2] == str(tmp_path)
    data_gym = _run(_OFFLINE_IMPORT, _clean_env(DATA_GYM_CACHE_DIR=str(tmp_path)))
    assert data_gym.returncode == 0, data_gym.stderr
    assert data_gym.stdout.split()[2] == "None", "DATA_GYM_CACHE_DIR stays the user's choice"


_BUILD = """
import sys
from harnessmem.backends.litellm_backend import LiteLLMBackend
from harnessmem.errors import ConfigError
try:
    LiteLLMBackend.create({{}}, model_name={model!r})
    print("built", "litellm" in sys.modules)
except ConfigError as error:
    print(str(error).splitlines()[0], "|", "litellm" in sys.modules)
"""


@pytest.mark.parametrize(
    ("model", "key", "expected"),
    [
        (
            MODEL,
            None,
            "model.name 'openai/gpt-4o-mini' needs an API key: OPENAI_API_KEY is not set",
        ),
        ("gpt-4o-mini", None, "needs an API key: OPENAI_API_KEY is not set"),
        ("gemini/gemini-2.0-flash", None, "GEMINI_API_KEY or GOOGLE_API_KEY is not set"),
        (MODEL, "sk-test", "built"),
        ("ollama/llama3.1", None, "built"),
        ("bedrock/anthropic.claude-3-haiku-20240307-v1:0", None, "built"),
    ],
)
def test_the_usual_providers_are_checked_without_importing_litellm(
    model: str, key: str | None, expected: str
) -> None:
    """Building the backend neither imports litellm (seconds) nor needs it to tell a missing
    key; the first call imports it."""
    env = _clean_env(OPENAI_API_KEY=key)
    for variable in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "AWS_ACCESS_KEY_ID"):
        if variable != "OPENAI_API_KEY" or key is None:
            env.pop(variable, None)
    result = _run(_BUILD.format(model=model), env)

    assert result.returncode == 0, result.stderr
    assert expected in result.stdout
    assert result.stdout.split()[-1] == "False", "litellm is not imported"


def test_other_names_are_still_checked_by_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"needs an API key: AZURE_API_KEY is not set"):
        LiteLLMBackend.create({}, model_name="azure/my-deployment")


# litellm builds pydantic schemas for TypedDicts with ReadOnly items on some providers'
# paths, and pydantic warns about it (litellm 1.110, pydantic 2.x).
@pytest.mark.filterwarnings(r"ignore:.*`ReadOnly` qualifier:UserWarning")
def test_the_key_table_agrees_with_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """The providers, their key variables and the bare names harnessmem tells without
    litellm are the ones litellm's get_llm_provider and validate_environment report. When
    this fails after a litellm upgrade, update PROVIDER_KEYS in backends/provider_keys.py."""
    from harnessmem.backends.provider_keys import (
        AMBIENT_CREDENTIALS,
        KEY_VARIABLE,
        PROVIDER_KEYS,
        bare_names,
        key_variables,
    )

    litellm = import_litellm(quiet=True)
    every = {v for variables in PROVIDER_KEYS.values() for v in variables}
    for variable in every:
        monkeypatch.delenv(variable, raising=False)
    for provider, variables in PROVIDER_KEYS.items():
        model = f"{provider}/some-model"
        assert litellm.get_llm_provider(model)[1] == provider
        found = litellm.validate_environment(model=model)
        wanted = {k for k in found["missing_keys"] if KEY_VARIABLE.search(k)}
        assert wanted <= set(variables), provider
        assert bool(wanted) == bool(variables), provider
        for variable in variables:
            monkeypatch.setenv(variable, "k")
            again = litellm.validate_environment(model=model)
            assert not [k for k in again["missing_keys"] if KEY_VARIABLE.search(k)], variable
            monkeypatch.delenv(variable)
    bare = bare_names()
    assert bare.get("gpt-4o-mini") == "openai"
    for name in bare:
        resolved = litellm.get_llm_provider(name)[1]
        expected = () if resolved in AMBIENT_CREDENTIALS else PROVIDER_KEYS.get(resolved)
        assert key_variables(name) == expected, name


def test_the_api_key_never_shows_in_the_options_repr() -> None:
    backend = LiteLLMBackend.create({"api_key": "sk-very-secret"}, model_name=MODEL)
    assert "sk-very-secret" not in repr(backend.options)


def test_importing_harnessmem_and_opening_a_default_harness_do_not_import_litellm(
    tmp_path: Path,
) -> None:
    code = (
        "import sys, harnessmem\n"
        "from harnessmem import MemoryHarness\n"
        f"h = MemoryHarness.open({str(tmp_path / 'ws')!r}, maintenance={{'enabled': False}})\n"
        "h.kernel.model_for('flush').complete([{'role': 'user', 'content': 'I like tea.'}],"
        " purpose='flush')\n"
        "h.close()\n"
        "print('litellm' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESSMEM_")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env
    )
    assert result.stdout.strip() == "False", result.stderr


def test_the_job_requests_go_out_as_built(servers: Callable[[Any], FakeOpenAIServer]) -> None:
    server = servers(["- fact"])
    request = job_request("flush")

    make_backend(server, Sleeps()).complete(request, purpose="flush")

    assert server.requests[0].messages == request


def test_models_md_lists_the_providers_checked_without_litellm() -> None:
    """docs/models.md's table of providers and key variables is PROVIDER_KEYS."""
    from harnessmem.backends.provider_keys import PROVIDER_KEYS

    text = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text()
    table = text.partition("| provider prefix | key variable (any one) |")[2].partition("\n\n")[0]
    documented: dict[str, tuple[str, ...]] = {}
    for line in table.splitlines()[2:]:
        providers, variables = (cell.strip() for cell in line.strip("|").split("|"))
        names = re.findall(r"`([^`]+)`", variables)
        for provider in re.findall(r"`([^`]+)`", providers):
            generic = [n.replace("<PROVIDER>", provider.upper()) for n in names[:1]]
            documented[provider] = tuple(generic if "<PROVIDER>" in variables else names)
    assert documented == dict(PROVIDER_KEYS)
