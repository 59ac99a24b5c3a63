"""Fixtures for the web-console tests: a real server with HTTP (and the console) on, a REST
helper signed in as root, a background event loop for the official client and our SDK, and
a headless Chromium (``tests.support.browser``) with page helpers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import MISSING, browser_paths, start_browser
from tests.support.server import LurcherServer

WAIT_S = 30.0
HTTP_ON = {"LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"}


class Rest:
    """The REST API as a given user (setup and checks outside the browser)."""

    def __init__(self, base: str, username: str = "iggy", password: str = "iggy") -> None:
        self.base = base
        self.http = httpx.Client(base_url=base, timeout=30.0)
        reply = self.http.post("/users/login", json={"username": username, "password": password})
        reply.raise_for_status()
        self.token = reply.json()["access_token"]["token"]
        self.http.headers["Authorization"] = f"Bearer {self.token}"

    def call(self, method: str, path: str, body: Any = None, ok: int | None = None) -> Any:
        reply = self.http.request(method, path, json=body)
        if ok is not None:
            assert reply.status_code == ok, f"{method} {path}: {reply.status_code} {reply.text}"
        return reply.json() if reply.content else None

    def close(self) -> None:
        self.http.close()


class Loop:
    """An event loop on its own thread: official-client and SDK connections live there so a
    blocking Selenium call never starves their heartbeats."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(WAIT_S)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)


@pytest.fixture(scope="module")
def console_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LurcherServer]:
    server = LurcherServer()
    server.start(tmp_path_factory.mktemp("console"), HTTP_ON)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def base_url(console_server: LurcherServer) -> str:
    return f"http://{console_server.endpoints['http']}"


@pytest.fixture(scope="module")
def rest(base_url: str) -> Iterator[Rest]:
    client = Rest(base_url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def loop() -> Iterator[Loop]:
    running = Loop()
    yield running
    running.close()


@pytest.fixture(scope="module")
def browser_binaries() -> tuple[str, str]:
    paths = browser_paths()
    if paths is None:
        pytest.fail(MISSING, pytrace=False)
    return paths


@pytest.fixture
def browser(browser_binaries: tuple[str, str]) -> Iterator[Any]:
    driver = start_browser(browser_binaries)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def page(browser: Any, base_url: str) -> "Page":
    return Page(browser, base_url)


class Page:
    """Console actions in the browser, each waiting (generously) for its outcome."""

    def __init__(self, driver: Any, base: str) -> None:
        self.d = driver
        self.base = base

    def open(self, route: str = "") -> None:
        self.d.get(f"{self.base}/ui{route}")

    def wait(self, check: Any, what: str, timeout: float = WAIT_S) -> Any:
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait
        # a page re-renders after actions: an element read mid-render is simply read again
        return WebDriverWait(self.d, timeout, poll_frequency=0.2,
                             ignored_exceptions=(StaleElementReferenceException,)).until(
            lambda d: check(), message=f"timed out waiting for {what}")

    def css(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By
        return self.d.find_elements(By.CSS_SELECTOR, selector)

    def one(self, selector: str) -> Any:
        return self.wait(lambda: (self.css(selector) or [None])[0], selector)

    def text(self, selector: str = "#main") -> str:
        def read() -> tuple[str] | None:
            found = self.css(selector)
            return (found[0].text,) if found else None
        return self.wait(read, f"text of {selector}")[0]

    def type(self, selector: str, text: str) -> None:
        el = self.one(selector)
        el.clear()
        el.send_keys(text)

    def choose(self, selector: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select
        Select(self.one(selector)).select_by_value(value)

    def go(self, route: str) -> None:
        """Navigate inside the app (hash change, no reload)."""
        self.d.execute_script("location.hash = arguments[0]", route)

    def sign_in(self, username: str = "iggy", password: str = "iggy") -> None:
        self.open()
        self.type("#login-username", username)
        self.type("#login-password", password)
        self.one("#login-submit").click()
        self.wait(lambda: self.css("#username") and self.css("#username")[0].text == username,
                  f"signed in as {username}")

    def confirm(self) -> None:
        self.one("dialog[open] [data-role=confirm]").click()

    def screenshot(self, path: Path) -> None:
        self.d.save_screenshot(str(path))

    def script(self, source: str, *args: Any) -> Any:
        return self.d.execute_script(source, *args)
