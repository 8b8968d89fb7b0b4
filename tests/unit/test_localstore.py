"""The in-memory twin of the result store keeps the `ResultStore` contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.results import Sidecars
from tests.support import store_contract as contract
from workers.state.memory import LocalStore

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize("check", contract.CHECKS, ids=lambda c: c.__name__)
def test_contract(check: contract.Check, tmp_path: Path) -> None:
    check(lambda root: LocalStore(Sidecars(root / "results")), tmp_path)


@pytest.mark.parametrize("check", contract.TIMED_CHECKS, ids=lambda c: c.__name__)
def test_contract_with_expiry(check: contract.TimedCheck, tmp_path: Path) -> None:
    clock = Clock()
    check(lambda root: LocalStore(Sidecars(root / "results"), clock), tmp_path, clock.advance)


def test_answers_is_the_dedup_rule() -> None:
    contract.check_answers_is_the_dedup_rule()
