"""The one exception hierarchy of harnessmem.

Every error's first line says what failed and where; when there is a fix, the
following line says how (``hint``). Causes are chained with ``raise ... from``.
"""

from __future__ import annotations

__all__ = [
    "AccessDenied",
    "ArchiveError",
    "BackendNotFound",
    "ConfigError",
    "ContextOverflowError",
    "ForgetError",
    "HarnessMemError",
    "LeaseError",
    "MessageFormatError",
    "ModelError",
    "ModelResponseError",
    "ModelUnavailableError",
    "PathNotAllowed",
    "PluginError",
    "ProbeFormatError",
    "WorkspaceError",
    "WorkspaceFileNotFound",
    "WorkspaceNotFound",
]


class HarnessMemError(Exception):
    """Base class of every error harnessmem raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message}\n{hint}")


class ConfigError(HarnessMemError, ValueError):
    """Settings that cannot be used; ``problems`` holds one line per problem."""

    def __init__(
        self, message: str, *, hint: str | None = None, problems: list[str] | None = None
    ) -> None:
        self.problems = list(problems or [])
        super().__init__(message, hint=hint)


class AccessDenied(HarnessMemError, PermissionError):
    """A bearer access token that lets no one in (bad signature, expired, another issuer or
    audience, no valid tenant), or one that does not grant what the request asks."""


class ArchiveError(HarnessMemError, ValueError):
    """An export or import that cannot go ahead: a bad archive, a conflict, a missing source."""


class MessageFormatError(HarnessMemError, ValueError):
    """A transcript or message is malformed; ``problems`` holds one line per problem.

    Each line names the message index and what is wrong with it, e.g.
    ``message 12: tool_use block 0 has no id``.
    """

    def __init__(
        self, message: str, *, hint: str | None = None, problems: list[str] | None = None
    ) -> None:
        self.problems = list(problems or [message])
        super().__init__(message, hint=hint)


class ForgetError(HarnessMemError, ValueError):
    """``forget`` or ``edit`` was given a query that names no fact, or too many: nothing
    was changed."""


class ProbeFormatError(HarnessMemError, ValueError):
    """A replay probe that cannot be read: not ``QUESTION=EXPECTED``, or a probes file that
    is missing, unreadable or empty; the message names the option or the file and line."""


class PluginError(HarnessMemError):
    """A plugin could not be loaded, registered or validated."""


class BackendNotFound(PluginError, LookupError):
    """No index or model backend is installed under the configured name, or the library
    the workspace URL's store needs (s3fs for ``s3://``) is missing."""


class WorkspaceError(HarnessMemError, OSError):
    """Reading or writing the workspace failed (after retries, where they apply)."""


class WorkspaceNotFound(WorkspaceError):
    """A command that only reads was pointed at a folder that holds no workspace.

    Nothing is created there; ``url`` is the workspace URL as given.
    """


class WorkspaceFileNotFound(WorkspaceError, FileNotFoundError):
    """A workspace file that was asked for by name does not exist (``harness.get``).

    Also a ``FileNotFoundError``, so code that caught the bare error keeps working;
    ``path`` is the workspace-relative path (``filename`` stays unset: setting it would
    turn the message into ``OSError``'s ``[Errno ...]`` form).
    """

    def __init__(self, message: str, *, hint: str | None = None, path: str = "") -> None:
        super().__init__(message, hint=hint)
        self.path = path


class PathNotAllowed(WorkspaceError, PermissionError):
    """A path would leave the workspace, or names a file the operation may not touch."""


class LeaseError(WorkspaceError):
    """A named workspace lease could not be taken, renewed or released."""


class ModelError(HarnessMemError):
    """A model call failed."""


class ContextOverflowError(ModelError):
    """The request did not fit the model's context window."""


class ModelUnavailableError(ModelError):
    """The model could not be reached or kept failing after the configured retries."""


class ModelResponseError(ModelError):
    """The model answered, but with an empty or malformed response."""
