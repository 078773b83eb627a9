"""Workspace on local disk, memory:// and S3 (moto on loopback), plus multi-process checks."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessmem.errors import LeaseError, PathNotAllowed, WorkspaceError
from harnessmem.layout import path_problem
from harnessmem.testing.s3_server import S3TestServer
from harnessmem.testing.workspace_suite import FakeClock, WorkspaceSuite
from harnessmem.workspace import Workspace
from harnessmem.workspace.waiter import Waiter


class TestLocalWorkspace(WorkspaceSuite):
    """The suite on a local folder."""

    @pytest.fixture
    def workspace(self, clock: FakeClock, tmp_path: Path) -> Workspace:
        return Workspace.open(tmp_path / "ws", clock=clock)


class TestMemoryWorkspace(WorkspaceSuite):
    """The suite on fsspec's in-process memory filesystem."""

    @pytest.fixture
    def workspace(self, clock: FakeClock) -> Iterator[Workspace]:
        ws = Workspace.open(f"memory://test-{uuid.uuid4().hex}", clock=clock)
        yield ws
        if ws.fs.exists(ws.root):
            ws.fs.rm(ws.root, recursive=True)


@pytest.mark.s3
class TestS3Workspace(WorkspaceSuite):
    """The suite on S3 (moto's server on 127.0.0.1)."""

    @pytest.fixture
    def workspace(
        self, clock: FakeClock, s3_workspace_url: str, s3_storage_options: dict[str, str]
    ) -> Workspace:
        return Workspace.open(s3_workspace_url, s3_storage_options, clock=clock)


# -- open ----------------------------------------------------------------------------------------


def test_open_local_forms(tmp_path: Path) -> None:
    """Relative paths (created), PathLike, file:// URLs and trailing slashes give one workspace."""
    relative = Workspace.open("rel/ws")  # the autouse fixture chdirs to tmp_path
    assert relative.local_root == (tmp_path / "rel" / "ws").resolve()
    assert relative.local_root.is_dir()
    assert (relative.protocol, relative.is_local) == ("file", True)
    assert relative.url == relative.local_root.as_uri()
    for form in (tmp_path / "rel" / "ws", f"{tmp_path}/rel/ws/", relative.url + "/"):
        again = Workspace.open(form)
        assert (again.url, again.root) == (relative.url, relative.root)
    relative.write_text("memory/x.md", "x")
    assert relative.local_path("memory/x.md") == relative.local_root / "memory" / "x.md"
    assert (relative.local_root / "memory" / "x.md").read_text() == "x"


def test_open_memory_url_normalised() -> None:
    """memory:// URLs lose the trailing slash; the workspace is not local."""
    name = f"test-{uuid.uuid4().hex}"
    ws = Workspace.open(f"memory://{name}/")
    assert ws.url == f"memory:///{name}"
    assert (ws.protocol, ws.is_local, ws.local_root) == ("memory", False, None)
    assert ws.local_path("a.md") is None
    assert Workspace.open(ws.url).root == ws.root


@pytest.mark.s3
def test_open_s3_url_normalised(s3_workspace_url: str, s3_storage_options: dict[str, str]) -> None:
    """s3:// URLs keep bucket/prefix without the trailing slash; root is inside the bucket."""
    ws = Workspace.open(s3_workspace_url + "/", s3_storage_options)
    assert ws.url == s3_workspace_url
    assert ws.root == s3_workspace_url.removeprefix("s3://")
    assert (ws.protocol, ws.is_local, ws.local_root) == ("s3", False, None)


def test_open_refuses_bucketless_url() -> None:
    """A URL that names no folder is a WorkspaceError with a hint, not a silent root."""
    with pytest.raises(WorkspaceError, match="open workspace 'memory://' failed"):
        Workspace.open("memory://")


def test_import_stays_light() -> None:
    """Importing harnessmem.workspace loads neither fsspec nor s3fs (they load in open())."""
    code = (
        "import sys, harnessmem, harnessmem.workspace\n"
        "print(sorted(m for m in ('fsspec', 's3fs', 'botocore') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


# -- errors --------------------------------------------------------------------------------------


def test_storage_failure_is_workspace_error(tmp_path: Path) -> None:
    """A failing storage call raises WorkspaceError naming op, path and workspace, chained."""
    ws = Workspace.open(tmp_path / "ws")
    ws.write_text("memory/a.md", "a")
    with pytest.raises(WorkspaceError) as info:
        ws.read_text("memory")
    message = str(info.value)
    assert message.startswith(f"read 'memory' in {ws.url} failed: IsADirectoryError")
    assert isinstance(info.value.__cause__, IsADirectoryError)


@pytest.mark.s3
def test_s3_missing_bucket_is_a_workspace_error(s3_storage_options: dict[str, str]) -> None:
    """A missing bucket is a WorkspaceError with a hint, not a missing file or a retry loop."""
    ws = Workspace.open(f"s3://missing-{uuid.uuid4().hex[:12]}/ws", s3_storage_options)
    for call in (
        lambda: ws.write_text("a.md", "a"),
        lambda: ws.read_text("a.md"),
        lambda: ws.append_text("a.md", "a"),
        lambda: ws.list(),
        lambda: ws.lock("maintenance"),
    ):
        with pytest.raises(WorkspaceError, match=r"in s3://missing-.+ failed") as info:
            call()
        assert info.value.hint is not None
        assert "create the bucket" in info.value.hint


def test_append_gives_up_after_bounded_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    """When every conditional write loses, append stops after a bounded number of tries."""
    ws = Workspace.open(f"memory://test-{uuid.uuid4().hex}")
    monkeypatch.setattr(ws.store, "put_if", lambda *args, **kwargs: None)
    naps: list[float] = []
    ws.lease_waiter = Waiter(sleep=naps.append)
    with pytest.raises(
        WorkspaceError, match=r"append 'log\.md' in memory:///test-.* kept changing"
    ) as info:
        ws.append_text("log.md", "x\n")
    attempts = re.search(r"\((\d+) conditional writes lost", str(info.value))
    assert attempts is not None
    assert len(naps) == int(attempts[1]) <= 100, "one pause after each lost write"
    assert max(naps) <= 0.25


def test_a_write_that_lost_reads_again_after_its_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a lost conditional write the pause comes first, then the read: the retry
    starts from the text as it is when it goes out. (Read before the pause, the text goes
    stale whenever another writer appends meanwhile, and a writer appending from its own
    last write, without a read, then wins every round.)"""
    ws = Workspace.open(f"memory://test-{uuid.uuid4().hex}")
    ws.write_text("log.md", "a\n")
    other = ws.store.put_if
    events: list[str] = []
    lost = iter([True])

    def put_if(*args: Any, **kwargs: Any) -> Any:
        if next(lost, False):
            events.append("lost")
            return None
        events.append("written")
        return other(*args, **kwargs)

    reads = ws.store.read_versioned

    def read_versioned(*args: Any, **kwargs: Any) -> Any:
        events.append("read")
        return reads(*args, **kwargs)

    monkeypatch.setattr(ws.store, "put_if", put_if)
    monkeypatch.setattr(ws.store, "read_versioned", read_versioned)
    ws.lease_waiter = Waiter(sleep=lambda _: events.append("pause"))
    ws.append_text("log.md", "b\n")
    up_to_the_write = events[: events.index("written") + 1]
    assert up_to_the_write == ["read", "lost", "pause", "read", "written"]
    assert ws.read_text("log.md") == "a\nb\n"


def test_append_without_conditional_writes_uses_a_lease() -> None:
    """Stores without compare-and-swap append under a lease; concurrent appends all land."""
    import threading

    ws = Workspace.open(f"memory://test-{uuid.uuid4().hex}")
    ws.store.conditional = False  # behave like a store without conditional writes

    def worker(t: int) -> None:
        for i in range(10):
            ws.append_text("log.md", f"{t}-{i}\n")

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert sorted(ws.read_text("log.md").splitlines()) == sorted(
        f"{t}-{i}" for t in range(4) for i in range(10)
    )
    assert ws.try_lock("append:log.md") is not None, "the append lease was not released"


def test_lease_file_format(tmp_path: Path) -> None:
    """A lease is JSON {name, owner, token, acquired, expires, holder} at
    .locks/<safe name>.lease (holder: see tests/test_workspace_leases.py)."""
    clock = FakeClock()
    ws = Workspace.open(tmp_path / "ws", clock=clock)
    with ws.lock("maintenance/tick", ttl=30) as lease:
        files = list((tmp_path / "ws" / ".locks").glob("*.lease"))
        assert len(files) == 1
        assert files[0].name.startswith("maintenance_tick-")
        record = json.loads(files[0].read_text())
        assert record.pop("holder")["pid"] == os.getpid()
        assert record == {
            "name": "maintenance/tick",
            "owner": lease.owner,
            "token": lease.token,
            "acquired": clock.now,
            "expires": clock.now + 30,
        }
    assert not files[0].exists()
    with pytest.raises(ValueError, match="ttl"):
        ws.lock("x", ttl=0)


# -- several processes ---------------------------------------------------------------------------

_CHILD = """
import json, sys
from harnessmem.workspace import Workspace
mode, url, options, worker, count = sys.argv[1:6]
if mode == "append":
    ws = Workspace.open(url, json.loads(options))
    print("ready", flush=True)
    sys.stdin.readline()  # start together, so the appends really overlap
    for i in range(int(count)):
        ws.append_text("memory/shared.md", f"- worker {worker} entry {i:03d} {'y' * 30}\\n")
else:  # take a lease at time 1000 with ttl 10 and die without releasing it
    ws = Workspace.open(url, json.loads(options), clock=lambda: 1000.0)
    ws.lock("maintenance", ttl=10)
print("done", flush=True)
"""


def _run_children(mode: str, url: str, options: dict[str, Any], workers: int, count: int) -> None:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, mode, url, json.dumps(options), str(w), str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    try:
        if mode == "append":
            for child in children:
                assert child.stdout is not None
                assert child.stdout.readline().strip() == "ready"
            for child in children:  # all are ready: let them go at once
                assert child.stdin is not None
                child.stdin.write("go\n")
                child.stdin.flush()
        for child in children:
            out, err = child.communicate(timeout=120)
            assert child.returncode == 0, f"a child failed:\n{err[-3000:]}"
            assert out.strip().endswith("done"), err[-3000:]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def _check_appends(ws: Workspace, workers: int, count: int) -> int:
    """Every entry once and intact; how often the writer changed from one line to the next
    (``workers - 1`` when the processes ran one after another)."""
    lines = ws.read_text("memory/shared.md").splitlines()
    expected = [
        f"- worker {w} entry {i:03d} {'y' * 30}" for w in range(workers) for i in range(count)
    ]
    assert len(lines) == len(expected)
    assert sorted(lines) == sorted(expected)  # each exactly once, none torn
    writers = [line.split()[2] for line in lines]
    return sum(a != b for a, b in itertools.pairwise(writers))


def _appends_race(
    url: str,
    options: dict[str, Any],
    workers: int = 4,
    count: int = 50,
    server: S3TestServer | None = None,
) -> None:
    """The children append at once; a run whose processes happened to go one after another
    (a busy machine) tested nothing and runs again in a fresh workspace, at most three
    times, before the test says so. On S3 a run whose writers collided (conditional PUTs of
    the file answered 412, then read again and retried) counts as a race too: a writer that
    appends from its own last write is fast enough to finish its entries between others'
    retries, so the lines need not interleave."""
    switches, collisions = [], []
    for attempt in range(3):
        where = f"{url}/race-{attempt}"
        with server.record() if server is not None else nullcontext([]) as requests:
            _run_children("append", where, options, workers=workers, count=count)
        switches.append(_check_appends(Workspace.open(where, options), workers, count))
        collisions.append(
            sum(
                r.method == "PUT" and r.status == 412 and r.key.endswith("shared.md")
                for r in requests
            )
        )
        if switches[-1] > workers - 1 or collisions[-1] > 0:
            return
    raise AssertionError(
        f"the processes ran one after another ({switches} switches, {collisions} collisions)"
    )


@pytest.mark.slow
def test_appends_from_processes_local(tmp_path: Path) -> None:
    """4 processes x 50 appends to one local file: all 200 entries, each once, intact."""
    _appends_race(Workspace.open(tmp_path / "ws").url, {})


@pytest.mark.s3
@pytest.mark.slow
def test_appends_from_processes_s3(
    s3_workspace_url: str, s3_storage_options: dict[str, str], s3_server: S3TestServer
) -> None:
    """4 processes x 50 appends to one S3 object: conditional PUTs lose nothing."""
    _appends_race(s3_workspace_url, s3_storage_options, server=s3_server)


@pytest.mark.parametrize("store", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_lease_of_dead_process_taken_over_after_expiry(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A lease left by a process that died is taken over: at once where the holder is
    known dead (a process of this machine, on Linux; tests/test_workspace_leases.py),
    else once it expires."""
    if store == "s3":
        url = request.getfixturevalue("s3_workspace_url")
        options = request.getfixturevalue("s3_storage_options")
    else:
        url, options = str(tmp_path / "ws"), {}
    _run_children("lease", url, options, workers=1, count=0)
    clock = FakeClock(now=1005.0)
    ws = Workspace.open(url, options, clock=clock)
    if not sys.platform.startswith("linux"):
        with pytest.raises(LeaseError, match=r"held by .+ until 1970-01-01T00:16:50"):
            ws.lock("maintenance")
        clock.advance(6)
    with ws.lock("maintenance") as lease:
        assert lease.held


_PATH_PARTS = st.sampled_from(
    [
        "memory",
        "a",
        "MEMORY.md",
        "2026-01-01.md",
        ".",
        "..",
        "",
        ".locks",
        ".hidden",
        "x:y",
        "C:",
        "s3:",
        "a\\b",
        "a\x00b",
        "é",
        "dir name",
        "-",
        "_",
        "@x",
        "a.b.c",
        "~",
        "+=,",
    ]
)


@settings(max_examples=500, deadline=None)
@given(parts=st.lists(_PATH_PARTS, max_size=5), lead=st.sampled_from(["", "/", "./"]))
def test_plain_path_shortcut_agrees_with_the_full_check(parts: list[str], lead: str) -> None:
    """A workspace takes a path as layout.path_problem, the one statement of path rules,
    says: the same normal form, or refused for its reason (whatever shortcut it takes for
    paths already normal)."""
    workspace = Workspace.open("memory://shortcut")
    path = lead + "/".join(parts)
    rel, why = path_problem(path)
    if why is None:
        assert workspace.resolve(path) == workspace.store.join(rel)
    else:
        with pytest.raises(PathNotAllowed) as info:
            workspace.resolve(path)
        assert str(info.value).splitlines()[0].endswith(f": {why}")


def test_local_append_locks_stay_bounded_and_shared_stripes_still_exclude(
    tmp_path: Path,
) -> None:
    """However many files get appended to, .locks/files/ holds at most LOCK_STRIPES files;
    two paths on one stripe still append whole lines from many threads."""
    from concurrent.futures import ThreadPoolExecutor

    from harnessmem.layout import LOCK_STRIPES, lock_stripe

    workspace = Workspace.open(tmp_path / "ws")
    paths = [f"memory/f{n}.md" for n in range(LOCK_STRIPES * 3)]
    for path in paths:
        workspace.append_text(path, "x\n")
    locks = list((tmp_path / "ws" / ".locks" / "files").iterdir())
    assert len(locks) == len({lock_stripe(path) for path in paths}) <= LOCK_STRIPES
    a = paths[0]
    b = next(path for path in paths[1:] if lock_stripe(path) == lock_stripe(a))

    def write(i: int) -> None:
        workspace.append_text(a if i % 2 else b, f"line {i} " + "y" * 500 + "\n")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(write, range(200)))
    for path in (a, b):
        lines = workspace.read_text(path).splitlines()[1:]
        assert len(lines) == 100
        assert all(line.endswith("y" * 500) for line in lines)


@pytest.mark.parametrize("recursive", [True, False])
def test_local_scan_agrees_with_find_and_info(tmp_path: Path, recursive: bool) -> None:
    """The scandir-based scan lists what find lists, with what info says of each file."""
    workspace = Workspace.open(tmp_path / "ws")
    root = tmp_path / "ws"
    renamed: list[str] = []
    real_replace = os.replace

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        renamed.append(os.fspath(src))
        real_replace(src, dst, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "replace", replace)
        for path in (
            "MEMORY.md",
            "memory/2026-01-01.md",
            "memory/deep/x.md",
            "sessions/a.log.jsonl",
        ):
            workspace.write_text(path, "text\n")
    workspace.append_text("memory/2026-01-01.md", "more\n")  # makes .locks/files/
    # A write in progress: a temp file named as the local store names them, not yet renamed.
    in_progress = Path(renamed[0])
    assert in_progress.parent == root
    (root / "memory" / in_progress.name.replace("MEMORY.md", "f.md")).write_text("half")
    suffix = in_progress.suffix
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.md").write_text("s")
    (outside / "dir" / "inner.md").write_text("i")
    try:
        (root / "memory" / "in-link.md").symlink_to(root / "MEMORY.md")
        (root / "memory" / "out-link.md").symlink_to(outside / "secret.md")
        (root / "memory" / "linked-dir").symlink_to(outside / "dir", target_is_directory=True)
        (root / "memory" / "broken.md").symlink_to(root / "nowhere.md")
    except OSError as exc:
        pytest.skip(f"cannot create symlinks here: {exc}")
    store = workspace.store
    for folder in ("", "memory"):
        full = store.join(folder)
        scanned = list(store.scan(full, recursive))
        assert [path for path, *_ in scanned] == sorted(
            p for p in store.find(full, recursive) if p != "memory/broken.md"
        )
        for path, *fields in scanned:
            assert tuple(fields) == store.info(store.join(path))
    paths = [path for path, *_ in store.scan(store.join(""), True)]
    assert "memory/in-link.md" in paths
    assert "memory/out-link.md" not in paths
    assert not any(
        p.startswith((".locks", "memory/linked-dir")) or p.endswith(suffix) for p in paths
    )


# -- one listing for a block of lists and scans ---------------------------------------------------


class _CountingFinds:
    """Counts the store's listings (``find`` and ``scan``) of a workspace."""

    def __init__(self, ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        store = ws.store
        for name in ("find", "scan"):
            real = getattr(store, name)

            def counted(directory: str, recursive: bool, real: Any = real, name: str = name) -> Any:
                self.calls.append(name)
                return real(directory, recursive)

            monkeypatch.setattr(store, name, counted)


@pytest.mark.parametrize("url", ["memory://listing-{n}", "local"])
def test_a_listing_snapshot_lists_once_and_sees_its_own_writes(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = str(tmp_path / "ws") if url == "local" else url.format(n=id(tmp_path))
    ws = Workspace.open(target)
    for path in (
        "MEMORY.md",
        "memory/2026-01-01.md",
        "memory/archive/2025-01-01.md",
        "sessions/a.log.jsonl",
    ):
        ws.write_text(path, "x\n")
    counting = _CountingFinds(ws, monkeypatch)
    with ws.listing_snapshot():
        assert ws.list("memory", recursive=False) == ["memory/2026-01-01.md"]
        assert ws.list("memory") == ["memory/2026-01-01.md", "memory/archive/2025-01-01.md"]
        assert [i.path for i in ws.scan("sessions")] == ["sessions/a.log.jsonl"]
        assert ws.info("MEMORY.md", listed=True).size == 2
        assert counting.calls == ["scan"], "one listing of the whole workspace"
        ws.write_text("memory/2026-01-02.md", "y\n")
        assert ws.list("memory", recursive=False) == [
            "memory/2026-01-01.md",
            "memory/2026-01-02.md",
        ], "a folder this thread wrote to is listed afresh"
        assert ws.list("sessions") == ["sessions/a.log.jsonl"]
        assert ws.list() == sorted(
            [
                "MEMORY.md",
                "memory/2026-01-01.md",
                "memory/2026-01-02.md",
                "memory/archive/2025-01-01.md",
                "sessions/a.log.jsonl",
            ]
        ), "a recursive listing above a written folder is fresh too"
        with pytest.raises(FileNotFoundError):
            ws.info("memory/nope.md", listed=True)
    counting.calls.clear()
    ws.list("memory")
    assert counting.calls[:1] == ["find"], "outside the block every list asks the store"


def test_a_listing_snapshot_serves_only_its_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace.open(str(tmp_path / "ws"))
    ws.write_text("memory/2026-01-01.md", "x\n")
    seen: list[list[str]] = []
    with ws.listing_snapshot():
        ws.list("memory")
        other = threading.Thread(
            target=lambda: (
                ws.write_text("memory/2026-01-02.md", "y\n"),
                seen.append(ws.list("memory")),
            )
        )
        other.start()
        other.join()
        assert ws.listing_active
        assert ws.list("memory") == ["memory/2026-01-01.md"], "the block's listing stands"
    assert seen == [["memory/2026-01-01.md", "memory/2026-01-02.md"]]
    assert ws.list("memory") == seen[0]
