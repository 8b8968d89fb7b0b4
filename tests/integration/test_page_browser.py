"""The jobs page in a real browser (Debian's headless Chromium, Selenium) against a real
`mcp-media serve`, real vision workers and the fake OpenAI server. No timed assertions:
every wait is for a condition, with a generous bound."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
import redis
from selenium import webdriver
from selenium.webdriver.common.by import By

from pipelines.media import Capability, MediaKind
from pipelines.results import Status
from tests.integration.conftest import Cluster
from tests.support.browser import click, count, log_in, screenshot, shows, wait_until
from tests.support.factories import noisy_png
from tests.support.serve import serve
from workers.core import keys
from workers.core.capabilities import Lane
from workers.gateways.cluster import JobHandle, MediaClient
from workers.runtime.recovery import HEARTBEAT_SECONDS, STALL_SECONDS

pytestmark = pytest.mark.integration


def cache_image(cluster: Cluster, seed: int, size: tuple[int, int] = (64, 48)) -> Path:
    stored = cluster.settings().media_cache().store_bytes(noisy_png(seed, size), MediaKind.IMAGE)
    return stored.path


def submit(client: MediaClient, path: Path) -> JobHandle:
    return client.submit_one(Capability.VISION_SUMMARIZE, path.name.split(".")[0], path)


def test_tiles_count_a_seeded_run_update_live_and_missing_reprocesses_to_100(
    cluster: Cluster, browser: webdriver.Chrome
) -> None:
    cluster.fake.set(mode="error", status=500, only_width=40)  # one image ends degraded
    cluster.start_worker("vision")
    client = cluster.client()
    try:
        handles = [submit(client, cache_image(cluster, seed)) for seed in (1, 2, 3)]
        handles.append(submit(client, cache_image(cluster, 4, size=(40, 30))))
        finished = client.wait(handles, timeout=120)
        statuses = sorted(h.status.value for h in finished)
        assert statuses == ["degraded", "done", "done", "done"], statuses
        with serve(cluster) as served:
            log_in(browser, served.url, served.key)
            assert count(browser, "vision", "done") == 3
            assert count(browser, "vision", "degraded") == 1
            assert count(browser, "vision", "failed") == 0
            assert count(browser, "vision", "dead") == 0
            assert count(browser, "vision", "waiting") == 0
            recent = browser.find_elements(By.CSS_SELECTOR, "#recent article.result")
            assert len(recent) == 4
            thumb = browser.find_element(By.CSS_SELECTOR, "#recent article.done img")
            wait_until(
                "a thumbnail that loaded",
                lambda: browser.execute_script("return arguments[0].naturalWidth", thumb) == 64,
            )
            # A job finishing while the page is open shows without a reload.
            browser.execute_script("window.notReloaded = true")
            (fresh,) = client.wait([submit(client, cache_image(cluster, 5))], timeout=120)
            assert fresh.status is Status.DONE
            wait_until("done = 4 without reload", lambda: shows(browser, "vision", "done", 4))
            assert browser.execute_script("return window.notReloaded") is True
            wait_until(
                "the new result in the recent list",
                lambda: browser.find_elements(
                    By.CSS_SELECTOR, f'#recent article[data-sha256="{fresh.key.sha256}"]'
                ),
            )
            screenshot(browser, "jobs-page-seeded")

            # Two images cached but never processed: "Missing" finds exactly those.
            for seed in (6, 7):
                cache_image(cluster, seed)
            click(browser, "#tile-vision button.missing")
            wait_until(
                "the reprocess run to finish at 100 %",
                lambda: (
                    browser.find_element(
                        By.CSS_SELECTOR, '#counts-vision .run[data-state="finished"] progress'
                    ).get_attribute("value")
                    == "100"
                ),
            )
            detail = browser.find_element(By.CSS_SELECTOR, "#counts-vision .run .detail").text
            assert detail.startswith("2/2 finished (done 2"), detail
            assert "; enqueued 2/2" in detail, detail  # of the total the run planned
            wait_until("done = 6", lambda: shows(browser, "vision", "done", 6))
            assert browser.execute_script("return window.notReloaded") is True
            screenshot(browser, "jobs-page-reprocessed")

            # Search by sha256 shows that result with its summary.
            box = browser.find_element(By.NAME, "q")
            box.clear()
            box.send_keys(fresh.key.sha256 + "\n")
            found = wait_until(
                "the search result", lambda: browser.find_elements(By.ID, "search-result")
            )
            assert "A test image." in found[0].text
    finally:
        client.close()


def test_pause_stops_the_queue_taking_jobs_and_resume_restarts_it(
    cluster: Cluster, browser: webdriver.Chrome
) -> None:
    worker = cluster.start_worker("vision")
    client = cluster.client()
    view = client.state.view
    try:
        with serve(cluster) as served:
            log_in(browser, served.url, served.key)
            click(browser, "#counts-vision button.pause")
            wait_until(
                "the worker to announce vision as paused",
                lambda: [w for w in view.live_workers() if w.paused == ("vision",)],
            )
            wait_until(
                "the tile to say paused",
                lambda: "paused" in browser.find_element(By.ID, "counts-vision").text,
            )
            handles = [submit(client, cache_image(cluster, seed)) for seed in (11, 12)]
            batch = cache_image(cluster, 13)  # a pause holds the batch lane too
            handles.append(
                client.submit_one(
                    Capability.VISION_SUMMARIZE, batch.name.split(".")[0], batch, lane=Lane.BATCH
                )
            )
            # A worker started during the pause holds off from its start.
            later = cluster.start_worker("vision")
            wait_until(
                "both workers to announce vision as paused",
                lambda: len([w for w in view.live_workers() if w.paused == ("vision",)]) == 2,
            )
            # Past the consumer watchdog's stall time (and two heartbeats more), neither
            # worker has taken a job nor been made to reconnect: a pause is not a stall.
            submitted = view.now()
            past = submitted + STALL_SECONDS + 2 * HEARTBEAT_SECONDS
            wait_until(
                "both paused workers to have beaten past the watchdog's stall time",
                lambda: len([w for w in view.live_workers() if w.seen > past and w.paused]) == 2,
            )
            assert view.queue_lengths(["vision", "vision.batch"]) == {
                "vision": 2,
                "vision.batch": 1,
            }
            assert cluster.fake.request_count == 0
            for each in (worker, later):
                assert "consumer stalled" not in each.text()
                assert each.proc.poll() is None
            wait_until("waiting = 3 on the page", lambda: shows(browser, "vision", "waiting", 3))
            screenshot(browser, "jobs-page-paused")

            click(browser, "#counts-vision button.resume")
            finished = client.wait(handles, timeout=120)
            assert [h.status for h in finished] == [Status.DONE] * 3
            wait_until("done = 3 on the page", lambda: shows(browser, "vision", "done", 3))
            wait_until("waiting = 0 on the page", lambda: shows(browser, "vision", "waiting", 0))
            assert not view.paused_queues()
    finally:
        client.close()


def test_a_threads_pool_grows_and_shrinks_from_the_page_and_still_runs_jobs(
    cluster: Cluster, browser: webdriver.Chrome
) -> None:
    cluster.start_worker("vision", concurrency=2)
    client = cluster.client()
    try:
        with serve(cluster) as served:
            log_in(browser, served.url, served.key)
            (name,) = [w.name for w in client.state.view.live_workers()]
            row = f'#workers tr[data-worker="{name}"]'

            def threads() -> int | None:
                (info,) = client.state.view.live_workers()
                return info.concurrency

            def shown() -> str:
                return str(browser.find_element(By.CSS_SELECTOR, f"{row} td.procs").text)

            wait_until("2 x 1 on the page", lambda: shown().startswith("2 x 1"))
            click(browser, f'{row} button[title="one more"]')
            wait_until("3 threads announced", lambda: threads() == 3)
            wait_until("3 x 1 on the page", lambda: shown().startswith("3 x 1"))
            click(browser, f'{row} button[title="one less"]')
            wait_until("2 threads announced", lambda: threads() == 2)
            click(browser, f'{row} button[title="one less"]')
            wait_until("1 thread announced", lambda: threads() == 1)
            wait_until("1 x 1 on the page", lambda: shown().startswith("1 x 1"))
            click(browser, f'{row} button[title="one less"]')
            wait_until(
                "the refusal to go below one",
                lambda: "single process or thread" in browser.find_element(By.ID, "message").text,
            )
            (handle,) = client.wait([submit(client, cache_image(cluster, 31))], timeout=120)
            assert handle.status is Status.DONE
            assert threads() == 1
    finally:
        client.close()


def test_a_dead_letter_retried_from_the_page_ends_done(
    cluster: Cluster, browser: webdriver.Chrome
) -> None:
    # A worker killed while it holds the job; the next delivery passes the cap of one.
    cluster.fake.set(mode="slow", delay=600)
    first = cluster.start_worker("vision", MCP_MEDIA_JOBS__MAX_DELIVERIES="1")
    client = cluster.client(MCP_MEDIA_JOBS__MAX_DELIVERIES="1")
    try:
        (handle,) = [submit(client, cache_image(cluster, 21))]
        wait_until("the provider called", lambda: cluster.fake.request_count >= 1, every=0.02)
        first.kill()
        cluster.fake.set(mode="ok")
        cluster.start_worker("vision", MCP_MEDIA_JOBS__MAX_DELIVERIES="1")
        (dead,) = client.wait([handle], timeout=180)
        assert dead.envelope is not None and (dead.envelope.reason or "").startswith(
            "dead-lettered"
        )
        with serve(cluster) as served:
            log_in(browser, served.url, served.key)
            row = browser.find_element(By.CSS_SELECTOR, f'#dead tr[data-job="{handle.id}"]')
            assert "dead-lettered" in row.text
            assert count(browser, "vision", "dead") == 1
            screenshot(browser, "jobs-page-dead-letter")
            click(browser, f'#dead tr[data-job="{handle.id}"] button.retry')
            wait_until(
                "the retried job to end done",
                lambda: (
                    (e := client.state.results.get(handle.key)) is not None
                    and e.status is Status.DONE
                ),
            )
            wait_until(
                "the dead letter to leave the page",
                lambda: not browser.find_elements(By.CSS_SELECTOR, "#dead tr[data-job]"),
            )
            wait_until("done = 1 on the page", lambda: shows(browser, "vision", "done", 1))
            assert count(browser, "vision", "dead") == 0
    finally:
        client.close()


def test_nothing_is_reachable_or_steerable_without_the_cookie_and_the_csrf_token(
    cluster: Cluster, browser: webdriver.Chrome
) -> None:
    with serve(cluster) as served:
        url = served.url
        bare = httpx2.Client(base_url=url, timeout=30, follow_redirects=False)
        with bare:
            assert bare.get("/").status_code == 303
            assert bare.get("/").headers["location"] == "/login"
            for path in ("/events", "/static/page.js", "/page/media/" + "0" * 64):
                assert bare.get(path).status_code == 401, path
            refused = bare.post("/page/pause", data={"queue": "vision", "csrf": "x"})
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "not_logged_in"
            wrong = bare.post("/login", data={"key": "not-the-key-at-all"})
            assert wrong.status_code == 401 and "wrong key" in wrong.text

            good = bare.post("/login", data={"key": served.key})
            assert good.status_code == 303
            set_cookie = good.headers["set-cookie"]
            assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie
            cookie = good.cookies["mcp_media_page"]
            assert served.key not in cookie
            # The cookie is no bearer key for the API.
            api = bare.get("/v1/models", headers={"Authorization": f"Bearer {cookie}"})
            assert api.status_code == 401

            jar = {"Cookie": f"mcp_media_page={cookie}"}
            no_token = bare.post("/page/pause", data={"queue": "vision"}, headers=jar)
            assert no_token.status_code == 403 and no_token.json()["error"]["code"] == "csrf"
            bad_token = bare.post(
                "/page/pause", data={"queue": "vision", "csrf": "f" * 64}, headers=jar
            )
            assert bad_token.status_code == 403
            page = bare.get("/", headers=jar)
            assert page.status_code == 200
            assert "default-src 'none'" in page.headers["content-security-policy"]
            token = page.text.split('name="csrf" content="', 1)[1].split('"', 1)[0]
            other_site = bare.post(
                "/page/pause",
                data={"queue": "vision", "csrf": token},
                headers={**jar, "Origin": "http://evil.example"},
            )
            assert other_site.status_code == 403
            # Nothing was paused by any of them.
            assert not redis.Redis.from_url(cluster.broker.url).exists(keys.PAUSED)
            # Media only by the sha256 of a cached file: no path, no traversal.
            for path in ("/page/media/..%2f..%2fapi-key", "/page/media/" + "a" * 64):
                assert bare.get(path, headers=jar).status_code == 404, path
            unknown = bare.post("/page/pause", data={"queue": "nope", "csrf": token}, headers=jar)
            assert unknown.status_code == 400 and "unknown queue" in unknown.text
            assert bare.get("/healthz").status_code == 200  # still serving

        # In the browser: a wrong key stays on the login page, the cookie is not readable.
        browser.delete_all_cookies()
        browser.get(f"{url}/login")
        browser.find_element(By.NAME, "key").send_keys("not-the-key-at-all")
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_until("the refusal", lambda: "wrong key" in browser.page_source)
        screenshot(browser, "jobs-page-login")
        log_in(browser, served.url, served.key)
        assert browser.execute_script("return document.cookie") == ""
