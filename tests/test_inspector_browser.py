"""The inspector in a real browser: headless Chromium (Debian's package) driven by Playwright.

Skips, saying why, where Playwright or a Chromium binary is missing. ``.ci/run`` installs
both where it can. With ``SCREENSHOT_DIR=DIR`` the test saves the screenshots of
docs/inspect.md into DIR (``SCREENSHOT_DIR=docs/img pytest tests/test_inspector_browser.py``).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harnessmem import MemoryHarness
from harnessmem.cli import main
from harnessmem.inspector import create_app
from harnessmem.settings import HarnessSettings

playwright = pytest.importorskip(
    "playwright.sync_api",
    reason="the browser tests need Playwright: pip install -e '.[browser]' (and chromium)",
)
uvicorn = pytest.importorskip("uvicorn", reason="the inspector needs the 'inspect' extra")


CHROMIUM = next(
    (
        p
        for p in (
            os.environ.get("CHROMIUM"),
            shutil.which("chromium"),
            shutil.which("chromium-browser"),
        )
        if p
    ),
    None,
)
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium binary: apt-get install chromium (or set CHROMIUM to one)",
)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The example workspace, served by the inspector on a loopback port: its base URL."""
    root = tmp_path_factory.mktemp("browser") / "workspace"
    result = CliRunner().invoke(main, ["replay", "--example", "-w", str(root)])
    assert result.exit_code == 0, result.output
    settings = HarnessSettings.load(workspace={"url": str(root)}, maintenance={"enabled": False})
    with MemoryHarness(settings) as harness:
        # The socket is listening before the server runs: the browser's first request
        # waits in its backlog rather than failing, so nothing polls for readiness.
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        port = sock.getsockname()[1]
        config = uvicorn.Config(create_app(harness), log_level="warning", lifespan="off")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(timeout=10)
            sock.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


def _watched(browser: object) -> tuple[Any, list[str]]:
    """A new page, and the script errors and blocked resources it reports."""
    page = browser.new_page(viewport={"width": 1100, "height": 800})  # type: ignore[attr-defined]
    page.set_default_timeout(10_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    return page, errors


def _shots() -> Path | None:
    """Where the screenshots go (``SCREENSHOT_DIR``, relative to the repository: the tests
    run in a temporary folder), or None."""
    where = os.environ.get("SCREENSHOT_DIR")
    return Path(__file__).resolve().parents[1] / where if where else None


def test_a_person_reads_memory_searches_it_and_opens_a_session(
    served: str, browser: object
) -> None:
    page, errors = _watched(browser)
    shots = _shots()

    page.goto(served + "/")
    assert "What this agent remembers" in page.inner_text("h1")
    assert "staging database" in page.inner_text("#current")
    assert "flushed" in page.inner_text("#changes")
    assert page.locator("#changes svg.chart rect").count() >= 2
    if shots:
        page.screenshot(path=str(shots / "inspect-overview.png"), full_page=True)
    page.click("nav >> text=MEMORY.md")
    page.wait_for_selector("#memory")
    assert "staging database" in page.inner_text("#memory")
    if shots:
        page.screenshot(path=str(shots / "inspect-memory.png"), full_page=True)

    page.goto(served + "/search")
    page.fill("input[name=q]", "Brest timeout")  # htmx asks for hits as the words are typed
    page.wait_for_selector("ol.hits li mark")
    marks = page.locator("ol.hits li mark").all_inner_texts()
    assert {"Brest", "timeout"} & set(marks)
    assert page.url.endswith("/search")  # live results, no page load
    if shots:
        page.screenshot(path=str(shots / "inspect-search.png"), full_page=True)

    page.goto(served + "/sessions")
    page.click("table >> text=tidewater-week")
    page.wait_for_selector("svg.chart rect")
    assert page.locator("svg.chart rect").count() == 3
    if shots:
        page.screenshot(path=str(shots / "inspect-session.png"))

    page.goto(served + "/memory")
    page.click("a[href^='/memory/diff']")
    page.wait_for_selector("pre.diff")
    assert page.locator("pre.diff .add").count() > 0
    if shots:
        page.screenshot(path=str(shots / "inspect-diff.png"), full_page=True)
    assert errors == [], errors  # no script error, no resource the CSP blocked


def test_a_person_forgets_a_fact_and_it_is_gone_from_the_page_and_search(
    served: str, browser: object
) -> None:
    page, errors = _watched(browser)
    shots = _shots()

    page.goto(served + "/memory")
    assert "Argo CD" in page.inner_text("#memory")
    page.goto(served + "/search")
    page.fill("input[name=q]", "Argo CD")
    page.wait_for_selector("ol.hits li mark")
    page.click("a.forget")  # the preview: what would go, and where
    page.wait_for_selector("#removals li")
    assert page.inner_text("#outcome").startswith("would remove")
    assert "MEMORY.md" in page.inner_text("#removals")
    if shots:
        page.screenshot(path=str(shots / "inspect-forget.png"), full_page=True)
    page.click("#confirm")
    page.wait_for_selector("#outcome")
    assert page.inner_text("#outcome").startswith("removed")

    page.goto(served + "/memory")
    assert "Argo CD" not in page.inner_text("#memory")
    assert "staging database" in page.inner_text("#memory")  # the rest stays
    page.goto(served + "/search")
    page.fill("input[name=q]", "Argo CD")
    page.wait_for_selector("#hits p.count")
    assert page.inner_text("#hits p.count").startswith("0 hits")
    assert errors == [], errors


def test_every_page_renders_in_the_browser_without_an_error(served: str, browser: object) -> None:
    """Each of the inspector's pages loads, shows its heading and raises no script error
    and no blocked resource."""
    page, errors = _watched(browser)
    page.goto(served + "/daily")
    day = page.locator("a[href^='/daily/']").first.get_attribute("href")
    pages = {
        "/": "What this agent remembers",
        "/memory": "MEMORY.md",
        "/memory/diff": "MEMORY.md:",
        "/daily": "aily",
        str(day): "memory/",
        "/search?q=staging": "Search",
        "/sessions": "ession",
        "/sessions/tidewater-week": "tidewater-week",
        "/usage": "sage",
        "/why?q=staging+database+port": "Where a fact came from",
        "/forget?q=winter+break": "orget",
        "/file?path=MEMORY.md": "MEMORY.md",
    }
    for url, heading in pages.items():
        response = page.goto(served + url)
        assert response is not None
        assert response.status == 200, url
        assert heading in page.inner_text("h1"), (url, page.inner_text("h1"))
    page.goto(served + "/why?q=staging+database+port")
    assert "port 5433" in page.inner_text("main")
    assert errors == [], errors
