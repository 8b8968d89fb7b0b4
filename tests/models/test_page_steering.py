"""The jobs page tells the truth while it steers real prefork workers (real voice, Debian's
headless Chromium): a pool shrink asked while every process is busy says so and happens when
one frees; a job that failed and then succeeded on retry counts as done only, and its player
knows the final audio's length."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from pipelines.media import Capability, MediaKind
from pipelines.results import Status
from tests.support.browser import click, count, log_in, screenshot, shows, wait_until
from tests.support.cluster import Cluster
from tests.support.factories import noisy_png
from tests.support.serve import serve
from workers.core.stage_configs import store_request, synthesis_request

pytestmark = pytest.mark.models

ONE_THREAD = {"MCP_MEDIA_TTS__THREADS": "1", "MCP_MEDIA_STT__THREADS": "1"}


def cache_image(cluster: Cluster, seed: int) -> Path:
    stored = (
        cluster.settings().media_cache().store_bytes(noisy_png(seed, (64, 48)), MediaKind.IMAGE)
    )
    return stored.path


def message(browser: Any) -> str:
    return str(browser.find_element(By.ID, "message").text)


def test_a_shrink_while_every_process_is_busy_says_so_and_happens_when_one_frees(
    speech_cluster: Cluster, browser: Any
) -> None:
    # A prefork worker (it serves a speech queue) whose two processes both wait on the
    # vision provider: the fake answers each of the first two requests after 40 s.
    fake = speech_cluster.fake
    fake.set(mode="slow", delay=40)
    slow = {**ONE_THREAD, "MCP_MEDIA_VISION__TIMEOUT": "90"}
    worker = speech_cluster.start_worker("vision,tts", concurrency=2, wait=True, **slow)
    client = speech_cluster.client(**slow)
    state = client.state
    try:
        with serve(speech_cluster) as served:
            log_in(browser, served.url, served.key)
            (info,) = state.view.live_workers()
            assert info.pool == "prefork" and info.concurrency == 2, info
            row = f'#workers tr[data-worker="{info.name}"]'
            wait_until(
                "2 x 1 on the page",
                lambda: browser.find_element(By.CSS_SELECTOR, f"{row} td.procs").text.startswith(
                    "2 x 1"
                ),
            )
            handles = [
                client.submit_one(Capability.VISION_SUMMARIZE, p.name.split(".")[0], p)
                for p in (cache_image(speech_cluster, seed) for seed in (1, 2, 3))
            ]
            wait_until("both processes busy", lambda: fake.stats()["in_flight"] == 2, every=0.05)
            click(browser, f'{row} button[title="one less"]')
            said = wait_until(
                "the page to say the shrink waits",
                lambda: message(browser) if "busy" in message(browser) else None,
            )
            assert "every process is busy" in said and "when a process frees" in said, said
            assert "Error" not in said, said
            assert "error" not in str(browser.find_element(By.ID, "message").get_attribute("class"))
            screenshot(browser, "jobs-page-shrink-waits")
            # Both still run their job: nothing was stopped under them.
            assert len(worker.children()) == 2 and fake.stats()["in_flight"] == 2
            fake.set(mode="ok")  # the third image is answered at once
            finished = client.wait(handles, timeout=180)
            assert [h.status for h in finished] == [Status.DONE] * 3
            wait_until(
                "one process announced", lambda: state.view.live_workers()[0].concurrency == 1
            )
            wait_until("one pool child", lambda: len(worker.children()) == 1)
            wait_until(
                "1 x 1 on the page",
                lambda: browser.find_element(By.CSS_SELECTOR, f"{row} td.procs").text.startswith(
                    "1 x 1"
                ),
            )
            assert "pool shrunk to 1 processes, as asked" in worker.text()
            # It still runs jobs on the process it kept.
            fourth = cache_image(speech_cluster, 4)
            (last,) = client.wait(
                [client.submit_one(Capability.VISION_SUMMARIZE, fourth.name.split(".")[0], fourth)],
                timeout=120,
            )
            assert last.status is Status.DONE
    finally:
        client.close()


LONG_TEXT = " ".join(
    f"Sentence number {n} of a long spoken reply, long enough that a worker is still speaking "
    "it when the test stops that worker."
    for n in range(1, 31)
)


def test_a_reply_that_failed_then_succeeded_on_retry_counts_done_and_plays_its_own_length(
    speech_cluster: Cluster, browser: Any
) -> None:
    capped = {**ONE_THREAD, "MCP_MEDIA_JOBS__MAX_DELIVERIES": "1"}
    first = speech_cluster.start_worker("tts", concurrency=1, wait=True, **capped)
    client = speech_cluster.client(**capped)
    state = client.state
    settings = speech_cluster.settings(**capped)
    try:
        request = store_request(settings, synthesis_request(LONG_TEXT, settings))
        handle = client.submit_one(Capability.AUDIO_SYNTHESIZE, request.sha256, request.path)
        # The worker dies while it speaks; the next delivery passes the cap of one.
        wait_until(
            "the worker to take the job", lambda: state.claims.claimed(handle.key), every=0.01
        )
        first.kill()
        speech_cluster.start_worker("tts", concurrency=1, wait=True, **capped)
        (dead,) = client.wait([handle], timeout=180)
        assert dead.status is Status.FAILED, dead.envelope
        with serve(speech_cluster) as served:
            log_in(browser, served.url, served.key)
            assert count(browser, "tts", "failed") == 1
            assert count(browser, "tts", "dead") == 1
            click(browser, f'#dead tr[data-job="{handle.id}"] button.retry')
            retried = wait_until(
                "the retried reply to end done",
                lambda: (
                    e if (e := state.results.get(handle.key)) and e.status is Status.DONE else None
                ),
            )
            wait_until("done = 1 on the page", lambda: shows(browser, "tts", "done", 1))
            wait_until("failed = 0 on the page", lambda: shows(browser, "tts", "failed", 0))
            assert count(browser, "tts", "dead") == 0
            assert state.view.status_counts(Capability.AUDIO_SYNTHESIZE.value) == {"done": 1}

            final = float(retried.output["duration_s"])
            player = f'#recent article.done[data-sha256="{handle.key.sha256}"] audio'
            wait_until(
                "the player to know its audio's length, unplayed",
                lambda: browser.execute_script(
                    "const a = document.querySelector(arguments[0]);"
                    "return a !== null && a.readyState >= 1",
                    player,
                ),
                timeout=60,
            )
            shown = browser.execute_script(
                "return document.querySelector(arguments[0]).duration", player
            )
            assert abs(shown - final) < 0.1, (shown, final)
            text = browser.find_element(By.CSS_SELECTOR, f"{player[:-6]} p.text").text
            assert f"{final} s" in text, text
            screenshot(browser, "jobs-page-retried-reply")
    finally:
        client.close()
