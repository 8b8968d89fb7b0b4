"""The status index port: each key counted once, at the status it stands at."""

from __future__ import annotations

from pathlib import Path

from pipelines.results import Status
from tests.support.state_contract.common import KEY, OTHER, Check, Harness, envelope


def check_counts_say_where_each_key_stands_after_a_retry(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    put, counts = state.results.put, state.status.counts
    assert counts(KEY.capability.value) == {}
    put(envelope(status=Status.FAILED, job_id="first"))
    put(envelope(OTHER, status=Status.FAILED, job_id="other"))
    assert counts(KEY.capability.value) == {"failed": 1}
    put(envelope(status=Status.DONE, job_id="retried"))  # the retry succeeded
    assert counts(KEY.capability.value) == {"done": 1}
    put(envelope(status=Status.DONE, job_id="again"))  # reprocessed: still one key
    assert counts(KEY.capability.value) == {"done": 1}
    assert counts(OTHER.capability.value) == {"failed": 1}
    put(envelope(status=Status.DEGRADED, job_id="worse"))  # a forced run that degraded
    assert counts(KEY.capability.value) == {"degraded": 1}


def check_a_result_read_back_from_its_sidecar_is_not_counted(h: Harness, tmp: Path) -> None:
    state = h.make(tmp)
    state.results.sidecars.write(envelope(OTHER, job_id="from-disk"))
    assert state.results.get(OTHER) is not None  # indexed again, as it stood
    assert state.status.counts(OTHER.capability.value) == {}


def check_a_key_stored_again_after_its_entry_expired_is_counted_once(h: Harness, tmp: Path) -> None:
    """Nothing is kept per key beside its index entry: once the entry has expired, the
    sidecar the new result replaces says where the key stood."""
    state = h.make(tmp)
    put, counts = state.results.put, state.status.counts
    put(envelope(status=Status.FAILED, job_id="first"))
    put(envelope(OTHER, status=Status.FAILED, job_id="other"))
    h.expire_entries(state)
    assert state.results.get_many([KEY, OTHER]) == {}  # the entries are gone, not the sidecars
    put(envelope(status=Status.DONE, job_id="retried"))
    assert counts(KEY.capability.value) == {"done": 1}
    h.expire_entries(state)
    put(envelope(status=Status.DONE, job_id="reprocessed"))  # the same status again
    assert counts(KEY.capability.value) == {"done": 1}
    h.expire_entries(state)
    put(envelope(status=Status.FAILED, job_id="no room"), sidecar=False)  # a full disk
    assert counts(KEY.capability.value) == {"failed": 1}
    assert counts(OTHER.capability.value) == {"failed": 1}


CHECKS: list[Check] = [
    check_counts_say_where_each_key_stands_after_a_retry,
    check_a_result_read_back_from_its_sidecar_is_not_counted,
    check_a_key_stored_again_after_its_entry_expired_is_counted_once,
]
