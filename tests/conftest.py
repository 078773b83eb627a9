"""Shared fixtures of the core test suite."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from harnessmem import HarnessSettings, MemoryHarness
from harnessmem.testing import FakeClock, FakeOpenAIServer
from harnessmem.testing.recorders import EventLog
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


@pytest.fixture
def uninstalled(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], None]]:
    """``uninstalled("harnessmem-postgres")``: for this test, entry-point discovery does not
    see that distribution, as if it were not installed."""
    from importlib import metadata

    from harnessmem import plugins

    hidden: set[str] = set()
    real = metadata.distributions

    def distributions(**kwargs: Any) -> Iterator[metadata.Distribution]:
        # What metadata.entry_points() reads, whatever it is asked to select.
        return (dist for dist in real(**kwargs) if dist.name not in hidden)

    monkeypatch.setattr(metadata, "distributions", distributions)
    plugins.refresh_entry_points()  # nothing found before this test, nothing it found after
    yield hidden.add
    plugins.refresh_entry_points()


#: The shared data (real transcripts, benchmarks) beside the checkout, or SHARED_DATA_DIR.
SHARED_DATA = Path(
    os.environ.get("SHARED_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
#: The small data written for these tests, shipped in the repository.
TEST_DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def shared_file() -> Callable[[str], Path]:
    """``shared_file("tau-bench/x.json")``: that file (or folder) of the shared data, or the
    test skips saying how to get it (the suite passes on a clean clone without it)."""

    def find(relative: str) -> Path:
        path = SHARED_DATA / relative
        if not path.exists():
            pytest.skip(
                f"shared data missing at {path}: put the shared data folder beside the "
                "checkout (../shared/data) or set SHARED_DATA_DIR"
            )
        return path

    return find


@pytest.fixture
def airline_run() -> list[dict[str, Any]]:
    """An airline support conversation written for these tests (tests/data/airline-run.json)."""
    data = json.loads((TEST_DATA / "airline-run.json").read_text(encoding="utf-8"))
    return list(data["messages"])


@pytest.fixture(params=["tests/data", "tau-bench"])
def agent_run(
    request: pytest.FixtureRequest,
    airline_run: list[dict[str, Any]],
    shared_file: Callable[[str], Path],
) -> list[dict[str, Any]]:
    """A whole agent run with tool calls: the one written for these tests, and a real
    tau-bench airline run (skipped without the shared data)."""
    if request.param == "tests/data":
        return airline_run
    runs = json.loads(shared_file("tau-bench/gpt-4o-airline-dev.json").read_text())
    return list(runs[3]["traj"])


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No HARNESSMEM_* variable or ./harnessmem.toml of the developer leaks into a test,
    and the index cache of a remote workspace lands in ``tmp_path``, not in ~/.cache."""
    for key in list(os.environ):
        if key.startswith("HARNESSMEM_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / ".cache"))
    # Most tests exercise the flush engine call by call; the tests of batching (and of
    # the defaults as a user meets them) set flush.batch_tokens themselves.
    monkeypatch.setenv("HARNESSMEM_FLUSH__BATCH_TOKENS", "0")
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


# -- harnesses: one event log, one clock, one factory --------------------------------------------

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@pytest.fixture
def events() -> EventLog:
    """A fresh :class:`EventLog`; ``open_harness`` registers it in every harness it opens."""
    return EventLog()


@pytest.fixture
def clock() -> FakeClock:
    """The clock of the harnesses ``open_harness`` opens: 2027-01-15T08:00:00Z until the test
    moves it. A module whose tests need another instant overrides this fixture."""
    return FakeClock(NOW)


class HarnessFactory(Protocol):
    def __call__(self, model: Any = None, **sections: Any) -> MemoryHarness: ...


@pytest.fixture
def open_harness(
    workspace_target: WorkspaceTarget, clock: FakeClock, events: EventLog
) -> Iterator[HarnessFactory]:
    """``open_harness(model, **sections)``: a harness on this test's workspace (local and S3),
    with ``clock`` and ``events``. Sections are settings sections as dicts; maintenance is off
    unless ``maintenance=`` turns it on. Every harness opened is closed after the test."""
    opened: list[MemoryHarness] = []

    def factory(model: Any = None, **sections: Any) -> MemoryHarness:
        sections.setdefault("maintenance", {"enabled": False})
        workspace = workspace_target.section(**sections.pop("workspace", {}))
        settings = HarnessSettings.load(workspace=workspace, **sections)
        harness = MemoryHarness(settings, model=model, clock=clock, plugins=[events])
        opened.append(harness)
        return harness

    yield factory
    for harness in opened:
        harness.close()


# -- several processes at once -------------------------------------------------------------------


class RunTogether(Protocol):
    def __call__(
        self,
        code: str,
        argvs: Sequence[Sequence[str]],
        *,
        envs: Sequence[Mapping[str, str] | None] | None = None,
        timeout: float = 120,
    ) -> list[Any]: ...


@pytest.fixture
def run_together() -> Iterator[RunTogether]:
    """``run_together(code, argvs)``: one ``python -c code *argv`` process per argv, started
    together; returns the JSON each printed last, in order.

    Each child prints ``ready``, then waits for a line on stdin: it gets one only when all
    are ready, so they really compete. A child that fails fails the test with its stderr;
    ``envs`` gives each child its environment. Children left running are killed.
    """
    started: list[subprocess.Popen[str]] = []

    def run(
        code: str,
        argvs: Sequence[Sequence[str]],
        *,
        envs: Sequence[Mapping[str, str] | None] | None = None,
        timeout: float = 120,
    ) -> list[Any]:
        children = [
            subprocess.Popen(
                [sys.executable, "-c", code, *argv],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for argv, env in zip(argvs, envs or [None] * len(argvs), strict=True)
        ]
        started.extend(children)
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                _, err = child.communicate(timeout=timeout)
                pytest.fail(f"a child process did not get ready:\n{err[-3000:]}")
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = []
        for child in children:
            out, err = child.communicate(timeout=timeout)
            assert child.returncode == 0, err[-3000:]
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results

    yield run
    for child in started:
        if child.poll() is None:
            child.kill()
            child.wait()


# -- model endpoints ------------------------------------------------------------------------------


@pytest.fixture
def servers() -> Iterator[Callable[[Any], FakeOpenAIServer]]:
    """Start FakeOpenAIServers for the test; all are closed at its end."""
    started: list[FakeOpenAIServer] = []

    def start(replies: Any) -> FakeOpenAIServer:
        server = FakeOpenAIServer(replies)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture
def cli_server() -> Iterator[Callable[..., tuple[subprocess.Popen[str], str]]]:
    """``cli_server("inspect", "-w", ws, "--port", "0")``: ``harnessmem`` started as a
    process of its own, and the URL it printed on stderr once it listens. Servers still
    running at the end are killed."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[subprocess.Popen[str], str]:
        server = subprocess.Popen(
            [sys.executable, "-m", "harnessmem.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started.append(server)
        assert server.stderr is not None
        line = server.stderr.readline()
        while line and "http://" not in line:
            line = server.stderr.readline()
        assert line, f"harnessmem {args[0]} printed no URL"
        return server, "http://" + line.split("http://", 1)[1].split()[0]

    yield start
    for server in started:
        if server.poll() is None:
            server.kill()
            server.communicate()


def flight_chat(turns: int, last: str) -> list[dict[str, Any]]:
    """A travel agent's conversation: per turn a question, a ``search_flights`` call, its
    long result and an answer; ``last`` is the user's closing request."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a travel agent."}]
    for i in range(turns):
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "search_flights", "arguments": json.dumps({"day": i})},
        }
        messages += [
            {"role": "user", "content": f"What flies on day {i}?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": f"flight {i} costs 100 " * 40},
            {"role": "assistant", "content": f"Flight {i}."},
        ]
    messages.append({"role": "user", "content": last})
    return messages
