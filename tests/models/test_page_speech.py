"""The jobs page with a real speech worker (prefork, real voice): the pool grows and shrinks
from the page, and a spoken reply plays in the browser."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.by import By

from pipelines.media import Capability
from pipelines.results import Status
from tests.support.browser import click, log_in, screenshot, wait_until
from tests.support.cluster import Cluster
from tests.support.serve import serve
from workers.core.stage_configs import store_request, synthesis_request

pytestmark = pytest.mark.models


def test_a_prefork_pool_grows_and_shrinks_from_the_page_and_a_spoken_reply_plays(
    speech_cluster: Cluster, browser: Any
) -> None:
    worker = speech_cluster.start_worker("tts", concurrency=1)
    client = speech_cluster.client()
    view = client.state.view
    settings = speech_cluster.settings()
    try:
        request = store_request(settings, synthesis_request("The page plays this.", settings))
        (spoken,) = client.wait(
            [client.submit_one(Capability.AUDIO_SYNTHESIZE, request.sha256, request.path)], 120
        )
        assert spoken.status is Status.DONE
        with serve(speech_cluster) as served:
            log_in(browser, served.url, served.key)
            row = f'#workers tr[data-worker="{view.live_workers()[0].name}"]'

            def processes() -> str:
                return str(browser.find_element(By.CSS_SELECTOR, f"{row} td.procs").text)

            wait_until("one process on the page", lambda: processes().startswith("1 x 1"))
            click(browser, f'{row} button[title="one more"]')
            wait_until("two processes on the page", lambda: processes().startswith("2 x 1"))
            wait_until("two pool children", lambda: len(worker.children()) == 2)
            screenshot(browser, "jobs-page-speech")
            click(browser, f'{row} button[title="one less"]')
            wait_until("one process on the page", lambda: processes().startswith("1 x 1"))
            wait_until("one pool child", lambda: len(worker.children()) == 1)

            audio = browser.find_element(By.CSS_SELECTOR, "#recent article.done audio")
            browser.execute_script("arguments[0].load()", audio)
            wait_until(
                "the browser to decode the spoken reply's metadata",
                lambda: browser.execute_script("return arguments[0].readyState", audio) >= 1,
            )
            duration = browser.execute_script("return arguments[0].duration", audio)
            assert 0.5 < duration < 10, duration
    finally:
        client.close()
