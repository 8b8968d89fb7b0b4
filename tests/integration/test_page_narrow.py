"""The jobs page on a phone: 390 CSS pixels wide in Debian's headless Chromium, against a
real `mcp-media serve`, a real vision worker and the fake OpenAI server. The document never
scrolls sideways; wide tables scroll in their own box; the search button stays on screen."""

from __future__ import annotations

from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By

from pipelines.media import Capability, MediaKind
from pipelines.results import ResultKey, Status
from tests.integration.conftest import Cluster
from tests.support.browser import log_in, screenshot, wait_until
from tests.support.factories import noisy_png
from tests.support.serve import serve

pytestmark = pytest.mark.integration

WIDTH = 390
# What a busy cluster puts on the page: job ids and file names with no place to break.
LONG_ID = "retry-" + "0123456789abcdef" * 7 + "-tail"  # 123 characters, a valid job id
LONG_PATH = "/srv/media/" + "a-very-long-file-name-without-spaces_" * 6 + "recording.ogg"
LONG_SUMMARY = "Filename:" + "IMG_20261204_001500_" * 12 + "panorama.jpg"


def overflow(driver: webdriver.Chrome) -> dict[str, Any]:
    """The document's width against the viewport's, and the search button's box."""
    found: dict[str, Any] = driver.execute_script(
        "const b = document.querySelector('form.search button').getBoundingClientRect();"
        "return {scroll: document.documentElement.scrollWidth, inner: window.innerWidth,"
        " client: document.documentElement.clientWidth, left: b.left, right: b.right,"
        " top: b.top, bottom: b.bottom, height: window.innerHeight};"
    )
    return found


def test_at_390_px_the_document_never_scrolls_sideways_and_search_stays_on_screen(
    cluster: Cluster, browser: webdriver.Chrome
) -> None:
    cluster.fake.set(reply=LONG_SUMMARY)
    cluster.start_worker("vision")
    client = cluster.client()
    settings = cluster.settings()
    try:
        handles = []
        for seed in (1, 2):
            stored = settings.media_cache().store_bytes(noisy_png(seed, (64, 48)), MediaKind.IMAGE)
            handles.append(
                client.submit_one(Capability.VISION_SUMMARIZE, stored.sha256, stored.path)
            )
        finished = client.wait(handles, timeout=120)
        assert [h.status for h in finished] == [Status.DONE, Status.DONE]
        key = ResultKey(Capability.VISION_SUMMARIZE, "0123456789ab", "f" * 64)
        for n in range(3):
            client.state.dead_letters.add(
                f"{LONG_ID}{n}", key, f"dead-lettered: {LONG_PATH} was lost {n} times"
            )
        with serve(cluster) as served:
            browser.execute_cdp_cmd(
                "Emulation.setDeviceMetricsOverride",
                {"width": WIDTH, "height": 844, "deviceScaleFactor": 1, "mobile": False},
            )
            try:
                log_in(browser, served.url, served.key)
                wait_until(
                    "the dead letters and results on the page",
                    lambda: (
                        len(browser.find_elements(By.CSS_SELECTOR, "#dead tr[data-job]")) == 3
                        and len(browser.find_elements(By.CSS_SELECTOR, "#recent article")) == 2
                    ),
                )
                # Search by a long job id, as someone pasting one from a log would.
                browser.get(f"{served.url}/?q={finished[0].id}")
                wait_until(
                    "the search result", lambda: browser.find_elements(By.ID, "search-result")
                )
                wait_until(
                    "the live stream", lambda: browser.find_element(By.ID, "live").text == "live"
                )
                screenshot(browser, "jobs-page-390")
                seen = overflow(browser)
                assert seen["inner"] == WIDTH and seen["client"] <= WIDTH, seen
                assert seen["scroll"] <= seen["inner"], seen
                assert seen["left"] >= 0 and seen["right"] <= seen["client"], seen
                assert seen["top"] >= 0 and seen["bottom"] <= seen["height"], seen
                # The tables are wider than the screen: each scrolls inside its own box.
                for table in ("#workers table", "#dead table"):
                    box = browser.execute_script(
                        "const t = document.querySelector(arguments[0]);"
                        "const s = t.parentElement;"
                        "return {table: t.scrollWidth, box: s.clientWidth,"
                        " overflow: getComputedStyle(s).overflowX,"
                        " right: s.getBoundingClientRect().right};",
                        table,
                    )
                    assert box["overflow"] in ("auto", "scroll"), (table, box)
                    assert box["right"] <= WIDTH, (table, box)
                row = browser.find_element(By.CSS_SELECTOR, "#dead tr[data-job]")
                assert LONG_ID in str(row.get_attribute("data-job"))
                browser.execute_script("document.getElementById('workers').scrollIntoView()")
                screenshot(browser, "jobs-page-390-tables")
                browser.execute_script("document.querySelector('#dead .scroll').scrollLeft = 400")
                screenshot(browser, "jobs-page-390-dead-scrolled")
            finally:
                browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    finally:
        client.close()
