"""Browser fixtures: the real app under uvicorn on a free loopback port, driven by headless Chromium.

* The browser is Debian's ``chromium`` package (``apt-get install -y chromium``; ``./dev.sh test``
  installs it when run as root), driven by playwright with ``executable_path``: playwright never
  downloads a browser of its own. ``EVALPLAN_TEST_CHROMIUM`` names another executable.
* ``live_server`` (``module_live_server``: one per test module): ``create_app`` on PostgreSQL (real
  commits, the in-process job dispatcher), served by uvicorn in a thread; tables are emptied before
  and after.
* ``tab``: a fresh browser context and page. It records console errors, uncaught exceptions and
  every request that leaves the loopback server (aborted: the pages must work offline); the test
  fails at teardown if any happened. ``tab.check_accessibility()`` runs axe-core on the page.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import uvicorn
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from evalplan.kit.db import make_session_factory
from evalplan.main import create_app
from evalplan.workers.dispatch import InProcessDispatcher

CHROMIUM_NAMES = ("chromium", "chromium-browser")
INSTALL_HINT = ("the browser tests need Debian's chromium: run `apt-get install -y chromium` as root "
                "(./dev.sh test does it when run as root), or set EVALPLAN_TEST_CHROMIUM to a Chromium executable")
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}
# axe rules whose failures the pages must never have (WCAG 2 A/AA + best practice).
AXE_OPTIONS = {"resultTypes": ["violations"], "runOnly": {"type": "tag", "values": [
    "wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]}}


def chromium_executable() -> str:
    """The Chromium to drive; fails (never skips) with an install hint when there is none."""
    named = os.environ.get("EVALPLAN_TEST_CHROMIUM")
    found = named or next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    if not found or not os.access(found, os.X_OK):
        pytest.fail(INSTALL_HINT, pytrace=False)
    return found


@dataclass
class LiveServer:
    """A running server: ``url`` for the browser, ``http`` for the test's own API calls."""

    url: str
    http: httpx.Client
    session_factory: sessionmaker[Session]


def _serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-ui", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    return server, thread, f"http://127.0.0.1:{port}"


@contextmanager
def serving(engine: Engine, database_url: str, **overrides: object) -> Iterator[LiveServer]:
    from support.helpers import empty_all_tables, settings_for

    empty_all_tables(engine)
    factory = make_session_factory(engine)
    app = create_app(settings_for(database_url, **overrides), session_factory=factory,
                     dispatcher=InProcessDispatcher(factory, threads=2))
    server, thread, url = _serve(app)
    try:
        with httpx.Client(base_url=url, timeout=60) as http:
            yield LiveServer(url=url, http=http, session_factory=factory)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        empty_all_tables(engine)


@pytest.fixture
def live_server(engines: dict[str, Engine], database_urls: dict[str, str]) -> Iterator[LiveServer]:
    with serving(engines["postgresql"], database_urls["postgresql"]) as running:
        yield running


@pytest.fixture(scope="module")
def module_live_server(engines: dict[str, Engine], database_urls: dict[str, str]) -> Iterator[LiveServer]:
    """One server for a whole test module (its data is seeded once)."""
    with serving(engines["postgresql"], database_urls["postgresql"]) as running:
        yield running


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = chromium_executable()
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True,
            args=["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update"])
        yield browser
        browser.close()


@dataclass
class Tab:
    """A page plus what went wrong on it."""

    page: Any
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)
    expected_errors: list[str] = field(default_factory=list)

    def expect_console_error(self, fragment: str) -> None:
        """A console error containing ``fragment`` is the point of the test (e.g. a 404 page)."""
        self.expected_errors.append(fragment)

    def problems(self) -> list[str]:
        unexpected = [e for e in self.console_errors if not any(f in e for f in self.expected_errors)]
        return ([f"console error: {e}" for e in unexpected]
                + [f"uncaught exception: {e}" for e in self.page_errors]
                + [f"request off the machine (blocked): {u}" for u in self.external_requests])

    def assert_clean(self) -> None:
        problems = self.problems()
        assert not problems, "\n".join(problems)

    def check_accessibility(self, *, exclude: list[str] | None = None) -> None:
        """axe-core over the page; any violation fails with its rule, impact and first nodes."""
        from axe_playwright_python.sync_playwright import Axe

        context = {"exclude": [[s] for s in exclude]} if exclude else None
        result = Axe().run(self.page, context=context, options=AXE_OPTIONS)
        found = [f"{v['id']} ({v['impact']}): {v['help']} -- "
                 + "; ".join(" ".join(n["target"]) for n in v["nodes"][:3])
                 for v in result.response["violations"]]
        assert not found, "accessibility violations on " + self.page.url + ":\n" + "\n".join(found)

    def screenshot_is_drawn(self, *, min_ink: float = 0.02, **options: Any) -> bytes:
        """A PNG screenshot that is not blank: at least ``min_ink`` of its pixels differ from white."""
        from PIL import Image

        png = self.page.screenshot(**options)
        gray = Image.open(io.BytesIO(png)).convert("L")
        histogram = gray.histogram()
        ink = 1 - sum(histogram[246:]) / (gray.width * gray.height)
        assert ink >= min_ink, f"screenshot of {self.page.url} is blank ({ink:.1%} of pixels drawn)"
        return png

    def has_no_horizontal_scroll(self) -> bool:
        return bool(self.page.evaluate(
            "document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1"))


def open_tab(browser: Any, *, viewport: dict[str, int] = DESKTOP, **context_options: Any) -> tuple[Any, Tab]:
    context = browser.new_context(viewport=viewport, accept_downloads=True, **context_options)
    page = context.new_page()
    tab = Tab(page)
    page.on("console", lambda m: tab.console_errors.append(f"{m.text} ({m.location.get('url', '')})")
            if m.type == "error" else None)
    page.on("pageerror", lambda e: tab.page_errors.append(str(e)))

    def guard(route: Any) -> None:
        url = route.request.url
        host = urlsplit(url).hostname
        if url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
            route.continue_()
        else:
            tab.external_requests.append(url)
            route.abort()

    context.route("**/*", guard)
    page.set_default_timeout(15_000)
    return context, tab


@pytest.fixture
def tab(chromium: Any) -> Iterator[Tab]:
    context, made = open_tab(chromium)
    yield made
    context.close()
    made.assert_clean()


@pytest.fixture
def phone_tab(chromium: Any) -> Iterator[Tab]:
    context, made = open_tab(chromium, viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)
    yield made
    context.close()
    made.assert_clean()
