"""Fixtures for the browser tests: the built site served on 127.0.0.1, and Debian's Chromium.

The tests skip when Chromium or Playwright is missing, unless ``MHA_REF_REQUIRE_BROWSER`` is set
(``.ci/run`` sets it after installing Chromium), in which case they fail.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path

import pytest
from work_shares import deal_to_workers

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("MHA_REF_SITE", ROOT / "build" / "html"))
SCREENSHOTS = ROOT / "build" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def _unavailable(reason: str):
    if os.environ.get("MHA_REF_REQUIRE_BROWSER"):
        pytest.fail(reason)
    pytest.skip(reason)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(scope="session")
def site_url():
    if not (SITE / "en" / "index.html").is_file():
        _unavailable(f"no built site under {SITE}: run `nox -s docs` first")
    handler = functools.partial(_QuietHandler, directory=str(SITE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="session")
def browser():
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    if executable is None:
        _unavailable("Chromium is not installed (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install playwright)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield launched
        launched.close()


class PageWatch:
    """A page that records console errors, page errors and requests to other hosts."""

    def __init__(self, page, site_url: str):
        self.page = page
        self.errors: list[str] = []
        self.external: list[str] = []
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))
        page.on("request", lambda request: self._on_request(request.url, site_url))

    def _on_console(self, message) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text}")

    def _on_request(self, url: str, site_url: str) -> None:
        if not (url.startswith(site_url) or url.startswith(("data:", "blob:", "about:"))):
            self.external.append(url)


@pytest.fixture
def watched(browser, site_url):
    def make(color_scheme: str = "light") -> PageWatch:
        context = browser.new_context(
            viewport={"width": 1280, "height": 900}, color_scheme=color_scheme
        )
        contexts.append(context)
        return PageWatch(context.new_page(), site_url)

    contexts: list = []
    yield make
    for context in contexts:
        context.close()


@pytest.fixture(scope="session")
def axe():
    """axe-core, run inside the page (``axe-playwright-python`` bundles ``axe.min.js``)."""
    axe_playwright = pytest.importorskip("axe_playwright_python.sync_playwright")
    return axe_playwright.Axe()


#: what one test takes, roughly (quiet 2-core machine, both workers busy): the every-page audit
#: of a language visits its 92 pages, about three minutes; every other test loads a page or two
EVERY_PAGE_S, OTHER_S = 180.0, 4.0


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups (it appends them to node ids)
def pytest_collection_modifyitems(config, items):
    """The two every-page tests go to different workers and the short tests fill in around
    them (``tests/work_shares.py``): xdist's own first block of 12 consecutive tests gave one
    worker both, ten minutes in a row, while the other finished the rest and idled."""
    deal_to_workers(
        items, lambda item: EVERY_PAGE_S if "test_every_page" in item.nodeid else OTHER_S
    )
