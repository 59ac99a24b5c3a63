"""auth.tokens: raw token shape, BLAKE3 digests, expiry arithmetic, the expired-token scan."""

from __future__ import annotations

import base64

import pytest

from lurcher.auth import tokens
from lurcher.core.meta import events as ev
from lurcher.core.meta.state import MetaState

U64_MAX = 0xFFFF_FFFF_FFFF_FFFF


def test_generated_token_is_50_random_bytes_in_standard_base64() -> None:
    seen = set()
    for _ in range(200):
        token = tokens.generate_token()
        assert len(token) == 68
        assert len(base64.b64decode(token, validate=True)) == 50
        seen.add(token)
    assert len(seen) == 200


def test_digest_is_blake3_hex() -> None:
    # BLAKE3 of the empty input, from the BLAKE3 specification's test vectors
    assert tokens.token_digest("") == (
        "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262")
    digest = tokens.token_digest("some-token")
    assert len(digest) == 64 and digest == digest.lower()
    assert tokens.token_digest("some-token") == digest != tokens.token_digest("some-tokeN")


def test_digests_equal() -> None:
    d = tokens.token_digest("x")
    assert tokens.digests_equal(d, tokens.token_digest("x"))
    assert not tokens.digests_equal(d, tokens.token_digest("y"))


@pytest.mark.parametrize("requested, expected", [
    (0, tokens.NEVER),
    (U64_MAX, tokens.NEVER),
    (1, 1_000_001),
    (5_000_000, 6_000_000),
    (U64_MAX - 1, U64_MAX - 1),  # saturates: still fits the wire's u64
])
def test_expiry_at(requested: int, expected: int) -> None:
    assert tokens.expiry_at(1_000_000, requested) == expected


@pytest.mark.parametrize("expiry_at, now, expired", [
    (tokens.NEVER, U64_MAX, False),
    (100, 99, False),
    (100, 100, True),
    (100, 101, True),
])
def test_is_expired(expiry_at: int, now: int, expired: bool) -> None:
    assert tokens.is_expired(expiry_at, now) is expired


def test_expired_tokens_scans_every_user() -> None:
    state = MetaState()
    for uid in (0, 1):
        state.apply(ev.UserCreated(uid, f"user{uid}", "h", 1, None, 0))
    state.apply(ev.TokenCreated(0, "never", "d0", tokens.NEVER))
    state.apply(ev.TokenCreated(0, "old", "d1", 50))
    state.apply(ev.TokenCreated(1, "later", "d2", 500))
    state.apply(ev.TokenCreated(1, "old", "d3", 100))
    found = sorted((t.user_id, t.name) for t in tokens.expired_tokens(state, 100))
    assert found == [(0, "old"), (1, "old")]
    assert list(tokens.expired_tokens(state, 49)) == []


# -- the cleaner job (handlers.tokens) ----------------------------------------------------
class FakeShard:
    def __init__(self, meta, config) -> None:
        self.meta, self.config = meta, config


def test_cleaner_deletes_expired_tokens_durably(tmp_path) -> None:
    from lurcher.runtime.config import Config
    from lurcher.core.meta.store import MetaStore
    from lurcher.core.shard import background
    from lurcher.core.shard.handlers.tokens import clean_expired_tokens

    store = MetaStore(tmp_path / "log")
    store.record(ev.UserCreated(0, "root", "h", 1, None, 0))
    store.record(ev.TokenCreated(0, "gone", "d1", 100))
    store.record(ev.TokenCreated(0, "kept", "d2", tokens.NEVER))
    shard = FakeShard(store, Config({}))
    assert clean_expired_tokens(shard, 99) == 0
    assert clean_expired_tokens(shard, 100) == 1
    assert clean_expired_tokens(shard, 100) == 0
    store.close()
    store = MetaStore(tmp_path / "log")
    assert list(store.state.users[0].tokens) == ["kept"]
    assert set(store.state.token_hashes) == {"d2"}
    store.close()
    assert "personal_access_token_cleaner" in {job.name for job in background.JOBS}


@pytest.mark.parametrize("section, expected", [
    ({}, 60_000_000),
    ({"cleaner": {"enabled": True, "interval": "250 ms"}}, 250_000),
    ({"cleaner": {"enabled": False, "interval": "1 s"}}, None),
    ({"cleaner": {"enabled": True, "interval": "none"}}, None),
])
def test_cleaner_interval(section: dict, expected: int | None) -> None:
    from lurcher.runtime.config import Config
    from lurcher.core.shard.handlers.tokens import cleaner_interval_us

    shard = FakeShard(None, Config({"personal_access_token": section}))
    assert cleaner_interval_us(shard) == expected
