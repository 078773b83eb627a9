"""Workspace stores as plugins: the ``harnessmem.storage`` entry points, and WorkspaceSuite
run on a store shaped like a third party's.

The third-party store here is installed the way pip installs one: a distribution on
``sys.path`` whose metadata declares ``harnessmem.storage`` entry points. Its module is
put in ``sys.modules`` instead of on disk, so that its code can be read here.
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
import types
import uuid
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, ClassVar, Self

import pytest

from harnessmem.errors import PluginError, WorkspaceError
from harnessmem.testing.workspace_suite import FakeClock, WorkspaceSuite
from harnessmem.workspace import (
    FsspecStore,
    LocalStore,
    MemoryStore,
    S3Store,
    Workspace,
    WorkspaceStore,
)
from harnessmem.workspace.store import store_class

MODULE = "harnessmem_genmem"
DISTRIBUTION = "harnessmem-genmem"


class GenerationStore(WorkspaceStore):
    """A store as a plugin would write one: fsspec's memory filesystem under a protocol of
    its own, whose versions are generation numbers, as GCS gives them (``ifGenerationMatch``).

    The lock stands for the storage service: there, one request is atomic by itself.
    """

    protocols = ("genmem",)
    conditional = True
    _generations: ClassVar[dict[str, int]] = {}
    _next = itertools.count(1)
    _service = threading.Lock()

    @classmethod
    def open(cls, url: str, storage_options: dict[str, Any], *, create: bool = True) -> Self:
        from fsspec.implementations.memory import MemoryFileSystem

        name = url.split("://", 1)[1].strip("/")
        if not name:
            raise ValueError("the URL names no folder")
        protocol = url.split("://", 1)[0]
        return cls(MemoryFileSystem(), f"/{name}", f"{protocol}://{name}", storage_options)

    def check_reachable(self) -> None:
        return None

    def _bump(self, full: str) -> str:
        self._generations[full] = generation = next(self._next)
        return str(generation)

    def write(self, full: str, data: bytes) -> None:
        with self._service:
            super().write(full, data)
            self._bump(full)

    def delete(self, full: str, *, missing_ok: bool = False) -> None:
        with self._service:
            super().delete(full, missing_ok=missing_ok)
            self._generations.pop(full, None)

    def move(self, src: str, dst: str) -> None:
        with self._service:
            super().move(src, dst)
            self._generations.pop(src, None)
            self._bump(dst)

    def read_versioned(self, full: str) -> tuple[bytes, str] | None:
        with self._service:
            try:
                data = self.read(full)
            except FileNotFoundError:
                return None
            return data, str(self._generations[full])

    def put_if(
        self, full: str, data: bytes, version: str | None, *, append: bool = False
    ) -> str | None:
        with self.op("conditional write", full), self._service:
            current = self._generations.get(full) if self.fs.isfile(full) else None
            if (None if current is None else str(current)) != version:
                return None
            self.fs.pipe_file(full, data)
            return self._bump(full)

    def delete_if(self, full: str, version: str) -> bool:
        with self.op("conditional delete", full), self._service:
            if not self.fs.isfile(full) or str(self._generations.get(full)) != version:
                return False
            self.fs.rm_file(full)
            del self._generations[full]
            return True


class OverwritingStore(GenerationStore):
    """Breaks the contract: a create (``version`` None) replaces a file that exists."""

    protocols = ("genmem-overwriting",)

    def put_if(
        self, full: str, data: bytes, version: str | None, *, append: bool = False
    ) -> str | None:
        if version is None:
            current = self.read_versioned(full)
            version = current[1] if current else None
        return super().put_if(full, data, version, append=append)


class LostUpdateStore(GenerationStore):
    """Breaks the contract: a conditional write ignores the version it was given."""

    protocols = ("genmem-lost-update",)

    def put_if(
        self, full: str, data: bytes, version: str | None, *, append: bool = False
    ) -> str | None:
        self.write(full, data)
        return str(self._generations[full])


class ClaimsTokensStore(GenerationStore):
    """Breaks the contract: claims its versions are change tokens, which they are not."""

    protocols = ("genmem-tokens",)
    versions_are_tokens = True


class Misregistered(GenerationStore):
    """Registered for a protocol it does not claim."""


STORES = {
    "genmem": GenerationStore,
    "genmem-overwriting": OverwritingStore,
    "genmem-lost-update": LostUpdateStore,
    "genmem-tokens": ClaimsTokensStore,
    "genmem-wrong": Misregistered,
}


@pytest.fixture(scope="module", autouse=True)
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The distribution ``harnessmem-genmem`` installed, with one entry point per store."""
    site = tmp_path_factory.mktemp("site")
    info = site / "harnessmem_genmem-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {DISTRIBUTION}\nVersion: 0.1.0\n", encoding="utf-8"
    )
    lines = [f"{name} = {MODULE}:{cls.__name__}\n" for name, cls in STORES.items()]
    (info / "entry_points.txt").write_text("[harnessmem.storage]\n" + "".join(lines))
    module = types.ModuleType(MODULE)
    for cls in STORES.values():
        setattr(module, cls.__name__, cls)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        patch.setitem(sys.modules, MODULE, module)
        yield site


def _url(protocol: str = "genmem") -> str:
    return f"{protocol}://test-{uuid.uuid4().hex}"


class TestThirdPartyStore(WorkspaceSuite):
    """The suite a store's author runs, on the store above."""

    @pytest.fixture
    def workspace(self, clock: FakeClock) -> Iterator[Workspace]:
        ws = Workspace.open(_url(), clock=clock)
        assert type(ws.store) is GenerationStore
        yield ws
        if ws.fs.exists(ws.root):
            ws.fs.rm(ws.root, recursive=True)


# -- the suite fails stores that break the contract --------------------------------------


def test_the_suite_fails_a_store_whose_create_overwrites(clock: FakeClock) -> None:
    ws = Workspace.open(_url("genmem-overwriting"), clock=clock)
    with pytest.raises(AssertionError):
        WorkspaceSuite().test_create_text_only_when_absent(ws, clock)


def test_the_suite_fails_a_store_that_loses_updates(clock: FakeClock) -> None:
    ws = Workspace.open(_url("genmem-lost-update"), clock=clock)
    with pytest.raises(AssertionError, match="redone"):
        WorkspaceSuite().test_update_text_is_a_compare_and_swap(ws, clock)


def test_the_suite_fails_a_store_that_claims_change_tokens_falsely(clock: FakeClock) -> None:
    ws = Workspace.open(_url("genmem-tokens"), clock=clock)
    with pytest.raises(AssertionError):
        WorkspaceSuite().test_versions_are_the_change_tokens_the_store_claims(ws)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# -- finding stores ----------------------------------------------------------------------


def test_the_built_in_stores_register_through_the_entry_point_group() -> None:
    """harnessmem's own stores are found as any plugin's: by entry point, by protocol."""
    found = {
        ep.name: ep.value
        for ep in metadata.entry_points(group="harnessmem.storage")
        if ep.dist is not None and ep.dist.name == "harnessmem"
    }
    assert found == {
        "file": "harnessmem.workspace:LocalStore",
        "local": "harnessmem.workspace:LocalStore",
        "memory": "harnessmem.workspace:MemoryStore",
        "s3": "harnessmem.workspace:S3Store",
        "s3a": "harnessmem.workspace:S3Store",
    }
    expected = {"file": LocalStore, "local": LocalStore, "memory": MemoryStore, "s3": S3Store}
    for protocol, cls in expected.items():
        assert store_class(f"{protocol}://bucket/ws") is cls
    assert store_class("relative/folder") is LocalStore
    assert store_class("s3a://bucket/ws") is S3Store


def test_the_flags_of_the_built_in_stores() -> None:
    """What each built-in store promises the workspace (docs/workspace.md lists it)."""
    flags = {
        cls.__name__: (cls.conditional, cls.cross_process, cls.is_local, cls.native_append)
        for cls in (LocalStore, S3Store, MemoryStore, FsspecStore)
    }
    assert flags == {
        "LocalStore": (True, True, True, True),
        "S3Store": (True, True, False, False),
        "MemoryStore": (True, False, False, False),
        "FsspecStore": (False, False, False, False),
    }


def test_an_unknown_protocol_lists_the_installed_stores() -> None:
    with pytest.raises(WorkspaceError) as info:
        Workspace.open("genmen://bucket/ws")
    message = info.value.message
    assert message.startswith("open workspace 'genmen://bucket/ws' failed: no store for ")
    assert "file, local (harnessmem.workspace:LocalStore, harnessmem " in message
    assert "s3, s3a (harnessmem.workspace:S3Store, harnessmem " in message
    assert f"genmem ({MODULE}:GenerationStore, {DISTRIBUTION} 0.1.0)" in message
    assert message.endswith("did you mean 'genmem'?")
    assert "'harnessmem.storage'" in str(info.value.hint)


def test_a_protocol_only_fsspec_knows_gets_the_generic_store_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = f"dir::memory://test-{uuid.uuid4().hex}"
    with caplog.at_level(logging.WARNING, logger="harnessmem.workspace"):
        ws = Workspace.open(url)
    assert type(ws.store) is FsspecStore
    assert (ws.store.conditional, ws.store.cross_process) == (False, False)
    (record,) = caplog.records
    assert "no installed store claims protocol 'dir'" in record.getMessage()
    assert "safe within one process only" in record.getMessage()
    ws.append_text("log.md", "a\n")  # under a lease, as before
    ws.append_text("log.md", "b\n")
    assert ws.read_text("log.md") == "a\nb\n"


def test_a_store_registered_for_a_protocol_it_does_not_claim_is_refused() -> None:
    with pytest.raises(PluginError, match=r"registered for protocol 'genmem-wrong'"):
        Workspace.open("genmem-wrong://ws")


def test_a_store_must_implement_the_compare_and_swap() -> None:
    class Incomplete(WorkspaceStore):
        protocols = ("incomplete",)

    with pytest.raises(TypeError, match="put_if"):
        Incomplete(object(), "/root", "incomplete://root")  # type: ignore[abstract,arg-type]
