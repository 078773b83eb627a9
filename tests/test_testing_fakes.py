"""Tests of the shipped fakes: ``ScriptedModel`` and ``FakeOpenAIServer``."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harnessmem.backends.base import ModelBackend
from harnessmem.errors import ContextOverflowError, ModelError, ModelUnavailableError
from harnessmem.testing.openai_server import FakeOpenAIServer, Fault
from harnessmem.testing.scripted import ModelCall, ScriptedModel
from harnessmem.tokens import TokenCounter

MESSAGES = [
    {"role": "system", "content": "You summarise conversations."},
    {"role": "user", "content": "Summarise: the user likes green tea."},
]


# ---------------------------------------------------------------- ScriptedModel


def test_scripted_list_answers_in_order_then_runs_out() -> None:
    model = ScriptedModel(["one", "two"])

    assert [model.complete(MESSAGES, purpose="summary").text for _ in range(2)] == ["one", "two"]
    assert model.remaining == 0
    with pytest.raises(ModelUnavailableError) as caught:
        model.complete(MESSAGES, purpose="flush")

    assert caught.value.message == "ScriptedModel ran out of replies after 2 calls"
    assert len(model.calls) == 3, "the call that found the script empty is recorded too"


def test_scripted_str_answers_every_call() -> None:
    model = ScriptedModel("always")

    texts = {model.complete(MESSAGES, purpose="summary").text for _ in range(5)}

    assert texts == {"always"}
    assert model.remaining is None


def test_scripted_exception_items_are_raised_in_turn() -> None:
    overflow = ContextOverflowError("too long")
    model = ScriptedModel([ModelUnavailableError("down"), overflow, "recovered"])

    with pytest.raises(ModelUnavailableError, match="down"):
        model.complete(MESSAGES, purpose="summary")
    with pytest.raises(ContextOverflowError) as caught:
        model.complete(MESSAGES, purpose="summary")
    assert caught.value is overflow
    assert model.complete(MESSAGES, purpose="summary").text == "recovered"


def test_scripted_callable_sees_a_copy_of_the_messages_and_the_purpose() -> None:
    seen: list[tuple[list[dict[str, Any]], str]] = []

    def reply(messages: list[dict[str, Any]], purpose: str) -> str:
        seen.append((messages, purpose))
        messages.clear()  # must not reach the record or the caller's list
        return f"{purpose}:{len(seen)}"

    model = ScriptedModel(reply)

    assert model.complete(MESSAGES, purpose="flush").text == "flush:1"
    assert model.complete(MESSAGES, purpose="summary").text == "summary:2"
    assert [purpose for _, purpose in seen] == ["flush", "summary"]
    assert model.calls[0].messages == MESSAGES
    assert len(MESSAGES) == 2


def test_scripted_callable_may_raise_or_return_an_exception() -> None:
    def reply(messages: list[dict[str, Any]], purpose: str) -> str | BaseException:
        if purpose == "flush":
            raise ModelUnavailableError("raised by the function")
        if purpose == "summary":
            return ContextOverflowError("returned by the function")
        return "fine"

    model = ScriptedModel(reply)

    with pytest.raises(ModelUnavailableError, match="raised by the function"):
        model.complete(MESSAGES, purpose="flush")
    with pytest.raises(ContextOverflowError, match="returned by the function"):
        model.complete(MESSAGES, purpose="summary")
    assert model.complete(MESSAGES, purpose="consolidation").text == "fine"
    assert len(model.calls) == 3


def test_scripted_callable_returning_a_wrong_type_is_a_type_error() -> None:
    model = ScriptedModel(lambda messages, purpose: 42)  # type: ignore[arg-type,return-value]

    with pytest.raises(TypeError, match="must return a str or an exception instance; got int"):
        model.complete(MESSAGES, purpose="summary")


def test_scripted_fail_with_pauses_the_script() -> None:
    model = ScriptedModel(["first", "second"], fail_with=ModelUnavailableError("outage"))

    for _ in range(2):
        with pytest.raises(ModelUnavailableError, match="outage"):
            model.complete(MESSAGES, purpose="summary")
    model.fail_with = None

    assert model.complete(MESSAGES, purpose="summary").text == "first"
    assert model.remaining == 1
    assert len(model.calls) == 3


def test_scripted_reraised_instance_keeps_a_short_traceback() -> None:
    """Raising one instance again must not stack the tracebacks of earlier raises."""
    model = ScriptedModel("unused", fail_with=ModelUnavailableError("outage"))
    depths = []
    for _ in range(3):
        with pytest.raises(ModelUnavailableError) as caught:
            model.complete(MESSAGES, purpose="summary")
        depths.append(len(caught.traceback))

    assert depths[0] == depths[1] == depths[2]


def test_scripted_records_deep_copies_and_max_tokens() -> None:
    messages = [dict(m) for m in MESSAGES]
    model = ScriptedModel(["a", "b", "c"])

    model.complete(messages, purpose="summary", max_tokens=300)
    messages[1]["content"] = "changed after the call"
    model.complete(messages, purpose="flush")
    model.complete(messages, purpose="summary", max_tokens=50)

    assert model.calls[0] == ModelCall(MESSAGES, "summary", 300)
    assert model.calls[1].max_tokens is None
    assert [c.max_tokens for c in model.calls_for("summary")] == [300, 50]
    assert model.calls_for("consolidation") == []


def test_scripted_completion_reports_usage_like_the_harness_counts_it() -> None:
    model = ScriptedModel("The user likes green tea.", model="fake-4o")

    completion = model.complete(MESSAGES, purpose="summary")

    counter = TokenCounter()
    assert completion.prompt_tokens == counter.count_messages(MESSAGES) > 0
    assert completion.completion_tokens == counter.count_text("The user likes green tea.") > 0
    assert completion.model == "fake-4o"
    assert completion.cost == 0.0


def test_scripted_is_a_model_backend() -> None:
    model = ScriptedModel("x")

    assert isinstance(model, ModelBackend)
    assert ScriptedModel.name == "scripted"
    assert model.model == "scripted"


@pytest.mark.parametrize("reply", [42, ["ok", 3], [None]])
def test_scripted_rejects_a_bad_script(reply: Any) -> None:
    with pytest.raises(TypeError, match="ScriptedModel reply"):
        ScriptedModel(reply)


def test_scripted_hands_out_each_reply_once_across_threads() -> None:
    threads, per_thread = 8, 25
    model = ScriptedModel([f"r{i}" for i in range(threads * per_thread)])
    start = threading.Barrier(threads)
    answers: list[list[str]] = [[] for _ in range(threads)]

    def work(slot: int) -> None:
        start.wait()
        for _ in range(per_thread):
            answers[slot].append(model.complete(MESSAGES, purpose="flush").text)

    workers = [threading.Thread(target=work, args=(slot,)) for slot in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    flat = [text for slot in answers for text in slot]
    assert sorted(flat) == sorted(f"r{i}" for i in range(threads * per_thread))
    assert len(model.calls) == threads * per_thread
    assert model.remaining == 0
    for slot in answers:  # each thread sees the script advance in order
        assert slot == sorted(slot, key=lambda text: int(text[1:]))


def test_scripted_acomplete_answers_in_await_order() -> None:
    model = ScriptedModel(["first", "second", "third"])

    async def main() -> list[str]:
        results = await asyncio.gather(
            *(model.acomplete(MESSAGES, purpose=p) for p in ("summary", "flush", "consolidation"))
        )
        return [r.text for r in results]

    assert asyncio.run(main()) == ["first", "second", "third"]
    assert [c.purpose for c in model.calls] == ["summary", "flush", "consolidation"]


# ---------------------------------------------------------------- FakeOpenAIServer


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    # trust_env off: a proxy variable in the environment must not divert loopback calls.
    with httpx.Client(timeout=5.0, trust_env=False) as http:
        yield http


def chat(
    client: httpx.Client, server: FakeOpenAIServer, path: str = "/chat/completions", **extra: Any
) -> httpx.Response:
    body = {"model": "gpt-4o-mini", "messages": MESSAGES, **extra}
    return client.post(
        server.base_url + path, json=body, headers={"Authorization": "Bearer sk-test"}
    )


def sse_events(response: httpx.Response) -> list[Any]:
    """The ``data:`` payloads of an SSE body, parsed; ``[DONE]`` stays a string."""
    events = []
    for block in response.text.split("\n\n"):
        if block:
            assert block.startswith("data: "), block
            data = block.removeprefix("data: ")
            events.append(data if data == "[DONE]" else json.loads(data))
    return events


TOOL_MESSAGE = {
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "memory_search", "arguments": '{"query": "tea"}'},
        }
    ],
}


def test_server_answers_text_in_openai_shape(client: httpx.Client) -> None:
    with FakeOpenAIServer(["Hello there."]) as server:
        response = chat(client, server)

    assert response.status_code == 200
    payload = response.json()
    assert payload["id"].startswith("chatcmpl-")
    assert payload["object"] == "chat.completion"
    assert isinstance(payload["created"], int)
    assert payload["model"] == "gpt-4o-mini"
    (choice,) = payload["choices"]
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] == "Hello there."
    assert choice["finish_reason"] == "stop"
    usage = payload["usage"]
    assert usage["prompt_tokens"] == TokenCounter().count_messages(MESSAGES)
    assert usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_server_records_requests_with_headers(client: httpx.Client) -> None:
    with FakeOpenAIServer("same") as server:
        chat(client, server, path="/chat/completions", temperature=0)
        client.post(server.url + "/chat/completions", json={"model": "m", "messages": MESSAGES})

    first, second = server.requests
    assert first.path == "/v1/chat/completions"
    assert second.path == "/chat/completions"
    assert first.body["temperature"] == 0
    assert first.messages == MESSAGES
    assert first.authorization == "Bearer sk-test"
    assert second.authorization is None
    assert first.headers["content-type"] == "application/json"


def test_server_answers_tool_calls(client: httpx.Client) -> None:
    with FakeOpenAIServer([TOOL_MESSAGE]) as server:
        payload = chat(client, server).json()

    (choice,) = payload["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["role"] == "assistant"
    assert choice["message"]["content"] is None
    assert choice["message"]["tool_calls"] == TOOL_MESSAGE["tool_calls"]


def test_server_callable_gets_the_request(client: httpx.Client) -> None:
    def reply(request: dict[str, Any]) -> str:
        return f"you said: {request['messages'][-1]['content']}"

    with FakeOpenAIServer(reply) as server:
        payload = chat(client, server).json()

    assert payload["choices"][0]["message"]["content"] == f"you said: {MESSAGES[-1]['content']}"


def test_server_callable_that_raises_answers_500_and_reports_it(client: httpx.Client) -> None:
    def reply(request: dict[str, Any]) -> str:
        raise KeyError("nope")

    with FakeOpenAIServer(reply) as server:
        response = chat(client, server)

    assert response.status_code == 500
    assert "reply function raised KeyError" in response.json()["error"]["message"]
    assert len(server.problems) == 1


def test_server_script_exhausted_answers_500(client: httpx.Client) -> None:
    with FakeOpenAIServer(["only one"]) as server:
        assert chat(client, server).status_code == 200
        response = chat(client, server)

    assert response.status_code == 500
    message = "FakeOpenAIServer: no scripted reply left for request 2"
    assert response.json()["error"]["message"] == message
    assert server.problems == [message]
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("fault", "status", "error_type", "headers"),
    [
        (Fault.rate_limit(retry_after=7), 429, "requests", {"retry-after": "7"}),
        (Fault.server_error(), 500, "server_error", {}),
        (
            Fault.status(503, headers={"X-Why": "maintenance"}),
            503,
            "server_error",
            {"x-why": "maintenance"},
        ),
        (Fault.status(401, "bad key", error_type="auth"), 401, "auth", {}),
    ],
)
def test_server_status_faults(
    client: httpx.Client, fault: Fault, status: int, error_type: str, headers: dict[str, str]
) -> None:
    with FakeOpenAIServer([fault, "after the fault"]) as server:
        response = chat(client, server)
        recovered = chat(client, server)

    assert response.status_code == status
    error = response.json()["error"]
    assert error["type"] == error_type
    assert error["message"]
    for name, value in headers.items():
        assert response.headers[name] == value
    assert recovered.json()["choices"][0]["message"]["content"] == "after the fault"


def test_server_context_length_fault_has_openai_body(client: httpx.Client) -> None:
    with FakeOpenAIServer([Fault.context_length()]) as server:
        response = chat(client, server)

    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": "This model's maximum context length is 128000 tokens. However, your "
            "messages resulted in 130000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def test_fault_status_needs_an_error_code() -> None:
    with pytest.raises(ValueError, match="400-599"):
        Fault.status(200)


def test_server_timeout_fault_holds_until_the_client_gives_up() -> None:
    with (
        FakeOpenAIServer([Fault.timeout(), "late"]) as server,
        httpx.Client(timeout=0.2, trust_env=False) as impatient,
    ):
        with pytest.raises(httpx.ReadTimeout):
            chat(impatient, server)
        # The next request gets a fresh connection and the next reply.
        assert chat(impatient, server).json()["choices"][0]["message"]["content"] == "late"


def test_server_empty_choice_fault(client: httpx.Client) -> None:
    with FakeOpenAIServer([Fault.empty_choice()]) as server:
        response = chat(client, server)

    assert response.status_code == 200
    assert response.json()["choices"] == []


def test_server_malformed_fault(client: httpx.Client) -> None:
    with FakeOpenAIServer([Fault.malformed()]) as server:
        response = chat(client, server)

    assert response.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.text)


def test_server_disconnect_fault(client: httpx.Client) -> None:
    with FakeOpenAIServer([Fault.disconnect(), "back"]) as server:
        with pytest.raises(httpx.RemoteProtocolError):
            chat(client, server)
        assert chat(client, server).json()["choices"][0]["message"]["content"] == "back"


def test_server_streams_text_as_sse(client: httpx.Client) -> None:
    text = "  Green tea,\n\nevery   morning. "
    with FakeOpenAIServer([text]) as server:
        response = chat(client, server, stream=True, stream_options={"include_usage": True})

    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert all(c["model"] == "gpt-4o-mini" for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0]["role"] == "assistant"
    assert "".join(d.get("content") or "" for d in deltas) == text
    assert len(deltas) > 3, "the text should arrive in several pieces"
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "stop"
    assert set(finishes[:-1]) == {None}
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"]["completion_tokens"] > 0


def test_server_streams_tool_calls(client: httpx.Client) -> None:
    with FakeOpenAIServer([TOOL_MESSAGE]) as server:
        response = chat(client, server, stream=True)

    chunks = sse_events(response)[:-1]
    assert all("usage" not in c for c in chunks), "usage only when include_usage is asked"
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for part in chunk["choices"][0]["delta"].get("tool_calls", []):
            call = calls.setdefault(part["index"], {"arguments": ""})
            call.update({k: part[k] for k in ("id", "type") if k in part})
            call["name"] = part["function"].get("name") or call.get("name")
            call["arguments"] += part["function"].get("arguments", "")
    expected = {"id": "call_1", "type": "function", "name": "memory_search"}
    assert calls == {0: {**expected, "arguments": '{"query": "tea"}'}}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("fault", [Fault.empty_choice(), Fault.malformed()])
def test_server_stream_faults_end_the_stream(client: httpx.Client, fault: Fault) -> None:
    with FakeOpenAIServer([fault]) as server:
        response = chat(client, server, stream=True)

    assert response.status_code == 200
    if fault.kind == "empty_choice":
        assert sse_events(response) == [{**sse_events(response)[0], "choices": []}, "[DONE]"]
    else:
        with pytest.raises(json.JSONDecodeError):
            sse_events(response)


def test_server_rejects_bad_requests_without_using_a_reply(client: httpx.Client) -> None:
    with FakeOpenAIServer(["kept"]) as server:
        unknown = client.get(server.base_url + "/models")
        no_messages = client.post(server.base_url + "/chat/completions", json={"model": "m"})
        not_json = client.post(server.base_url + "/chat/completions", content=b"{oops")
        answered = chat(client, server)

    assert unknown.status_code == 404
    assert no_messages.status_code == 400
    assert not_json.status_code == 400
    assert answered.json()["choices"][0]["message"]["content"] == "kept"
    assert [r.method for r in server.requests] == ["GET", "POST", "POST", "POST"]
    assert len(server.problems) == 2


def test_server_close_releases_a_request_held_by_a_timeout_fault() -> None:
    held = threading.Event()

    def reply(request: dict[str, Any]) -> Fault:
        held.set()
        return Fault.timeout(max_wait=60.0)

    server = FakeOpenAIServer(reply)
    port = int(server.url.rsplit(":", 1)[1])
    body = json.dumps({"model": "m", "messages": MESSAGES}).encode()
    head = f"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: {len(body)}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5.0) as waiting:
        waiting.sendall(head.encode() + body)
        assert held.wait(5.0), "the server never asked for a reply"

        server.close()  # must not wait out max_wait

        assert waiting.recv(1) == b"", "the held request should end without an answer"
        alive = [t.name for t in threading.enumerate() if t.name.startswith("FakeOpenAIServer")]
        assert alive == []
    server.close()  # idempotent


def test_server_answers_close_the_connection(client: httpx.Client) -> None:
    """Pooled client sockets would outlive the server and warn in a later test."""
    with FakeOpenAIServer("x") as server:
        plain = chat(client, server)
        streamed = chat(client, server, stream=True)

    assert plain.headers["connection"] == streamed.headers["connection"] == "close"


def test_server_rejects_a_bad_script() -> None:
    with pytest.raises(TypeError, match="reply item 1 is int"):
        FakeOpenAIServer(["ok", 3])  # type: ignore[list-item]


# ---------------------------------------------------------------- litellm, end to end


@pytest.fixture
def litellm() -> Any:
    """litellm, imported offline (its bundled model cost map, no fetch at import)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    return litellm


def test_litellm_gets_scripted_text(litellm: Any) -> None:
    with FakeOpenAIServer(["Scripted hello."]) as server:
        response = litellm.completion(
            model="openai/gpt-4o-mini",
            api_base=server.base_url,
            api_key="sk-test",
            messages=MESSAGES,
            num_retries=0,
        )

    assert response.choices[0].message.content == "Scripted hello."
    assert response.usage.prompt_tokens == TokenCounter().count_messages(MESSAGES)
    (request,) = server.requests
    assert request.body["model"] == "gpt-4o-mini"
    assert request.authorization == "Bearer sk-test"


def test_litellm_streams_scripted_text(litellm: Any) -> None:
    with (
        FakeOpenAIServer(["Streamed words arrive in pieces."]) as server,
        warnings.catch_warnings(),
    ):
        # litellm's stream handler builds a pydantic schema for a TypedDict with
        # ReadOnly items, and pydantic warns about it (litellm 1.110, pydantic 2.x).
        warnings.filterwarnings("ignore", r".*`ReadOnly` qualifier", UserWarning)
        chunks = list(
            litellm.completion(
                model="openai/gpt-4o-mini",
                api_base=server.base_url,
                api_key="sk-test",
                messages=MESSAGES,
                num_retries=0,
                stream=True,
            )
        )

    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == "Streamed words arrive in pieces."
    assert server.requests[0].body["stream"] is True


def test_litellm_raises_context_window_exceeded(litellm: Any) -> None:
    with (
        FakeOpenAIServer([Fault.context_length()]) as server,
        pytest.raises(litellm.ContextWindowExceededError),
    ):
        litellm.completion(
            model="openai/gpt-4o-mini",
            api_base=server.base_url,
            api_key="sk-test",
            messages=MESSAGES,
            num_retries=0,
        )

    assert len(server.requests) == 1, "a context-length error must not be retried"


def test_scripted_model_errors_are_model_errors() -> None:
    """The exhaustion error belongs to the harness's hierarchy, so callers can catch it."""
    model = ScriptedModel([])

    with pytest.raises(ModelError) as caught:
        model.complete(MESSAGES, purpose="summary")

    assert "Script one reply per expected model call" in str(caught.value)


def test_fake_openai_server_answers_embeddings_as_floats_and_base64() -> None:
    import base64
    import struct

    from harnessmem.testing.openai_server import hashed_embedding

    with FakeOpenAIServer([]) as server:
        body = {"model": "text-embedding-3-small", "input": ["walrus ice", "gull"]}
        plain = httpx.post(f"{server.base_url}/embeddings", json=body).json()
        assert [item["index"] for item in plain["data"]] == [0, 1]
        assert plain["data"][0]["embedding"] == hashed_embedding("walrus ice")
        packed = httpx.post(
            f"{server.base_url}/embeddings",
            json={**body, "encoding_format": "base64", "dimensions": 8},
        ).json()["data"][1]["embedding"]
        decoded = struct.unpack("<8f", base64.b64decode(packed))
        assert decoded == pytest.approx(hashed_embedding("gull", 8))
        bad = httpx.post(f"{server.base_url}/embeddings", json={"model": "m", "input": []})
        assert bad.status_code == 400
        assert server.remaining == 0, "embeddings use no scripted reply"
        assert len(server.problems) == 1
