"""The sans-IO login back-off (``auth.throttle``): free attempts, doubling spacing capped at
the maximum, attempts of one key serialised, no wait above the maximum, reset by time and by success, bounded keys."""

from __future__ import annotations

from lurcher.auth.throttle import BackoffConfig, LoginThrottle
from lurcher.core.wire.address import peer_host

CONFIG = BackoffConfig(free_attempts=2, base_s=1.0, max_s=4.0, reset_s=100.0, max_keys=3)
USER = ("user", "alice")


def fail(t: LoginThrottle, n: int, now: float = 0.0) -> None:
    for _ in range(n):
        t.failed([USER], now)


def test_free_attempts_then_doubling_capped() -> None:
    t = LoginThrottle(CONFIG)
    assert [t.spacing_s(n) for n in range(6)] == [0.0, 0.0, 1.0, 2.0, 4.0, 4.0]
    fail(t, 2)
    assert t.reserve([USER], 0.0) == 1.0  # the slot after the second failure
    assert LoginThrottle(CONFIG).reserve([USER], 0.0) == 0.0


def test_parallel_attempts_of_one_key_are_serialised() -> None:
    t = LoginThrottle(CONFIG)
    fail(t, 3)  # spacing 2 s
    waits = [t.reserve([USER], 0.0) for _ in range(4)]
    assert waits == [2.0, 4.0, None, None]  # beyond max_s: refused, nothing booked
    assert t.reserve([USER], 4.0) == 2.0


def test_any_key_delays_and_other_keys_are_free() -> None:
    t = LoginThrottle(CONFIG)
    fail(t, 2)
    assert t.reserve([("connection", 7), USER], 0.0) == 1.0
    assert t.reserve([("connection", 8), ("user", "bob")], 0.0) == 0.0


def test_reset_after_quiet_time_and_after_success() -> None:
    t = LoginThrottle(CONFIG)
    fail(t, 4)
    assert t.reserve([USER], 200.0) == 0.0
    fail(t, 4, 300.0)
    t.succeeded([USER])
    assert t.reserve([USER], 300.0) == 0.0


def test_tracked_keys_are_bounded() -> None:
    t = LoginThrottle(CONFIG)
    for i in range(10):
        t.failed([("user", f"u{i}")], 0.0)
    assert len(t.entries) == 3 and ("user", "u9") in t.entries


def test_failures_under_random_names_do_not_push_out_a_throttled_user() -> None:
    """The table is full of one-failure keys (a flood of random user names): the user under
    attack keeps its back-off; keys that are not throttled go instead."""
    t = LoginThrottle(CONFIG)
    fail(t, 4)  # USER is throttled now
    waited = t.reserve([USER], 0.0)
    assert waited and waited > 0
    for i in range(10):
        t.failed([("user", f"random{i}")], 1.0)
    assert USER in t.entries and len(t.entries) == 3
    wait = t.reserve([USER], 1.0)
    assert wait is None or wait > 0.0  # still spaced (or refused outright), not reset


def test_back_off_hosts_are_ipv4_hosts_or_ipv6_networks() -> None:
    """A login's back-off is per username and host; an IPv6 client usually holds a whole
    /64, so a key per address gave one attacker 2^64 fresh back-offs (found by a review),
    and an IPv4-mapped address is the IPv4 host it maps."""
    assert peer_host("127.0.0.1:5000") == "127.0.0.1"
    assert peer_host("::ffff:10.0.0.1:80") == "10.0.0.1"
    assert peer_host("2001:db8::1:443") == peer_host("2001:db8::ffff:9:443") == "2001:db8::/64"
    assert peer_host("2001:db8:0:1::1:443") == "2001:db8:0:1::/64"
    assert peer_host("unknown") == "unknown"
