"""Claim and slot tokens name the worker process tree that took them: a worker handing its
jobs back as it stops releases its own and never another's, whatever pid they share."""

from __future__ import annotations

import pytest

from workers.state.claims import TREE, taken_here

pytestmark = pytest.mark.unit


def test_this_trees_claim_and_slot_tokens_are_its_own() -> None:
    assert taken_here(f"1:{TREE}-0123abcd")
    assert taken_here(f"{TREE}-0123abcd".encode())


def test_another_trees_token_with_the_same_pid_is_not() -> None:
    other = "0" * len(TREE) if "0" * len(TREE) != TREE else "1" * len(TREE)
    assert not taken_here(f"1:{other}-0123abcd")
    assert not taken_here(f"{other}-0123abcd".encode())
    assert not taken_here("1:0123abcd")  # a token of an older worker, before the prefix
    assert not taken_here(b"")
