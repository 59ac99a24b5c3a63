"""A real headless Chromium driven by Selenium, for the web-console tests.

Owns: finding Debian's ``chromium`` and ``chromium-driver`` (``/usr/bin/chromium``,
``/usr/bin/chromedriver``) and starting a headless session with a fixed window size;
``MISSING`` is the one-line instruction a test fails with when they (or the ``selenium``
package) are not installed. Screenshots and measurements go to ``ARTIFACTS``
(``<repo>/test-artifacts/ui``, ignored by git).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.support.server import REPO_ROOT

ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"
MISSING = ("web-console tests need a real browser: apt-get install chromium chromium-driver "
           "&& pip install selenium")
WINDOW = "1400,1000"


def browser_paths() -> tuple[str, str] | None:
    """(chromium, chromedriver) executables, or None when either (or selenium) is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return None
    return (chromium, driver) if chromium and driver else None


def start_browser(paths: tuple[str, str]) -> Any:
    """A headless Chromium session (browser console log kept for inspection)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={WINDOW}", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(paths[1]))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    return driver


def artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name
