"""The Host rule of both network doors (DNS rebinding): off loopback an address or this
machine's name, on loopback a loopback name."""

from __future__ import annotations

import pytest

from workers.doors.listen import LOOPBACK_NAMES, host_allowed, split_host

pytestmark = pytest.mark.unit

NAMES = frozenset({"localhost", "media-box", "media-box.lan"})


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1:8765", "10.1.2.3", "[::1]:8765", "[fe80::1]", "localhost:1", "Media-Box:80",
     "media-box.lan.:8765"],
)  # fmt: skip
def test_addresses_and_the_machine_names_are_accepted(host: str) -> None:
    assert host_allowed(host, NAMES, addresses=True)


@pytest.mark.parametrize(
    "host",
    ["", "evil.example:8765", "127.0.0.1.evil.example", "[::1", "[::1]x", "a:b:c",
     "media-box:port", "1.2.3.4:80:80"],
)  # fmt: skip
def test_other_names_and_malformed_hosts_are_refused(host: str) -> None:
    assert not host_allowed(host, NAMES, addresses=True)


def test_split_host() -> None:
    assert split_host("[::1]:8765") == ("::1", "8765")
    assert split_host("example:80") == ("example", "80")
    assert split_host("example") == ("example", "")


@pytest.mark.parametrize(
    ("host", "allowed"),
    [("127.0.0.1:8000", True), ("localhost", True), ("[::1]:8000", True),
     ("evil.example", False), ("10.1.2.3:8000", False), ("localhost.evil.example", False)],
)  # fmt: skip
def test_a_loopback_bind_takes_only_loopback_names(host: str, allowed: bool) -> None:
    assert host_allowed(host, LOOPBACK_NAMES, addresses=False) is allowed
