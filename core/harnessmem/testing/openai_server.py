"""A loopback HTTP server that speaks the OpenAI chat completions API.

``FakeOpenAIServer`` lets tests drive a real HTTP client (litellm, the openai
SDK, httpx) against scripted replies and injected faults, with no network::

    with FakeOpenAIServer(["hello", Fault.rate_limit(), "again"]) as server:
        litellm.completion(model="openai/gpt-4o-mini", api_base=server.base_url,
                           api_key="sk-test", messages=[...])
        assert server.requests[0].body["model"] == "gpt-4o-mini"

It answers ``POST /v1/chat/completions`` and ``POST /chat/completions``, plain
or streamed (server-sent events when the request says ``"stream": true``), and
``POST /v1/embeddings`` (``/embeddings``): each input gets the vector ``embed(text)``
gives, by default :func:`hashed_embedding` (words hashed into ``dimensions`` buckets, so
texts sharing words are close), as floats or base64 as the request's
``encoding_format`` asks. Embedding requests are recorded but use no scripted reply.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import itertools
import json
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from harnessmem.testing.openai_script import Fault, RecordedRequest, ServerReply, is_reply
from harnessmem.testing.openai_wire import (
    EMBEDDING_DIMENSIONS,
    assistant_message,
    finish_reason,
    hashed_embedding,
    include_usage,
    parse_body,
    pieces,
    request_problem,
)

if TYPE_CHECKING:
    from harnessmem.tokens import TokenCounter

__all__ = ["FakeOpenAIServer", "Fault", "RecordedRequest", "ServerReply", "hashed_embedding"]

_CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
_EMBEDDING_PATHS = frozenset({"/v1/embeddings", "/embeddings"})

#: How long ``close()`` waits for a connection's thread after hanging up on it.
_JOIN_TIMEOUT = 5.0


class FakeOpenAIServer:
    """An OpenAI-compatible chat server on ``127.0.0.1`` answering from a script.

    ``replies`` is a single ``str`` (answered every time), a sequence of
    ``ServerReply`` items used in order, one per chat request, or a callable
    ``(request_json) -> ServerReply``. When the sequence runs out, the server
    answers 500 with "FakeOpenAIServer: no scripted reply left for request N".

    Every request is appended to ``requests``. Requests the script could not
    answer properly (script exhausted, reply function raised, malformed
    request) are also described in ``problems``, so a test can assert that
    none happened even when the client under test swallows the 500.

    The server starts listening on construction; use it as a context manager
    or call ``close()``, which also releases clients blocked on a timeout fault.
    """

    def __init__(
        self,
        replies: str | Sequence[ServerReply] | Callable[[dict[str, Any]], ServerReply],
        *,
        embed: Callable[[str, int], Sequence[float]] = hashed_embedding,
    ) -> None:
        #: ``(text, dimensions) -> vector`` for the embeddings endpoint.
        self.embed = embed
        self._fixed: str | None = None
        self._script: tuple[ServerReply, ...] | None = None
        self._function: Callable[[dict[str, Any]], ServerReply] | None = None
        if isinstance(replies, str):
            self._fixed = replies
        elif callable(replies):
            self._function = replies
        elif isinstance(replies, Sequence):
            self._script = tuple(replies)
            for position, item in enumerate(self._script):
                if not is_reply(item):
                    raise TypeError(
                        f"FakeOpenAIServer reply item {position} is {type(item).__name__}; "
                        "items must be str, an assistant message dict, or a Fault"
                    )
        else:
            raise TypeError(
                "FakeOpenAIServer replies must be a str, a list of replies, or a callable "
                f"(request_json) -> reply; got {type(replies).__name__}"
            )
        self.requests: list[RecordedRequest] = []
        self.problems: list[str] = []
        self._lock = threading.Lock()
        self._cursor = 0
        self._chat_requests = 0
        self._ids = itertools.count(1)
        self._counter: TokenCounter | None = None
        self._closing = threading.Event()
        self._closed = False
        self._httpd = _LoopbackServer(self)
        port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{port}"
        self.base_url = f"{self.url}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            # Bounds how long close() waits for the accept loop to notice.
            kwargs={"poll_interval": 0.05},
            name=f"FakeOpenAIServer:{port}",
            daemon=True,
        )
        self._thread.start()

    def __enter__(self) -> FakeOpenAIServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<FakeOpenAIServer {self.base_url} requests={len(self.requests)}>"

    @property
    def remaining(self) -> int | None:
        """Scripted replies not used yet; ``None`` for a fixed text or a callable."""
        with self._lock:
            return None if self._script is None else len(self._script) - self._cursor

    def close(self) -> None:
        """Stop serving, hang up on open connections and join every thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._closing.set()  # wakes handlers parked on a timeout fault
        self._httpd.shutdown()
        # A connection that has sent no complete request (or is parked on a timeout
        # fault) holds its thread in a blocking call until the socket is shut down.
        for thread in self._httpd.drop_connections():
            thread.join(_JOIN_TIMEOUT)
        self._httpd.server_close()
        self._thread.join(_JOIN_TIMEOUT)

    # -- used by the request handler -------------------------------------------------

    def _record(self, request: RecordedRequest, *, chat: bool) -> int:
        """Append ``request``; return its 1-based number among chat requests (0 if not one)."""
        with self._lock:
            self.requests.append(request)
            if not chat:
                return 0
            self._chat_requests += 1
            return self._chat_requests

    def _problem(self, text: str) -> None:
        with self._lock:
            self.problems.append(text)

    def _reply_for(self, body: dict[str, Any], number: int) -> ServerReply:
        """The scripted reply for chat request ``number``; a 500 fault when there is none."""
        with self._lock:
            if self._fixed is not None:
                return self._fixed
            if self._script is not None:
                if self._cursor < len(self._script):
                    self._cursor += 1
                    return self._script[self._cursor - 1]
                function = None
            else:
                function = self._function
        if function is None:
            message = f"FakeOpenAIServer: no scripted reply left for request {number}"
            self._problem(message)
            return Fault.status(500, message, error_code="script_exhausted")
        try:
            # Its own copy, so a function that edits the body does not edit the record.
            reply = function(copy.deepcopy(body))
        except Exception as exc:  # the test's bug; answer so the client does not hang
            message = (
                f"FakeOpenAIServer: reply function raised {type(exc).__name__} "
                f"for request {number}: {exc}"
            )
            self._problem(message)
            return Fault.status(500, message, error_code="reply_function_error")
        if not is_reply(reply):
            message = (
                f"FakeOpenAIServer: reply function returned {type(reply).__name__} for "
                f"request {number}; expected str, an assistant message dict, or a Fault"
            )
            self._problem(message)
            return Fault.status(500, message, error_code="reply_function_error")
        return reply

    def _next_id(self) -> str:
        # Numbered per server, so ids are the same from run to run.
        with self._lock:
            return f"chatcmpl-fake{next(self._ids):06d}"

    def _wait_for_close(self, max_wait: float) -> None:
        self._closing.wait(max_wait)

    def _token_counter(self) -> TokenCounter:
        # Imported and built on first use, so importing the fake stays cheap. A race
        # only builds a second, identical counter.
        if self._counter is None:
            from harnessmem.tokens import TokenCounter

            self._counter = TokenCounter()
        return self._counter


class _LoopbackServer(ThreadingHTTPServer):
    """A threading HTTP server that can hang up on its live connections when closing."""

    daemon_threads = True

    def __init__(self, fake: FakeOpenAIServer) -> None:
        self.fake = fake
        self._live: dict[threading.Thread, socket.socket] = {}
        self._live_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        # Registered here, on the accept thread, so that once shutdown() has returned
        # every connection thread is known to drop_connections().
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name=f"FakeOpenAIServer:{self.server_address[1]}:{client_address[1]}",
            daemon=True,
        )
        with self._live_lock:
            self._live[thread] = request
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._live_lock:
                self._live.pop(threading.current_thread(), None)

    def drop_connections(self) -> list[threading.Thread]:
        """Shut down every open connection socket; return the threads serving them."""
        with self._live_lock:
            live = list(self._live.items())
        for _thread, sock in live:
            # OSError: the peer or the handler closed it first.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        return [thread for thread, _sock in live]

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hang up on purpose (timeouts, disconnect faults, close()); a traceback
        # on stderr for that would only be noise. Anything else is a bug worth showing.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """Serves one connection; the state lives on ``server.fake``."""

    # HTTP/1.1 for chunked streams. Every answer still says "Connection: close": a
    # client's pooled keep-alive socket would outlive the server and surface as a
    # ResourceWarning in some later test; a new loopback connection per request is cheap.
    protocol_version = "HTTP/1.1"
    server: _LoopbackServer

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: the default writes a line to stderr per request."""

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    # -- request -------------------------------------------------------------------------

    def _serve(self, method: str) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body, parse_error = parse_body(raw)
        chat = method == "POST" and path in _CHAT_PATHS
        headers = {name.lower(): value for name, value in self.headers.items()}
        number = fake._record(RecordedRequest(method, path, headers, body), chat=chat)
        if method == "POST" and path in _EMBEDDING_PATHS:
            self._send_embeddings(body, parse_error)
            return
        if not chat:
            self._send_error(
                404,
                f"Unknown request URL: {method} {path}. FakeOpenAIServer serves only "
                "POST /v1/chat/completions and POST /v1/embeddings.",
                "invalid_request_error",
            )
            return
        problem = parse_error or request_problem(body)
        if problem is not None:
            # A malformed request is the client's bug: reject it without using a reply.
            fake._problem(f"FakeOpenAIServer: request {number} rejected: {problem}")
            self._send_error(400, problem, "invalid_request_error")
            return
        reply = fake._reply_for(body, number)
        stream = body.get("stream") is True
        if isinstance(reply, Fault):
            self._send_fault(reply, body, stream=stream)
        else:
            message = assistant_message(reply)
            if stream:
                self._send_stream(message, body)
            else:
                self._send_completion(message, body)

    # -- answers ---------------------------------------------------------------------------

    def _send_embeddings(self, body: Mapping[str, Any], parse_error: str | None) -> None:
        fake = self.server.fake
        raw = body.get("input")
        inputs = [raw] if isinstance(raw, str) else raw
        problem = parse_error
        if problem is None and not isinstance(body.get("model"), str):
            problem = "you must provide a model parameter"
        if problem is None and (
            not isinstance(inputs, list)
            or not inputs
            or not all(isinstance(t, str) for t in inputs)
        ):
            problem = "'input' must be a string or a non-empty array of strings"
        if problem is not None:
            fake._problem(f"FakeOpenAIServer: embeddings request rejected: {problem}")
            self._send_error(400, problem, "invalid_request_error")
            return
        assert isinstance(inputs, list)
        dimensions = body.get("dimensions")
        size = dimensions if isinstance(dimensions, int) and dimensions > 0 else None
        as_base64 = body.get("encoding_format") == "base64"
        data = []
        for position, text in enumerate(inputs):
            vector = [float(v) for v in fake.embed(text, size or EMBEDDING_DIMENSIONS)]
            encoded: Any = vector
            if as_base64:
                packed = struct.pack(f"<{len(vector)}f", *vector)
                encoded = base64.b64encode(packed).decode("ascii")
            data.append({"object": "embedding", "index": position, "embedding": encoded})
        counter = fake._token_counter()
        tokens = sum(counter.count_text(text) for text in inputs)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _send_completion(self, message: dict[str, Any], body: Mapping[str, Any]) -> None:
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": finish_reason(message),
        }
        payload = self._envelope(body, "chat.completion")
        payload["choices"] = [choice]
        payload["usage"] = self._usage(body, message)
        self._send_json(200, payload)

    def _send_stream(self, message: dict[str, Any], body: Mapping[str, Any]) -> None:
        self._start_stream()
        envelope = self._envelope(body, "chat.completion.chunk")
        with_usage = include_usage(body)

        def chunk(delta: Mapping[str, Any], reason: str | None = None) -> None:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}
            event: dict[str, Any] = {**envelope, "choices": [choice]}
            if with_usage:
                event["usage"] = None  # OpenAI marks every chunk but the last this way
            self._send_event(event)

        chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in pieces(message.get("content") or ""):
            chunk({"content": piece})
        # Like OpenAI: a tool call's id and name first, then its arguments.
        for index, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function", {})
            opening = {
                "index": index,
                "id": call.get("id"),
                "type": call.get("type", "function"),
                "function": {"name": function.get("name"), "arguments": ""},
            }
            arguments = {"index": index, "function": {"arguments": function.get("arguments", "")}}
            chunk({"tool_calls": [opening]})
            chunk({"tool_calls": [arguments]})
        chunk({}, finish_reason(message))
        if with_usage:
            self._send_event({**envelope, "choices": [], "usage": self._usage(body, message)})
        self._end_stream()

    def _send_fault(self, fault: Fault, body: Mapping[str, Any], *, stream: bool) -> None:
        if fault.kind == "status":
            self._send_json(fault.status_code, {"error": dict(fault.error or {})}, fault.headers)
        elif fault.kind == "timeout":
            self.server.fake._wait_for_close(fault.max_wait)
            self.close_connection = True
        elif fault.kind == "disconnect":
            self.close_connection = True
        elif fault.kind == "empty_choice":
            if stream:
                self._start_stream()
                self._send_event({**self._envelope(body, "chat.completion.chunk"), "choices": []})
                self._end_stream()
            else:
                payload = self._envelope(body, "chat.completion")
                payload["choices"] = []
                payload["usage"] = self._usage(body, {"content": ""})
                self._send_json(200, payload)
        elif fault.kind == "malformed":
            # Cut off mid-object, as a proxy that drops the connection would leave it.
            truncated = b'{"id": "chatcmpl-fake", "object": "chat.completion", "choices": [{'
            if stream:
                self._start_stream()
                self._send_chunk(b"data: " + truncated + b"\n\n")
                self._end_stream()
            else:
                self._send_raw(200, truncated, "application/json")

    def _send_error(self, status: int, message: str, error_type: str) -> None:
        error = {"message": message, "type": error_type, "param": None, "code": None}
        self._send_json(status, {"error": error})

    def _send_json(
        self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_raw(
        self,
        status: int,
        data: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()

    def _send_event(self, event: Mapping[str, Any]) -> None:
        self._send_chunk(f"data: {json.dumps(event)}\n\n".encode())

    def _send_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%X\r\n%s\r\n" % (len(data), data))

    def _end_stream(self) -> None:
        self._send_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    # -- response parts --------------------------------------------------------------------

    def _envelope(self, body: Mapping[str, Any], obj: str) -> dict[str, Any]:
        return {
            "id": self.server.fake._next_id(),
            "object": obj,
            "created": int(time.time()),
            "model": body.get("model"),
            "system_fingerprint": "fp_fake",
        }

    def _usage(self, body: Mapping[str, Any], message: Mapping[str, Any]) -> dict[str, int]:
        counter = self.server.fake._token_counter()
        prompt = counter.count_messages(body.get("messages") or [])
        output = str(message.get("content") or "")
        if message.get("tool_calls"):
            output += json.dumps(message["tool_calls"])
        completion = counter.count_text(output)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
