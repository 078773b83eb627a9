"""A workspace's conditional write: read, change, write back only if nobody wrote in
between, else read and change again, with jittered backoff, a bounded number of times."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from harnessmem.errors import WorkspaceError
from harnessmem.workspace.store import WorkspaceStore

__all__ = ["compare_and_swap"]

_APPEND_ATTEMPTS = 60


def compare_and_swap(
    store: WorkspaceStore,
    full: str,
    change: Callable[[bytes], bytes | None],
    base: tuple[bytes, str | None] | None,
    what: str,
    *,
    append: bool,
    url: str,
    sleep: Callable[[float], None] = time.sleep,
    recalled: bool = False,
) -> tuple[bytes, str, bytes | None] | None:
    """Write ``change(the bytes at base)`` to ``full`` if it is still at ``base`` (None:
    read it first), else read again and change again; the bytes written, their version and
    the bytes they replaced (None: the file was new), or None when ``change`` returned
    None. WorkspaceError (naming ``what`` and the workspace ``url``) after a bounded number
    of lost writes; ``sleep`` waits between two of them (the workspace's waiter).

    ``recalled``: ``base`` was not read but recalled (what this process wrote last), so
    nothing vouches for it until a conditional write succeeds from it; when ``change``
    declines it, the file is read and ``change`` asked again, on what is really there.
    """
    delay = 0.005
    if base is None:
        base, recalled = store.read_versioned(full) or (b"", None), False
    for _ in range(_APPEND_ATTEMPTS):
        body = change(base[0])
        if body is None:
            if recalled:
                base, recalled = store.read_versioned(full) or (b"", None), False
                continue
            return None
        version = store.put_if(full, body, base[1], append=append)
        if version is not None:
            return body, version, None if base[1] is None else base[0]
        if recalled:
            # Written by someone else since this process did: not a race, no pause.
            base, recalled = store.read_versioned(full) or (b"", None), False
            continue
        # Full jitter spreads competing writers so that one of them wins each round. The
        # pause comes before the read, not between the read and the write: a text read
        # before the pause is stale by the end of it whenever another writer appends in
        # the meantime (one appending from its own last write needs no read and would
        # win every round).
        sleep(random.uniform(0, delay))
        delay = min(delay * 2, 0.25)
        base = store.read_versioned(full) or (b"", None)
    raise WorkspaceError(
        f"{what} {store.rel(full)!r} in {url} failed: the file kept changing "
        f"({_APPEND_ATTEMPTS} conditional writes lost to other writers)",
        hint="too many writers append to this one file; spread them over more files",
    )
