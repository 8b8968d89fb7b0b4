"""Headless Chromium from the OS packages, driven by Selenium with the packaged driver.

Nothing is downloaded: the browser and its driver are Debian's `chromium` and
`chromium-driver` (`.ci/run` installs them). Screenshots go to ARTEFACTS, printed by the
tests that write them.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from tests.support.cluster import ROOT

ARTEFACTS = ROOT / "tmp" / "artefacts" / "page"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Conditions, not durations: each wait ends as soon as its condition holds; the bound is
# only there so that a broken page fails instead of hanging (2 loaded cores are slow).
PATIENCE = 120.0

T = TypeVar("T")


def _found(path: str, name: str) -> str:
    found = shutil.which(name) or (path if Path(path).exists() else None)
    if found is None:
        raise AssertionError(f"{path} is missing: apt-get install -y chromium chromium-driver")
    return found


@contextmanager
def chromium() -> Iterator[webdriver.Chrome]:
    options = webdriver.ChromeOptions()
    options.binary_location = _found(CHROMIUM, "chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1400,1000",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
    ):
        options.add_argument(arg)
    driver = webdriver.Chrome(
        options=options, service=Service(_found(CHROMEDRIVER, "chromedriver"))
    )
    driver.set_page_load_timeout(PATIENCE)
    try:
        yield driver
    finally:
        driver.quit()


def wait_until(
    what: str, probe: Callable[[], T | None], timeout: float = PATIENCE, every: float = 0.2
) -> T:
    """Probe until it returns something truthy; fail naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = probe()
        except (StaleElementReferenceException, WebDriverException) as exc:
            value, last = None, exc  # the live part was swapped under us: look again
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what} (last error: {last})")


def screenshot(driver: webdriver.Chrome, name: str) -> Path:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTEFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")
    return path


def log_in(driver: webdriver.Chrome, url: str, key: str) -> None:
    driver.delete_all_cookies()
    driver.get(f"{url}/login")
    driver.find_element(By.NAME, "key").send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait_until("the jobs page after login", lambda: driver.find_elements(By.ID, "counts-vision"))
    wait_until("the live stream", lambda: driver.find_element(By.ID, "live").text == "live")


def count(driver: webdriver.Chrome, queue: str, status: str) -> int:
    """The number a capability tile shows for one status (waiting ... dead)."""
    cell = driver.find_element(By.CSS_SELECTOR, f"#counts-{queue} [data-status={status}]")
    return int(cell.text)


def shows(driver: webdriver.Chrome, queue: str, status: str, expected: int) -> bool:
    return count(driver, queue, status) == expected


def click(driver: webdriver.Chrome, css: str) -> None:
    """Click a button of a live part (swapped in by the server at any moment): find it anew
    until one click lands on an element still in the page."""

    def once() -> bool:
        driver.find_element(By.CSS_SELECTOR, css).click()
        return True

    wait_until(f"a click on {css}", once)
