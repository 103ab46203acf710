"""Headless Chromium (Debian's ``chromium`` + ``chromium-driver``) driven through selenium,
with the DevTools performance log on, so a test can list every request a page made."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from requirements_guard import need, need_path

CHROMEDRIVER = "/usr/bin/chromedriver"
HINT = "make report-browser (apt-get install chromium chromium-driver)"


@contextmanager
def chromium(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    webdriver = need("selenium.webdriver", "pip install 'rubricgym[report]'")
    need_path(CHROMEDRIVER, HINT)
    binary = shutil.which("chromium")
    need_path(binary or "/usr/bin/chromium", HINT)
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-default-apps", "--disable-extensions", f"--window-size={width},{height}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    # an explicit driver path: selenium never tries to download one
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def requests_made(driver: Any) -> list[str]:
    """URLs of every request the page sent since the last call (DevTools Network events)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def open_report(driver: Any, path: Path) -> list[str]:
    """Load a report file; returns the requests made other than the file itself."""
    driver.get_log("performance")  # drop what came before
    url = path.resolve().as_uri()
    driver.get(url)
    return [u for u in requests_made(driver) if u != url]
