"""The claims port: one holder per key, one of a few per named slot, both expiring with a
holder that died."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.support.state_contract.common import KEY, OTHER, Check, Harness
from workers.state.claims import Claim


def check_claims_are_exclusive_and_token_checked(h: Harness, tmp: Path) -> None:
    claims = h.make(tmp).claims
    first = claims.claim(KEY, ttl=30)
    assert first is not None
    assert claims.claim(KEY, ttl=30) is None
    assert claims.claimed(KEY)
    assert claims.claim(OTHER, ttl=30) is not None  # claims are per key
    forged = Claim(KEY, "not-the-token")
    assert not claims.renew(forged, 30)
    claims.release(forged)  # someone else's token releases nothing
    assert claims.claimed(KEY)
    assert claims.renew(first, 30)
    assert not claims.reclaim(first, 30)  # a live claim is not taken again, even by its holder
    claims.release(first)
    assert not claims.claimed(KEY)
    assert not claims.renew(first, 30)  # a released claim cannot be renewed
    assert claims.claim(KEY, ttl=30) is not None


def check_expired_claim_is_taken_over(h: Harness, tmp: Path) -> None:
    claims = h.make(tmp).claims
    dead = claims.claim(KEY, ttl=0.2)
    assert dead is not None
    h.wait(0.4)
    assert claims.claim(KEY, ttl=30) is not None
    assert not claims.renew(dead, 30)
    assert not claims.reclaim(dead, 30)  # another delivery holds it now


def check_an_expired_claim_nobody_took_is_taken_back(h: Harness, tmp: Path) -> None:
    claims = h.make(tmp).claims
    running = claims.claim(KEY, ttl=0.2)
    assert running is not None
    h.wait(0.4)  # nobody could renew it (a broker outage longer than the TTL)
    assert not claims.claimed(KEY)
    assert claims.reclaim(running, 30)
    assert claims.claimed(KEY) and claims.renew(running, 30)
    assert claims.claim(KEY, ttl=30) is None


def check_one_winner_among_threads(h: Harness, tmp: Path) -> None:
    claims = h.make(tmp).claims
    winners: list[object] = []
    barrier = threading.Barrier(8)

    def race() -> None:
        barrier.wait()
        got = claims.claim(KEY, ttl=30)
        if got is not None:
            winners.append(got)

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1


def check_semaphore_limits_and_expires(h: Harness, tmp: Path) -> None:
    claims = h.make(tmp).claims
    a = claims.acquire_slot("provider", 2, ttl=30)
    b = claims.acquire_slot("provider", 2, ttl=0.2)
    assert a and b and a != b
    assert claims.acquire_slot("provider", 2, ttl=30) is None
    claims.release_slot("provider", a)
    c = claims.acquire_slot("provider", 2, ttl=30)
    assert c is not None
    h.wait(0.4)  # b's holder died: its slot expires
    assert claims.acquire_slot("provider", 2, ttl=30) is not None
    assert claims.acquire_slot("other", 1, ttl=30) is not None  # semaphores are per name


CHECKS: list[Check] = [
    check_claims_are_exclusive_and_token_checked,
    check_expired_claim_is_taken_over,
    check_an_expired_claim_nobody_took_is_taken_back,
    check_one_winner_among_threads,
    check_semaphore_limits_and_expires,
]
