"""Shared fixtures of the core test suite."""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harnessmem.testing.s3_server import S3TestServer

# -- fake installed distributions (real importlib.metadata discovery) ----------------------------


@dataclass
class FakeDistributions:
    """Writes importable modules and ``*.dist-info`` folders to a directory on ``sys.path``."""

    root: Path

    def add(
        self,
        name: str,
        entry_points: dict[str, dict[str, str]],
        modules: dict[str, str] | None = None,
        version: str = "0.1.0",
    ) -> None:
        for module, source in (modules or {}).items():
            (self.root / f"{module}.py").write_text(textwrap.dedent(source))
        info = self.root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        lines = []
        for group, items in entry_points.items():
            lines.append(f"[{group}]")
            lines.extend(f"{key} = {value}" for key, value in items.items())
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        importlib.invalidate_caches()


@pytest.fixture
def fake_distributions(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeDistributions]:
    """Install throwaway distributions (entry points + modules) for this test only."""
    root = tmp_path_factory.mktemp("site")
    monkeypatch.syspath_prepend(str(root))
    before = set(sys.modules)
    yield FakeDistributions(root)
    for module in set(sys.modules) - before:
        if getattr(sys.modules[module], "__file__", "") and str(root) in str(
            sys.modules[module].__file__
        ):
            del sys.modules[module]
    importlib.invalidate_caches()


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No HARNESSMEM_* variable or ./harnessmem.toml of the developer leaks into a test,
    and the index cache of a remote workspace lands in ``tmp_path``, not in ~/.cache."""
    for key in list(os.environ):
        if key.startswith("HARNESSMEM_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ".cache"))
    monkeypatch.chdir(tmp_path)


# -- S3: moto's server on loopback ---------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3TestServer]:
    """moto's S3 on 127.0.0.1 (any free port) for the session, one request at a time.

    Its request log and fault injection (``S3TestServer.record``, ``inject``) serve the
    cost and fault tests; faults are cleared after each test that uses ``s3_faults``.
    """
    import logging

    # Dummy credentials, no shared config files and no instance metadata lookups, so that
    # nothing can reach a real AWS account (subprocesses inherit them too).
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one log line per request
    with pytest.MonkeyPatch.context() as patch:
        for key, value in env.items():
            patch.setenv(key, value)
        with S3TestServer() as server:
            yield server


@pytest.fixture(scope="session")
def s3_endpoint(s3_server: S3TestServer) -> str:
    """The URL of the session's moto server."""
    return s3_server.endpoint_url


@pytest.fixture(scope="session")
def _s3_admin(s3_server: S3TestServer) -> Iterator[Any]:
    # One botocore client for every bucket of the session: making one costs ~0.5 s.
    client = s3_server.client()
    yield client
    client.close()


@pytest.fixture
def s3_storage_options(s3_server: S3TestServer) -> dict[str, Any]:
    """fsspec/s3fs storage_options that reach the moto server."""
    return s3_server.storage_options()


@pytest.fixture
def s3_bucket(s3_server: S3TestServer, _s3_admin: Any) -> str:
    """A new, empty bucket for this test."""
    return s3_server.create_bucket(client=_s3_admin)


@pytest.fixture
def s3_workspace_url(s3_bucket: str) -> str:
    """``s3://<fresh bucket>/workspace``: a workspace URL no other test uses."""
    return f"s3://{s3_bucket}/workspace"


@pytest.fixture
def s3_faults(s3_server: S3TestServer) -> Iterator[S3TestServer]:
    """The moto server, for a test that injects faults; they are removed afterwards."""
    s3_server.clear_faults()
    yield s3_server
    s3_server.clear_faults()


# -- one workspace fixture for local and S3 ------------------------------------------------------


@dataclass(frozen=True)
class WorkspaceTarget:
    """Where a test's workspace lives: a local folder or a fresh S3 bucket on moto.

    ``workspace`` is the settings section to open a harness with (merge more keys into
    it with :meth:`section`); :meth:`open` opens a harness on it.
    """

    kind: str
    url: str
    storage_options: dict[str, Any]

    @property
    def is_s3(self) -> bool:
        return self.kind == "s3"

    def sibling(self, name: str) -> WorkspaceTarget:
        """Another workspace on the same store, beside this one (``<url>-<name>``)."""
        return WorkspaceTarget(self.kind, f"{self.url}-{name}", dict(self.storage_options))

    def section(self, **extra: Any) -> dict[str, Any]:
        """The ``workspace`` settings section for this target, plus ``extra`` keys."""
        return {"url": self.url, "storage_options": dict(self.storage_options), **extra}

    def open(self, **kwargs: Any) -> Any:
        """``MemoryHarness.open`` on this workspace (``workspace=`` keys are merged in)."""
        from harnessmem import MemoryHarness

        section = self.section(**kwargs.pop("workspace", {}))
        return MemoryHarness.open(section.pop("url"), workspace=section, **kwargs)

    def stored_bytes(self, tmp_path: Path) -> dict[str, bytes]:
        """Every byte harnessmem keeps for this test: workspace files and local caches.

        Local files under ``tmp_path`` (a local workspace, the index database, the index
        cache of a remote workspace) plus, on S3, every object of the workspace.
        """
        found = {str(p): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
        if self.is_s3:
            from harnessmem.workspace import Workspace

            ws = Workspace.open(self.url, self.storage_options)
            for path in ws.list():
                found[f"{self.url}/{path}"] = ws.read_bytes(path)
        return found


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.s3)])
def workspace_target(request: pytest.FixtureRequest, tmp_path: Path) -> WorkspaceTarget:
    """The workspace a lifecycle test runs on: each such test runs on a local folder and
    on S3 (moto), through the same harness API a user's URL and storage_options reach."""
    if request.param == "local":
        return WorkspaceTarget("local", str(tmp_path / "ws"), {})
    url = request.getfixturevalue("s3_workspace_url")
    return WorkspaceTarget("s3", url, request.getfixturevalue("s3_storage_options"))
