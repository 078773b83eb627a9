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
    """No HARNESSMEM_* variable or ./harnessmem.toml of the developer leaks into a test."""
    for key in list(os.environ):
        if key.startswith("HARNESSMEM_"):
            monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)


# -- S3: moto's server on loopback ---------------------------------------------------------------


def _serialise_moto_requests(patch: pytest.MonkeyPatch) -> None:
    """Let moto's threaded server handle one request at a time.

    S3 applies each request to an object atomically. moto does not: its If-Match check and
    the write are separate steps, and a GET racing with a PUT of the same key can read the
    replaced object's closed buffer (HTTP 500). Serialising requests gives tests S3's
    guarantees, so that a lost append means a bug in harnessmem, not in the fake.
    """
    import threading

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication

    lock = threading.Lock()
    handle = DomainDispatcherApplication.__call__

    def one_at_a_time(self: DomainDispatcherApplication, environ: Any, start: Any) -> Any:
        with lock:
            return handle(self, environ, start)

    patch.setattr(DomainDispatcherApplication, "__call__", one_at_a_time)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """Start moto's S3 server on 127.0.0.1 (any free port) for the session; its URL."""
    import logging

    from moto.server import ThreadedMotoServer

    # Dummy credentials, no shared config files and no instance metadata lookups, so that
    # nothing can reach a real AWS account.
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
        _serialise_moto_requests(patch)
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        try:
            yield f"http://{host}:{port}"
        finally:
            server.stop()


@pytest.fixture
def s3_storage_options(s3_endpoint: str) -> dict[str, str]:
    """fsspec/s3fs storage_options that reach the moto server."""
    return {"endpoint_url": s3_endpoint, "key": "testing", "secret": "testing"}


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A new, empty bucket for this test."""
    import uuid

    import botocore.session

    client = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=s3_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    name = f"test-{uuid.uuid4().hex[:20]}"
    try:
        client.create_bucket(Bucket=name)
    finally:
        client.close()
    return name


@pytest.fixture
def s3_workspace_url(s3_bucket: str) -> str:
    """``s3://<fresh bucket>/workspace``: a workspace URL no other test uses."""
    return f"s3://{s3_bucket}/workspace"
