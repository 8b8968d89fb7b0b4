"""The results port: sidecars are the truth, the index finds them fast."""

from __future__ import annotations

from pathlib import Path

from pipelines.media import Capability
from pipelines.results import ResultKey, Status
from tests.support.state_contract.common import KEY, OTHER, Check, Harness, envelope
from workers.state.admission import Submission


def check_put_get_and_sidecar_truth(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    results = state.results
    assert results.get(KEY) is None
    results.put(envelope())
    got = results.get(KEY)
    assert got is not None and got.status is Status.DONE and got.job_id == "j1"
    assert results.sidecars.read(KEY) == got
    assert results.get_many([KEY, OTHER]) == {KEY: got}
    assert results.key_for_job("j1") == KEY
    assert results.latest_key(KEY.capability.value, KEY.sha256) == KEY
    assert state.status.counts(KEY.capability.value) == {"done": 1}
    # A fresh state over the same sidecars finds the result: the files are the truth.
    again = h.make(tmp)
    assert again.results.get(KEY) == got


def check_a_result_found_in_its_sidecar_is_indexed_again(h: Harness, tmp: Path) -> None:
    results = h.make(tmp).results
    written = envelope(OTHER, job_id="from-disk")
    results.sidecars.write(written)  # a sidecar the index does not hold (Redis was flushed)
    assert results.get(OTHER, sidecar=False) is None  # the caller knows no sidecar can exist
    assert results.get(OTHER) == written
    assert results.get_many([OTHER]) == {OTHER: written}
    assert results.key_for_job("from-disk") == OTHER
    assert results.latest_key(OTHER.capability.value, OTHER.sha256) == OTHER


def check_a_key_in_flight_is_not_looked_for_in_its_sidecar(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    state.results.sidecars.write(envelope(OTHER, job_id="old"))
    state.admission.admit(Submission(OTHER, "running", 60, "stt"))
    # Admitted since the index lost its entry: its result will be indexed, no bucket round trip.
    assert state.results.get(OTHER) is None


def check_the_newest_keys_come_first_each_once(h: Harness, tmp: Path) -> None:
    results = h.make(tmp).results
    assert results.recent_keys() == []
    third = ResultKey(Capability.AUDIO_SYNTHESIZE, "abc123", "c" * 64)
    for key, job in ((KEY, "a"), (OTHER, "b"), (third, "c"), (KEY, "d")):
        results.put(envelope(key, job_id=job))
    assert results.recent_keys() == [KEY, third, OTHER]
    assert results.recent_keys(limit=2) == [KEY, third]


def check_the_latest_key_follows_the_newest_version(h: Harness, tmp: Path) -> None:
    results = h.make(tmp).results
    newer = ResultKey(KEY.capability, "def456", KEY.sha256)
    results.put(envelope(KEY, job_id="old"))
    results.put(envelope(newer, job_id="new"))
    assert results.latest_key(KEY.capability.value, KEY.sha256) == newer
    assert results.latest_key(OTHER.capability.value, KEY.sha256) is None
    assert results.key_for_job("old") == KEY and results.key_for_job("new") == newer
    assert results.key_for_job("unknown") is None


CHECKS: list[Check] = [
    check_put_get_and_sidecar_truth,
    check_a_result_found_in_its_sidecar_is_indexed_again,
    check_a_key_in_flight_is_not_looked_for_in_its_sidecar,
    check_the_newest_keys_come_first_each_once,
    check_the_latest_key_follows_the_newest_version,
]
