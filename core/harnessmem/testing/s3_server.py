"""A loopback S3 server for tests and benchmarks: moto, with a request log and faults.

``S3TestServer`` runs moto's S3 on ``127.0.0.1`` (any free port) in a thread, so that a
workspace URL ``s3://<bucket>/ws`` reached through s3fs speaks the real S3 protocol, with
no network and no AWS account::

    with S3TestServer() as server:
        bucket = server.create_bucket()
        options = server.storage_options()
        ws = Workspace.open(f"s3://{bucket}/ws", options)
        with server.record() as requests:
            ws.append_text("memory/a.md", "- x\\n")
        assert [r.operation for r in requests] == ["GetObject", "PutObject"]
        server.inject(S3Fault.slowdown(method="PUT"))  # the next PUT answers 503 SlowDown

Three things it adds to moto:

- **one request at a time.** S3 applies a request to an object atomically; moto does not
  (its ``If-Match`` check and the write are separate steps, and a GET racing with a PUT of
  the same key can read a closed buffer). Serialising gives clients S3's guarantees, so a
  lost append is a bug in the client, not in the fake.
- **a request log** (:attr:`S3TestServer.requests`, :meth:`S3TestServer.record`): what a
  client would be billed for, retries included.
- **faults** (:class:`S3Fault`): 503 SlowDown, 500 InternalError, a dropped connection or
  a response that never comes, for the n-th request that matches, optionally *after*
  moto applied it (the client cannot tell whether its write landed).

Needs ``moto[server]`` (a test dependency, not one of harnessmem's). Clients need
credentials of any value: :meth:`S3TestServer.storage_options` gives s3fs its own.
"""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias
from urllib.parse import unquote

__all__ = ["S3Fault", "S3Request", "S3TestServer"]

FaultKind: TypeAlias = Literal["slowdown", "internal_error", "drop", "timeout"]

_ERROR_BODY = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
    "<Message>{message}</Message><RequestId>harnessmem-fault</RequestId></Error>"
)


@dataclass(frozen=True)
class S3Request:
    """One request the server received: HTTP method, bucket, key, query, answer status.

    ``status`` is 0 for a request answered by a dropped connection. ``fault`` names the
    fault injected into it, if any. ``condition`` is the conditional header it carried
    (``If-Match`` or ``If-None-Match``), else "".
    """

    method: str
    bucket: str
    key: str
    query: str
    status: int
    condition: str = ""
    copy: bool = False
    fault: str = ""

    @property
    def operation(self) -> str:
        """The S3 API operation: ``GetObject``, ``PutObject``, ``ListObjectsV2``, ..."""
        if not self.key:
            if self.method == "GET":
                return "ListObjectsV2" if "list-type=2" in self.query else "ListObjects"
            return {"PUT": "CreateBucket", "HEAD": "HeadBucket", "DELETE": "DeleteBucket"}.get(
                self.method, "DeleteObjects" if "delete" in self.query else self.method
            )
        if self.method == "PUT":
            return "CopyObject" if self.copy else "PutObject"
        return {
            "GET": "GetObject",
            "HEAD": "HeadObject",
            "DELETE": "DeleteObject",
        }.get(self.method, self.method)

    def __str__(self) -> str:
        condition = f" [{self.condition}]" if self.condition else ""
        return (
            f"{self.operation} {self.key or self.bucket}{condition} -> {self.status or 'dropped'}"
        )


@dataclass
class S3Fault:
    """A failure injected into matching requests; build one with a factory classmethod.

    A request matches when its method is ``method`` (None: any), its key contains
    ``key`` and ``when`` (if given) accepts it. The ``nth`` matching request and the
    ``times - 1`` after it fail; ``times=None`` fails every one from the ``nth`` on.
    ``after_apply`` lets moto carry the request out first and then fails the answer, so
    that the client retries a write that already happened. ``fired`` counts failures.
    """

    kind: FaultKind
    method: str | None = None
    key: str = ""
    nth: int = 1
    times: int | None = 1
    after_apply: bool = False
    delay: float = 1.0
    when: Callable[[S3Request], bool] | None = None
    fired: int = 0
    seen: int = field(default=0, repr=False)

    @classmethod
    def slowdown(cls, **match: Any) -> S3Fault:
        """503 SlowDown: S3's throttling answer."""
        return cls("slowdown", **match)

    @classmethod
    def internal_error(cls, **match: Any) -> S3Fault:
        """500 InternalError."""
        return cls("internal_error", **match)

    @classmethod
    def drop(cls, **match: Any) -> S3Fault:
        """The connection is closed without an answer."""
        return cls("drop", **match)

    @classmethod
    def timeout(cls, delay: float = 1.0, **match: Any) -> S3Fault:
        """No answer for ``delay`` seconds, then the connection is closed.

        Set the client's ``read_timeout`` below ``delay`` so that it gives up first.
        """
        return cls("timeout", delay=delay, **match)

    def _claims(self, request: S3Request) -> bool:
        if self.method is not None and request.method != self.method.upper():
            return False
        if self.key not in request.key or (self.when is not None and not self.when(request)):
            return False
        self.seen += 1
        if self.seen < self.nth or (self.times is not None and self.fired >= self.times):
            return False
        self.fired += 1
        return True


class S3TestServer:
    """moto's S3 on loopback, one request at a time, logged, with injectable faults."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.requests: list[S3Request] = []
        self._faults: list[S3Fault] = []
        self._lock = threading.Lock()  # one request inside moto at a time
        self._log_lock = threading.Lock()
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.endpoint_url = ""

    # lifetime ------------------------------------------------------------------------------

    def start(self) -> S3TestServer:
        """Start serving on a free port; :attr:`endpoint_url` says where."""
        try:
            from moto.moto_server.werkzeug_app import (
                DomainDispatcherApplication,
                MotoRequestHandler,
                create_backend_app,
            )
            from werkzeug.serving import make_server
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise RuntimeError(
                "S3TestServer needs moto's server: pip install 'moto[server]'"
            ) from exc
        moto_app = DomainDispatcherApplication(create_backend_app)
        self._server = make_server(
            self.host,
            0,
            self._middleware(moto_app),
            threaded=True,
            request_handler=MotoRequestHandler,
        )
        host, port = self._server.server_address[:2]
        self.endpoint_url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="S3TestServer", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> S3TestServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # clients -------------------------------------------------------------------------------

    def storage_options(self, **config: Any) -> dict[str, Any]:
        """s3fs ``storage_options`` that reach this server; ``config`` goes to botocore's
        ``Config`` (``config_kwargs``), e.g. ``read_timeout=0.5``."""
        options: dict[str, Any] = {
            "endpoint_url": self.endpoint_url,
            "key": "testing",
            "secret": "testing",
        }
        if config:
            options["config_kwargs"] = config
        return options

    def client(self) -> Any:
        """A plain botocore S3 client for this server (for set-up and inspection)."""
        import botocore.session

        return botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

    def create_bucket(self, name: str | None = None, *, client: Any = None) -> str:
        """Create a bucket (a fresh random name by default) and return its name."""
        name = name or f"test-{uuid.uuid4().hex[:20]}"
        own = client is None
        client = client or self.client()
        try:
            client.create_bucket(Bucket=name)
        finally:
            if own:
                client.close()
        return name

    # log and faults ------------------------------------------------------------------------

    @contextlib.contextmanager
    def record(self) -> Iterator[list[S3Request]]:
        """The requests made while the block runs (a live list, complete on exit)."""
        with self._log_lock:
            start = len(self.requests)
        seen: list[S3Request] = []
        try:
            yield seen
        finally:
            with self._log_lock:
                seen.extend(self.requests[start:])

    def inject(self, fault: S3Fault) -> S3Fault:
        """Add a fault (see :class:`S3Fault`); returns it, so tests can read ``fired``."""
        with self._log_lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """Remove every injected fault."""
        with self._log_lock:
            self._faults.clear()

    # the WSGI layer ------------------------------------------------------------------------

    def _middleware(self, app: Callable[..., Any]) -> Callable[..., Any]:
        def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            request = _describe(environ)
            with self._log_lock:
                fault = next((f for f in self._faults if f._claims(request)), None)
            if fault is not None:
                # The body is read off the socket once, here: an error answer leaves the
                # connection usable, and after moto read this copy nothing waits for more.
                _buffer_body(environ)
                if not fault.after_apply:
                    return self._fail(fault, request, environ, start_response)
            answer: dict[str, Any] = {}

            def capture(status: str, headers: list[Any], exc_info: Any = None) -> Any:
                answer["status"] = int(status.split(" ", 1)[0])
                if fault is None:
                    return start_response(status, headers, exc_info)
                return lambda data: None

            with self._lock:
                body = b"".join(app(environ, capture))  # applied whole, under the lock
            if fault is not None:
                return self._fail(fault, request, environ, start_response)
            self._log(request, answer.get("status", 0))
            return [body]

        return serve

    def _log(self, request: S3Request, status: int, fault: str = "") -> None:
        done = S3Request(
            request.method,
            request.bucket,
            request.key,
            request.query,
            status,
            request.condition,
            request.copy,
            fault,
        )
        with self._log_lock:
            self.requests.append(done)

    def _fail(
        self,
        fault: S3Fault,
        request: S3Request,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
    ) -> list[bytes]:
        label = fault.kind + (" after apply" if fault.after_apply else "")
        if fault.kind in ("slowdown", "internal_error"):
            code, status, message = (
                ("SlowDown", "503 Slow Down", "Please reduce your request rate.")
                if fault.kind == "slowdown"
                else ("InternalError", "500 Internal Server Error", "We encountered an error.")
            )
            body = _ERROR_BODY.format(code=code, message=message).encode()
            self._log(request, int(status.split(" ", 1)[0]), label)
            start_response(
                status,
                [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))],
            )
            return [body]
        self._log(request, 0, label)
        if fault.kind == "timeout":
            time.sleep(fault.delay)  # the client's read timeout fires meanwhile
        sock = environ.get("werkzeug.socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        # Writing the answer now fails with a ConnectionError, which werkzeug takes as a
        # dropped connection (silently).
        start_response("500 Internal Server Error", [("Content-Length", "0")])
        return [b""]


def _describe(environ: dict[str, Any]) -> S3Request:
    path = unquote(environ.get("PATH_INFO", "")).lstrip("/")
    bucket, _, key = path.partition("/")
    condition = (
        "If-Match"
        if environ.get("HTTP_IF_MATCH")
        else "If-None-Match"
        if environ.get("HTTP_IF_NONE_MATCH")
        else ""
    )
    return S3Request(
        method=environ.get("REQUEST_METHOD", "GET").upper(),
        bucket=bucket,
        key=key,
        query=environ.get("QUERY_STRING", ""),
        status=0,
        condition=condition,
        copy=bool(environ.get("HTTP_X_AMZ_COPY_SOURCE")),
    )


def _buffer_body(environ: dict[str, Any]) -> None:
    """Read the request body off the socket into memory (moto reads the copy)."""
    length = environ.get("CONTENT_LENGTH")
    stream = environ.get("wsgi.input")
    if stream is not None and length and length.isdigit():
        environ["wsgi.input"] = io.BytesIO(stream.read(int(length)))
