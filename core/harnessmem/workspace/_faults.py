"""How storage failures are told apart (private; see :mod:`harnessmem.workspace`).

:func:`error_code` digs the S3 error code out of an exception s3fs translated,
:func:`is_transient` says whether a request is worth repeating, and :func:`hint` says how
to fix a failure whose cause is a common one. Any store's errors pass through them (see
:meth:`harnessmem.workspace.WorkspaceStore.op`); the codes are S3's and HTTP's, which the
other object stores share.
"""

from __future__ import annotations

import errno

__all__ = ["error_code", "hint", "is_transient"]


def error_code(exc: BaseException) -> str:
    """The S3 error code (or HTTP status) behind an exception s3fs translated."""
    seen: BaseException | None = exc
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            error = response.get("Error", {})
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", "")
            return str(error.get("Code") or status)
        seen = seen.__cause__ or seen.__context__
    return ""


_TRANSIENT_CODES = frozenset(
    {
        "SlowDown",
        "503",
        "ServiceUnavailable",
        "500",
        "InternalError",
        "502",
        "BadGateway",
        "504",
        "GatewayTimeout",
        "RequestTimeout",
        "RequestTimeoutException",
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "429",
    }
)
_BOTOCORE_TRANSIENT = frozenset(
    {"HTTPClientError", "ResponseStreamingError", "IncompleteReadError", "ProxyConnectionError"}
)


def is_transient(exc: BaseException) -> bool:
    """Whether a failed S3 request is worth repeating: throttling, 5xx, transport errors."""
    if error_code(exc) in _TRANSIENT_CODES:
        return True
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, TimeoutError | ConnectionError):
            return True
        module = type(seen).__module__
        name = type(seen).__name__
        # botocore's HTTPClientError/ConnectionError family (timeouts, closed connections,
        # streaming errors), aiohttp's client errors and http.client's IncompleteRead:
        # checked by name so that none of these libraries is imported here.
        if module.startswith(("botocore", "aiobotocore")) and (
            "Connection" in name or "Timeout" in name or name in _BOTOCORE_TRANSIENT
        ):
            return True
        if module.startswith("aiohttp") and name != "ClientResponseError":
            return True
        if name in ("IncompleteRead", "FSTimeoutError", "RemoteProtocolError"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# A full disk, the process's file size limit (RLIMIT_FSIZE) and a disk quota.
_FULL_DISK = frozenset(
    code for code in (errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", None)) if code
)


def _disk_full(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in _FULL_DISK:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def hint(exc: BaseException) -> str | None:
    """How to fix a storage failure, when its cause is a common one."""
    if _disk_full(exc):
        return (
            "the disk is full, or a file size limit or quota was reached: free space or "
            "raise the limit, then try again"
        )
    text = f"{type(exc).__name__} {exc} {error_code(exc)}"
    if isinstance(exc, PermissionError) or "AccessDenied" in text or "Credentials" in text:
        return "check the credentials in storage_options (key/secret) and the permissions"
    if "NoSuchBucket" in text:
        return "create the bucket first, or fix the bucket name in the workspace URL"
    if "EndpointConnectionError" in text or "Could not connect" in text:
        return "check that the store is reachable (endpoint_url in storage_options)"
    if is_transient(exc):
        return (
            "the store kept failing (throttling, 5xx answers, dropped connections or "
            "timeouts) through every retry; nothing was half-written: try again later"
        )
    return None
