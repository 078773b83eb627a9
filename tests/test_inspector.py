"""The web inspector: its pages, escaping of untrusted memory, confinement and the token."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("starlette", reason="the inspector needs the 'inspect' extra")
pytest.importorskip("markdown_it", reason="the inspector needs the 'inspect' extra")

from starlette.testclient import TestClient

from harnessmem import MemoryHarness
from harnessmem.cli import main
from harnessmem.errors import ConfigError
from harnessmem.inspector import check_exposure, create_app, is_loopback
from harnessmem.settings import HarnessSettings

#: The address the apps under test are bound to (``create_app``'s default host): a loopback
#: app answers its own names only, not Starlette's test client's ``testserver``.
LOCAL = "http://127.0.0.1"
HOSTILE = (
    "- <script>alert('memory')</script> was said in a chat\n"
    "- [a link](javascript:alert(1)) and <img src=x onerror=alert(2)>\n"
)


def harness_on(root: Path) -> MemoryHarness:
    settings = HarnessSettings.load(workspace={"url": str(root)}, maintenance={"enabled": False})
    return MemoryHarness(settings)


@pytest.fixture(scope="module")
def example_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inspect") / "workspace"
    result = CliRunner().invoke(main, ["replay", "--example", "-w", str(root)])
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def client(example_root: Path) -> Iterator[TestClient]:
    with (
        harness_on(example_root) as harness,
        TestClient(create_app(harness), base_url=LOCAL) as test_client,
    ):
        yield test_client


def test_every_page_answers_with_the_workspace_s_memory(client: TestClient) -> None:
    pages = {
        "/": "MEMORY.md",
        "/memory": "staging database",
        "/memory/diff": "MEMORY.md:",
        "/daily": "2026-",
        "/search?q=staging+database": "<mark>staging</mark>",
        "/search/results?q=Brest": "<mark>Brest</mark>",
        "/search?q=Brest&source=sessions": "sessions/tidewater-week.log.jsonl",
        "/sessions": "tidewater-week",
        "/sessions/tidewater-week": "Compactions",
        "/usage": "flush",
        "/file?path=MEMORY.md": "MEMORY.md",
    }
    for url, phrase in pages.items():
        response = client.get(url)
        assert response.status_code == 200, url
        assert phrase in response.text, url
        assert "default-src 'none'" in response.headers["content-security-policy"]
    day = client.get("/daily").text.split('href="/daily/')[1].split('"')[0]
    assert client.get(f"/daily/{day}").status_code == 200


def test_a_session_page_shows_each_compaction_and_the_evicted_results(client: TestClient) -> None:
    page = client.get("/sessions/tidewater-week").text
    assert page.count("<rect ") == 3  # the example compacts three times
    assert "large_tool_results/tidewater-week/call_003-" in page


def test_the_diff_shows_what_a_consolidation_changed(client: TestClient) -> None:
    page = client.get("/memory").text
    older = page.split("/memory/diff?from=")[1].split("&")[0]
    diff = client.get(f"/memory/diff?from={older}&to=current").text
    assert '<span class="add"><span class="sign" aria-hidden="true">+ </span>- ' in diff
    assert '<span class="del">-' not in diff, "a sign never runs into a bullet's dash"
    assert client.get("/memory/diff?from=nonsense").status_code == 404


def test_versions_read_apart_and_times_have_no_fraction(
    example_root: Path, client: TestClient
) -> None:
    """Two versions replaced within a minute had one label; a session's times showed
    nine-digit fractions (``.000000Z``)."""
    import re

    labels = re.findall(r"replaced [^<]*UTC(?: \(\d+\))?", client.get("/memory").text)
    assert labels
    assert len(labels) == len(set(labels))
    session = client.get("/sessions/tidewater-week").text
    assert ".000000" not in session
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", session)


def test_memory_text_is_shown_never_run(tmp_path: Path) -> None:
    with harness_on(tmp_path / "ws") as harness:
        harness.workspace.write_text("MEMORY.md", HOSTILE)
        harness.workspace.write_text("memory/2026-11-30.md", HOSTILE)
        with TestClient(create_app(harness), base_url=LOCAL) as client:
            for url in ("/memory", "/daily/2026-11-30", "/search?q=script+alert"):
                text = client.get(url).text
                assert "<script>alert" not in text, url
                assert "<img src=x" not in text, url
                assert 'href="javascript:' not in text, url
                shown = text.replace("<mark>", "").replace("</mark>", "")
                assert "&lt;script&gt;alert(" in shown, url  # there, as text
            # a query is escaped too, and marking its words never breaks the escaping
            text = client.get("/search?q=<b>script</b>").text
            assert "<b>script</b>" not in text


@pytest.mark.parametrize(
    "path", ["../../etc/passwd", "/etc/passwd", ".locks/x", "s3://bucket/x", "memory/../../x"]
)
def test_files_outside_memory_are_refused(client: TestClient, path: str) -> None:
    response = client.get("/file", params={"path": path})
    assert response.status_code == 403
    assert "root:" not in response.text


def test_unknown_daily_logs_and_sessions_are_404(client: TestClient) -> None:
    assert client.get("/daily/1999-01-01").status_code == 404
    assert client.get("/daily/..%2F..%2Fetc").status_code == 404
    assert client.get("/sessions/no-such").status_code == 404


def test_a_token_guards_every_request(example_root: Path) -> None:
    with harness_on(example_root) as harness:
        app = create_app(harness, token="s3cret-token", host="0.0.0.0")
        with TestClient(app) as client:
            assert client.get("/").status_code == 401
            assert client.get("/static/htmx.min.js").status_code == 401
            assert client.get("/?token=wrong").status_code == 401
            wrong = client.get("/memory", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            assert "staging" not in wrong.text
            bearer = client.get("/memory", headers={"Authorization": "Bearer s3cret-token"})
            assert bearer.status_code == 200
            first = client.get("/memory?token=s3cret-token", follow_redirects=False)
            assert first.status_code == 303
            assert "token" not in first.headers["location"]
            assert "HttpOnly" in first.headers["set-cookie"]
            assert client.get("/memory").status_code == 200  # the cookie from now on


def test_on_loopback_other_host_names_are_refused(client: TestClient) -> None:
    # a page on another site that resolves its name to 127.0.0.1 (DNS rebinding) gets nothing
    assert client.get("/", headers={"host": "attacker.example"}).status_code == 400


def test_binding_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    assert all(map(is_loopback, ["127.0.0.1", "::1", "localhost", "[::1]"]))
    assert not any(map(is_loopback, ["0.0.0.0", "192.168.1.4", "example.com"]))
    with pytest.raises(ConfigError, match="without a token"):
        check_exposure("0.0.0.0", None)
    check_exposure("0.0.0.0", "t")
    result = CliRunner().invoke(main, ["inspect", "--host", "0.0.0.0", "-w", str(tmp_path / "w")])
    assert result.exit_code == 3
    assert "without a token" in result.output
    assert not (tmp_path / "w").exists()


def test_inspect_of_a_folder_that_is_no_workspace_creates_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["inspect", "-w", str(tmp_path / "nothing")])
    assert result.exit_code == 5
    assert not (tmp_path / "nothing").exists()


def _csrf(html: str) -> str:
    import re

    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


def test_forget_previews_then_needs_the_form_s_token(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    with harness_on(root) as harness, TestClient(create_app(harness), base_url=LOCAL) as client:
        harness.save("- Maya's cat is called Mirko\n- Maya lives in Porto")
        preview = client.get("/forget", params={"q": "Mirko"})
        assert preview.status_code == 200
        assert "would remove 1 fact matching &#39;Mirko&#39;" in preview.text
        assert "Mirko" in harness.workspace.read_text("MEMORY.md")  # a preview changes nothing
        form = {"q": "Mirko", "csrf": "forged"}
        assert client.post("/forget", data=form).status_code == 403
        assert client.post("/forget", data={"q": "Mirko"}).status_code == 403
        assert "Mirko" in harness.workspace.read_text("MEMORY.md")
        done = client.post("/forget", data={"q": "Mirko", "csrf": _csrf(preview.text)})
        assert done.status_code == 200
        assert "removed 1 fact" in done.text
        assert "Mirko" not in harness.workspace.read_text("MEMORY.md")
        assert "Mirko" not in client.get("/memory").text
        assert "0 hits for" in client.get("/search/results", params={"q": "Mirko"}).text
        missing = client.get("/forget", params={"q": "unicorn"})
        assert missing.status_code == 400
        assert "nothing in" in missing.text


def test_edit_through_the_inspector(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    with harness_on(root) as harness, TestClient(create_app(harness), base_url=LOCAL) as client:
        harness.save("- Maya lives in Porto")
        assert client.get("/forget", params={"q": "Porto", "new": ""}).status_code == 200
        preview = client.get("/forget", params={"q": "Porto", "new": "Maya lives in Braga"})
        assert "would replace 1 fact" in preview.text
        form = {"q": "Porto", "new": "Maya lives in Braga", "csrf": _csrf(preview.text)}
        assert "replaced 1 fact" in client.post("/forget", data=form).text
        assert "- Maya lives in Braga" in harness.workspace.read_text("MEMORY.md")


def test_forget_text_is_escaped(tmp_path: Path) -> None:
    with (
        harness_on(tmp_path / "ws") as harness,
        TestClient(create_app(harness), base_url=LOCAL) as client,
    ):
        harness.save(HOSTILE)
        page = client.get("/forget", params={"q": "script alert memory"}).text
        assert "<script>alert" not in page
        assert "&lt;script&gt;" in page


def test_status_the_inspector_and_consolidation_count_memory_alike(
    example_root: Path, client: TestClient
) -> None:
    """One token count of MEMORY.md: the overview's, status's and the consolidation
    budget's are the same number (the inspector used to estimate where status counts)."""
    import json
    import re

    from harnessmem.tokens import estimate_tokens

    status = CliRunner().invoke(main, ["status", "-w", str(example_root), "--json"])
    shown = json.loads(status.output)["memory_md"]["tokens"]
    found = re.search(r"([\d,]+) of [\d,]+ tokens", client.get("/").text)
    assert found is not None
    assert int(found.group(1).replace(",", "")) == shown
    text = (example_root / "MEMORY.md").read_text()
    with harness_on(example_root) as harness:
        assert harness.kernel.consolidator.tokens(text) == shown
    assert estimate_tokens(text) != shown, "the estimate differs: the test can tell them apart"


def test_the_first_page_shows_memory_what_changed_and_what_it_costs(client: TestClient) -> None:
    """The overview: MEMORY.md itself, the latest flushes and consolidations, and upkeep
    per day as a chart with labelled axes."""
    page = client.get("/").text
    assert 'id="memory"' in page
    assert "staging database" in page.split('id="memory"', 1)[1]
    lately = page.split('id="changes"', 1)[1].split("</ol>", 1)[0]
    assert "flushed" in lately
    assert "from session tidewater-week" in lately
    assert "consolidated MEMORY.md" in lately
    assert ".000000" not in lately
    chart = page.split('aria-label="upkeep tokens by day"', 1)[1].split("</svg>", 1)[0]
    assert '<line class="axis"' in chart
    assert ">upkeep tokens</text>" in chart
    assert ">day</text>" in chart
    assert chart.count("<rect") >= 2, "one bar a day with calls"
    session = client.get("/sessions/tidewater-week").text
    assert ">tokens moved out</text>" in session
    assert ">compaction</text>" in session


ANY_PORT = ["--port", "0"]


def _peak_kb(pid: int) -> int:
    """The process's peak resident memory so far (VmHWM), in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _post(address: tuple[str, int], head: str, chunks: list[bytes]) -> str:
    """POST ``head`` then the body ``chunks`` on a raw socket until the server stops
    reading; the status line it answered."""
    import socket

    with socket.create_connection(address, timeout=60) as sock:
        sock.sendall(head.encode())
        try:
            for chunk in chunks:
                sock.sendall(chunk)
        except OSError:  # the server answered and closed: it would not read the rest
            pass
        return sock.makefile("rb").readline().decode()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_a_huge_post_is_refused_without_being_read(
    tmp_path: Path, cli_server: Callable[..., tuple[Any, str]]
) -> None:
    """A page the user visits may post 400 MB to /forget: the inspector answers 413
    before reading it (Content-Length) or once 64 kB are in (chunked), and its peak memory
    grows by less than 50 MB either way."""
    import urllib.request

    pytest.importorskip("uvicorn", reason="the inspector needs the 'inspect' extra")
    CliRunner().invoke(main, ["save", "Ana prefers aisle seats", "-w", str(tmp_path / "ws")])
    server, url = cli_server("inspect", "-w", str(tmp_path / "ws"), *ANY_PORT)
    host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
    urllib.request.urlopen(url, timeout=60).close()
    before = _peak_kb(server.pid)
    megabyte, size = b"q=" + b"x" * (1024 * 1024 - 2), 400 * 1024 * 1024
    form = "Content-Type: application/x-www-form-urlencoded\r\n"
    start = f"POST /forget HTTP/1.1\r\nHost: {host}\r\n{form}"
    sized = f"{start}Content-Length: {size}\r\n\r\n"
    assert _post((host, int(port)), sized, [megabyte] * 400).startswith("HTTP/1.1 413")
    chunked = f"{start}Transfer-Encoding: chunked\r\n\r\n"
    frame = f"{len(megabyte):x}\r\n".encode() + megabyte + b"\r\n"
    assert _post((host, int(port)), chunked, [frame] * 400).startswith("HTTP/1.1 413")
    grown = _peak_kb(server.pid) - before
    assert grown < 50 * 1024, f"peak memory grew by {grown // 1024} MB"


# ------------------------------------------------------------------------------ hostile input


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("127.0.0.1", "localhost"),
        ("127.0.0.2", "127.0.0.2"),
        ("127.0.1.1", "127.0.1.1"),
        ("localhost", "127.0.0.1"),
        ("::1", "[::1]"),
    ],
)
def test_every_loopback_bind_answers_only_its_own_names(
    tmp_path: Path, host: str, name: str
) -> None:
    """Issue 37 points 2 and 6: bound to any loopback address, the inspector answers the
    names it was bound with, and refuses a foreign Host (a rebound name; Starlette's
    ``testserver`` too) and a foreign Origin (a page of another site), even on a forget
    that carries the form's token."""
    with harness_on(tmp_path / "ws") as harness:
        harness.save("- Maya's cat is called Mirko")
        app = create_app(harness, host=host)
        with TestClient(app, base_url=f"http://{name}:8765") as client:
            preview = client.get("/forget", params={"q": "Mirko"})
            assert preview.status_code == 200
            form = {"q": "Mirko", "csrf": _csrf(preview.text)}
            for foreign in (
                {"host": "attacker.example:8765"},
                {"host": "testserver"},
                {"origin": "http://attacker.example:8765"},
                {"origin": f"http://{name}.attacker.example"},
                {"origin": f"https://{name}:8765"},
                {"origin": "null"},
            ):
                assert client.get("/memory", headers=foreign).status_code in (400, 403)
                refused = client.post("/forget", data=form, headers=foreign)
                assert refused.status_code in (400, 403), foreign
                assert len(refused.text.splitlines()) == 1
            assert "Mirko" in harness.workspace.read_text("MEMORY.md")
            own = {"origin": f"http://{name}:8765"}
            assert "removed 1 fact" in client.post("/forget", data=form, headers=own).text
            # Under "no-referrer" a browser sends "Origin: null" with the page's own form,
            # which is refused above; "same-origin" makes it send the page's origin
            # (tests/test_inspector_browser.py forgets a fact through the real form).
            policy = client.get("/memory").headers["referrer-policy"]
            assert policy == "same-origin"
        assert "Mirko" not in harness.workspace.read_text("MEMORY.md")


def _one_line_4xx(response: Any) -> None:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    assert len(response.text.strip().splitlines()) == 1, response.text
    assert "Traceback" not in response.text


def test_odd_tokens_and_paths_get_a_4xx_with_one_line(example_root: Path) -> None:
    """Issue 37 point 6: a form token, query token, bearer token or cookie beyond ASCII
    (``hmac.compare_digest`` raises on such text) and ``..%2f`` session paths get 401, 403
    or 404 with one line."""
    with harness_on(example_root) as harness:
        local = TestClient(create_app(harness), base_url=LOCAL, raise_server_exceptions=False)
        with local:
            _csrf(local.get("/forget", params={"q": "staging"}).text)
            for token in ("\u00e9", "\u2603" * 40, "\U0001f600"):
                _one_line_4xx(local.post("/forget", data={"q": "staging", "csrf": token}))
            for path in (
                "/sessions/..%2f..%2fetc%2fpasswd",
                "/sessions/..%2fMEMORY.md",
                "/sessions/tidewater-week%2f..%2f..%2fMEMORY.md",
                "/sessions/%2e%2e",
                "/sessions/..%5c..%5cetc",
            ):
                answer = local.get(path)
                _one_line_4xx(answer)
                assert "root:" not in answer.text
        guarded = create_app(harness, token="s3cret-token", host="0.0.0.0")
        with TestClient(guarded, raise_server_exceptions=False) as remote:
            _one_line_4xx(remote.get("/", params={"token": "\u00e9t\u00e9"}))
            for raw in (b"\xe9", "\u00e9t\u00e9".encode(), b"s3cret-token\xff"):
                _one_line_4xx(remote.get("/", headers={"authorization": b"Bearer " + raw}))
                _one_line_4xx(remote.get("/", headers={"cookie": b"harnessmem_inspect=" + raw}))


def _leading_out(tmp_path: Path) -> Path:
    """A workspace whose ``sessions/`` is a symlink to a folder outside it."""
    root, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    with harness_on(root) as harness:
        harness.save("- Maya lives in Porto")
    elsewhere.mkdir()
    (elsewhere / "secret.log.jsonl").write_text('{"secret": "kept-elsewhere-7731"}\n')
    (root / "sessions").symlink_to(elsewhere)
    return root


def test_a_sessions_folder_that_leads_out_gets_403_not_500(tmp_path: Path) -> None:
    """Issue 37 point 6: with ``sessions/`` a symlink out of the workspace, the pages that
    list sessions answer 403 with the reason in one line, and read nothing through it."""
    root = _leading_out(tmp_path)
    with harness_on(root) as harness:
        app = create_app(harness)
        with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as client:
            for url in ("/", "/sessions", "/sessions/secret", "/sessions/..%2fsecret"):
                answer = client.get(url)
                _one_line_4xx(answer)
                assert "kept-elsewhere-7731" not in answer.text
            assert "symlink" in client.get("/sessions").text
            assert client.get("/memory").status_code == 200  # the rest still answers


def test_odd_input_logs_no_crash_in_a_real_server(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 37 point 6, served by uvicorn as ``harnessmem inspect`` serves it: the odd
    inputs get their 4xx and the server logs no "Exception in ASGI application"."""
    import logging
    import socket
    import threading

    import httpx
    import uvicorn

    caplog.set_level(logging.ERROR)
    with harness_on(_leading_out(tmp_path)) as harness:
        app = create_app(harness, token="s3cret-token", host="0.0.0.0")
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        # log_config=None: uvicorn's loggers propagate to the one the test captures.
        config = uvicorn.Config(app, log_level="warning", lifespan="off", log_config=None)
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        bearer = {"authorization": "Bearer s3cret-token"}
        try:
            with httpx.Client(base_url=base, timeout=60) as http:
                for raw in (b"\xe9", "\u00e9t\u00e9".encode()):
                    _one_line_4xx(http.get("/", headers={"authorization": b"Bearer " + raw}))
                _one_line_4xx(http.get("/", params={"token": "\u00e9"}))
                _one_line_4xx(http.post("/forget", headers=bearer, data={"csrf": "\u00e9"}))
                for url in ("/", "/sessions", "/sessions/..%2f..%2fetc"):
                    _one_line_4xx(http.get(url, headers=bearer))
        finally:
            server.should_exit = True
            thread.join(timeout=60)
            sock.close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
