"""The isolation tests of ``IndexBackendSuite`` catch a backend that does not keep workspaces apart.

Each leaky backend below is the in-memory reference with one isolation defect a real
backend could have; every one must fail the suite test that names the defect (and a
correct backend passes them all: ``tests/test_index_inmemory.py``, ``test_index_sqlite.py``
and the PostgreSQL plugin's suite run them).
"""

from __future__ import annotations

from typing import Any

import pytest

from harnessmem.backends.base import IndexBackend
from harnessmem.backends.inmemory import InMemoryIndex
from harnessmem.testing import IndexBackendSuite
from harnessmem.testing.index_suite import ISOLATION_TESTS


class _SharesEverything(InMemoryIndex):
    """Files under one key whatever the workspace: the defect of an index without a key."""

    @property
    def _files(self) -> dict[str, Any]:
        return self._workspaces.setdefault("", {})


class _ClearsEveryone(InMemoryIndex):
    """Searches are scoped, but clear() (a full reindex) empties every workspace."""

    def clear(self) -> None:
        with self._lock:
            self._workspaces.clear()


class _RemovesEverywhere(InMemoryIndex):
    """remove() drops the path from every workspace (a DELETE keyed by path alone)."""

    def remove(self, path: str) -> bool:
        with self._lock:
            found = [files.pop(path, None) for files in self._workspaces.values()]
        return any(f is not None for f in found)


class _RebuildTellsOnlyItself(InMemoryIndex):
    """A self-rebuild that drops every workspace's rows but counts a reset on one instance."""

    damaged: bool = False

    def search(self, *args: Any, **kwargs: Any) -> Any:
        if type(self).damaged:
            type(self).damaged = False
            with self._lock:
                self._workspaces.clear()
            self.resets += 1
        return super().search(*args, **kwargs)


class _Probe(IndexBackendSuite):
    """Runs single suite tests by hand (not collected: no ``Test`` prefix)."""


class _DamagingProbe(_Probe):
    def damage(self, index: IndexBackend) -> None:
        type(index).damaged = True  # type: ignore[attr-defined]


LEAKS = {
    # defect -> the suite tests that must fail on it
    _SharesEverything: set(ISOLATION_TESTS) - {"test_a_self_rebuild_keeps_workspaces_apart"},
    _ClearsEveryone: {"test_clear_of_one_workspace_leaves_the_other"},
    _RemovesEverywhere: {
        "test_remove_in_one_workspace_leaves_the_other",
        "test_workspaces_keep_their_own_files_at_the_same_path_and_hash",
    },
    _RebuildTellsOnlyItself: {"test_a_self_rebuild_keeps_workspaces_apart"},
}


def _outcome(backend: type[InMemoryIndex], test: str) -> str:
    index = backend.create({})
    try:
        probe = _DamagingProbe() if hasattr(backend, "damaged") else _Probe()
        getattr(probe, test)(index)
    except AssertionError:
        return "failed"
    except pytest.skip.Exception:
        return "skipped"
    finally:
        index.close()
    return "passed"


@pytest.mark.parametrize("backend", list(LEAKS), ids=lambda cls: cls.__name__.strip("_"))
def test_the_suite_fails_a_leaky_backend(backend: type[InMemoryIndex]) -> None:
    failed = {test for test in ISOLATION_TESTS if _outcome(backend, test) == "failed"}
    assert LEAKS[backend] <= failed, f"not caught: {sorted(LEAKS[backend] - failed)}"


def test_a_correct_backend_passes_them() -> None:
    outcomes = {test: _outcome(InMemoryIndex, test) for test in ISOLATION_TESTS}
    assert set(outcomes.values()) <= {"passed", "skipped"}, outcomes
    assert outcomes["test_workspaces_search_only_their_own_entries"] == "passed"


def test_a_scoped_instance_serves_its_workspace() -> None:
    index = InMemoryIndex.create({})
    assert index.workspace_id == ""
    other = index.scoped("s3://bucket/agents/bob")
    assert other.workspace_id == "s3://bucket/agents/bob"
    for bad in ("", None, "x" * 1_001):
        with pytest.raises(ValueError, match="workspace id"):
            index.scoped(bad)  # type: ignore[arg-type]
