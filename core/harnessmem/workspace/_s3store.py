"""S3 storage primitives behind :class:`harnessmem.workspace.Workspace` (private).

:class:`S3Store` speaks to S3 through s3fs's client, one S3 request per primitive where
S3 allows it: a read is one GET (s3fs's ``cat_file`` adds a HEAD, and a LIST when the key
is missing), a listing is one LIST per 1,000 keys and never depends on directory marker
objects, a write is one PUT, a compare-and-swap one conditional PUT (``If-Match`` the
ETag read, ``If-None-Match: *`` to create).

Retries live here, in one place: throttling (503 SlowDown), 5xx answers, dropped
connections and timeouts are retried up to :data:`ATTEMPTS` times with jittered
exponential backoff (:func:`_pause`; ``S3Store.sleep`` waits it out, which a test replaces to
record the pauses instead). The workspace turns off botocore's
and s3fs's own retry loops unless the user configured botocore's, so attempts do not
multiply. (aiohttp still repeats a PUT or DELETE once, silently, when the server drops a
reused connection.)

A conditional write whose earlier attempt failed in transit may have landed, so that the
repeat loses the condition to our own write. Each conditional PUT therefore carries a
random write id in its metadata; when one loses, a HEAD tells whether the object is that
very write, which then counts as done. So an append is never written twice, and two
writers that happen to write identical bytes are still told apart.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, Self, TypeVar

from harnessmem.workspace._faults import error_code, is_transient
from harnessmem.workspace.store import WorkspaceStore

__all__ = ["ATTEMPTS", "RetriesExhausted", "S3Store"]

T = TypeVar("T")

#: Attempts per S3 request (the first one included) before the error is reported.
ATTEMPTS = 5
#: Upper bound of the first pause; each further pause may be twice as long, up to _MAX_PAUSE.
_FIRST_PAUSE = 0.2
_MAX_PAUSE = 5.0
# S3 answers for a conditional request that lost to another writer: read again and retry.
_LOST_RACE = frozenset(
    {"PreconditionFailed", "412", "ConditionalRequestConflict", "409", "NoSuchKey", "404"}
)
_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})
#: User metadata (``x-amz-meta-harnessmem-write``) naming each conditional write.
_WRITE_ID = "harnessmem-write"
#: The longest object key S3 takes, in bytes of UTF-8.
_MAX_KEY_BYTES = 1024


def _unquoted(etag: object) -> str:
    """An ETag as versions are compared here: without the quotes S3 sends."""
    return str(etag).strip('"')


def _quoted(version: str) -> str:
    """A version as ``If-Match`` sends it: the quoted ETag (RFC 9110's entity-tag)."""
    return version if version.startswith('"') else f'"{version}"'


def _pause(attempt: int) -> float:
    """Full jitter: uniform in [0, min(cap, first * 2**attempt)]."""
    return random.uniform(0, min(_MAX_PAUSE, _FIRST_PAUSE * 2**attempt))


class RetriesExhausted(OSError):
    """An S3 request failed in a transient way on every attempt."""


def _with_retries(call: Callable[[], T], sleep: Callable[[float], None]) -> T:
    """``call()``, repeated on transient failures, ``sleep`` between (see the module doc)."""
    for attempt in range(ATTEMPTS):
        try:
            return call()
        except Exception as exc:
            if not is_transient(exc):
                raise
            if attempt == ATTEMPTS - 1:
                what = error_code(exc) or type(exc).__name__
                raise RetriesExhausted(
                    f"{what}: {exc} (gave up after {ATTEMPTS} attempts)"
                ) from exc
            sleep(_pause(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


class S3Store(WorkspaceStore):
    """S3 through s3fs's client: one request per primitive, conditional writes, retries.

    Serves ``s3://`` and ``s3a://`` URLs (``pip install 'harnessmem[s3]'``), on AWS and on
    S3-compatible stores with conditional writes (``endpoint_url`` in storage_options).
    """

    protocols = ("s3", "s3a")
    #: Waits between two attempts of a request; a test sets a recorder on the instance.
    sleep: Callable[[float], None] = staticmethod(time.sleep)
    conditional = True
    cross_process = True
    versions_are_tokens = True

    @classmethod
    def open(cls, url: str, storage_options: dict[str, Any], *, create: bool = True) -> Self:
        """The s3fs filesystem of ``url``, with two defaults unless the options set them:
        no listings cache (other replicas' files must show), and botocore's retries off,
        because each request is retried here, knowing which writes are conditional."""
        options = dict(storage_options)
        options.setdefault("use_listings_cache", False)
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("retries", {"mode": "standard", "total_max_attempts": 1})
        options["config_kwargs"] = config
        store = super().open(url, options, create=create)
        # s3fs's own retry loop too (sleeping even after its last attempt).
        store.fs.retries = 1
        return store

    def name_problem(self, full: str) -> str | None:
        key = full.partition("/")[2]  # the root starts with the bucket
        size = len(key.encode("utf-8", "surrogatepass"))
        if size > _MAX_KEY_BYTES:
            return f"its key is {size} bytes long; S3 keys hold at most {_MAX_KEY_BYTES}"
        return None

    def check_reachable(self) -> None:
        # One attempt, without this store's retries: a command fails fast when it cannot work.
        fs: Any = self.fs
        fs.call_s3("head_bucket", Bucket=self.root.split("/", 1)[0])

    # requests ------------------------------------------------------------------------------

    def _request(self, method: str, full: str | None, **kw: Any) -> Any:
        """One S3 API call (with retries); a GET's body is read inside the same attempt."""
        from fsspec.asyn import sync

        if full is not None:
            bucket, key, _ = self.fs.split_path(full)
            kw = {"Bucket": bucket, "Key": key, **kw}

        async def call() -> Any:
            response = await self.fs._call_s3(method, **kw)
            if "Body" in response and hasattr(response["Body"], "read"):
                async with response["Body"] as body:
                    response["Body"] = bytes(await body.read())
            return response

        return _with_retries(lambda: sync(self.fs.loop, call), self.sleep)

    # plain operations ----------------------------------------------------------------------

    def read(self, full: str) -> bytes:
        with self.op("read", full):
            return bytes(self._request("get_object", full)["Body"])

    def read_range(self, full: str, start: int, end: int) -> bytes:
        with self.op("read", full):
            try:
                response = self._request("get_object", full, Range=f"bytes={start}-{end - 1}")
            except OSError as exc:
                if error_code(exc) in {"InvalidRange", "416"}:
                    return b""  # starts at or past the end of the object
                raise
            return bytes(response["Body"])

    def read_versioned(self, full: str) -> tuple[bytes, str] | None:
        # One GET gives the body and its ETag together; HEAD then GET could pair a newer
        # body with an older ETag and let a conditional write lose an append.
        try:
            with self.op("read", full):
                response = self._request("get_object", full)
        except FileNotFoundError:
            return None
        return bytes(response["Body"]), _unquoted(response["ETag"])

    def write(self, full: str, data: bytes) -> str | None:
        with self.op("write", full):
            return _unquoted(self._request("put_object", full, Body=data)["ETag"])

    def exists(self, full: str) -> bool:
        try:
            self.info(full)
        except FileNotFoundError:
            return False
        return True

    def info(self, full: str) -> tuple[int, float | None, str]:
        with self.op("info", full):
            head = self._request("head_object", full)
            etag = _unquoted(head["ETag"])
            return int(head["ContentLength"]), head["LastModified"].timestamp(), etag

    def delete(self, full: str, *, missing_ok: bool = False) -> None:
        if not missing_ok:
            self.info(full)  # S3 deletes of missing keys succeed; we must report them.
        with self.op("delete", full):
            self._request("delete_object", full)

    def move(self, src: str, dst: str) -> None:
        # Copy, then delete: a crash in between leaves both, never neither.
        with self.op("move", src):
            bucket, key, _ = self.fs.split_path(src)
            self._request("copy_object", dst, CopySource={"Bucket": bucket, "Key": key})
            self._request("delete_object", src)

    def make_folder(self, full: str) -> None:
        """A zero-byte ``<key>/`` marker object, as the S3 console's "create folder" makes:
        a listing of the parent shows the folder, a listing of files skips it."""
        with self.op("create folder", full):
            self._request("put_object", full.rstrip("/") + "/", Body=b"")

    def scan(self, directory: str, recursive: bool) -> Iterator[tuple[str, int, float | None, str]]:
        """``(rel path, size, modified, ETag)`` of the files under ``directory``.

        One ListObjectsV2 per 1,000 keys; keys ending in ``/`` (directory markers) are not
        files, and a missing "directory" is simply an empty listing.
        """
        for page in self._pages(directory, recursive):
            yield from self._files(directory, page)

    def scan_folders(
        self, directory: str
    ) -> tuple[list[tuple[str, int, float | None, str]], set[str] | None]:
        """One ListObjectsV2 (per 1,000 keys) with a delimiter gives both: the files, and
        the common prefixes (folders holding at least one key, a marker included)."""
        files: list[tuple[str, int, float | None, str]] = []
        folders: set[str] = set()
        for page in self._pages(directory, recursive=False):
            files.extend(self._files(directory, page))
            for common in page.get("CommonPrefixes", ()):
                folders.add(str(common["Prefix"]).rstrip("/").rpartition("/")[2])
        return files, folders

    def _pages(self, directory: str, recursive: bool) -> Iterator[dict[str, Any]]:
        bucket, key, _ = self.fs.split_path(directory)
        prefix = key.rstrip("/") + "/" if key else ""
        kw: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix}
        if not recursive:
            kw["Delimiter"] = "/"
        with self.op("list", directory):
            while True:
                page = self._request("list_objects_v2", None, **kw)
                yield page
                token = page.get("NextContinuationToken")
                if not page.get("IsTruncated") or not token:
                    return
                kw["ContinuationToken"] = token

    def _files(
        self, directory: str, page: dict[str, Any]
    ) -> Iterator[tuple[str, int, float | None, str]]:
        bucket = self.fs.split_path(directory)[0]
        for item in page.get("Contents", ()):
            name = str(item["Key"])
            if not name.endswith("/"):
                yield (
                    self.rel(f"{bucket}/{name}"),
                    int(item["Size"]),
                    item["LastModified"].timestamp(),
                    _unquoted(item["ETag"]),
                )

    def find(self, directory: str, recursive: bool) -> list[str]:
        return [path for path, *_ in self.scan(directory, recursive)]

    # compare-and-swap ----------------------------------------------------------------------

    def put_if(
        self, full: str, data: bytes, version: str | None, *, append: bool = False
    ) -> str | None:
        condition = {"IfNoneMatch": "*"} if version is None else {"IfMatch": _quoted(version)}
        write_id = uuid.uuid4().hex
        with self.op("conditional write", full):
            try:
                response = self._request(
                    "put_object", full, Body=data, Metadata={_WRITE_ID: write_id}, **condition
                )
            except OSError as exc:
                # 412: changed since read; 409: a concurrent conditional write; NoSuchKey:
                # deleted since read. All mean "read again" -- unless the object is this
                # very write, landed by an attempt whose answer was lost.
                if not (isinstance(exc, FileExistsError) or error_code(exc) in _LOST_RACE):
                    raise
                try:
                    head = self._request("head_object", full)
                except FileNotFoundError:
                    return None
                if head.get("Metadata", {}).get(_WRITE_ID) == write_id:
                    return _unquoted(head["ETag"])
                return None
        return _unquoted(response["ETag"])

    def delete_if(self, full: str, version: str) -> bool:
        with self.op("conditional delete", full):
            try:
                self._request("delete_object", full, IfMatch=_quoted(version))
            except OSError as exc:
                code = error_code(exc)
                if code in _LOST_RACE:
                    # Gone: deleted by an earlier attempt of this request, or by someone
                    # else; either way it is not there any more.
                    return code in _MISSING
                if code not in {"NotImplemented", "501", "InvalidArgument"}:
                    raise
                # Stores without conditional deletes: check, then delete (best effort).
                current = self.read_versioned(full)
                if current is None or current[1] != version:
                    return False
                self._request("delete_object", full)
        return True
