"""``[http.jwt]`` durations written "none" (``transports.http.jwt.JwtManager``): clock_skew
and not_before "none" are no skew and no delay, as "none" is 0 wherever a duration can be
switched off (``runtime.settings.seconds``); access_token_expiry "none" never expires.
Taken as microseconds (U64_MAX), clock_skew "none" kept every token valid forever after it
expired and not_before "none" made every token unusable (found by the docs audit)."""

from __future__ import annotations

import time

import pytest

from lurcher.core.wire.errors import IggyError
from lurcher.runtime.config import Config
from lurcher.transports.http.jwt import JwtManager

HOUR_S = 3600


def manager(tmp_path, clock_s=time.time, **jwt: str) -> JwtManager:
    section = Config({"http": {"jwt": {"encoding_secret": "s" * 40, **jwt}}}).typed.http.jwt
    return JwtManager(section, tmp_path, clock_s)


def test_clock_skew_none_lets_no_expired_token_through(tmp_path):
    issued_an_hour_ago = manager(tmp_path, lambda: time.time() - HOUR_S,
                                 access_token_expiry="1 s", clock_skew="none")
    token = issued_an_hour_ago.issue(1, 0).token
    with pytest.raises(IggyError, match="expired"):
        manager(tmp_path, access_token_expiry="1 s", clock_skew="none").verify(token)


def test_not_before_none_gives_a_token_usable_at_once(tmp_path):
    jwt = manager(tmp_path, not_before="none", clock_skew="0 s")
    assert jwt.verify(jwt.issue(1, 0).token).user_id == 1


def test_expiry_none_never_expires(tmp_path):
    jwt = manager(tmp_path, access_token_expiry="none")
    token = jwt.issue(1, 0)
    assert token.expiry_s > time.time() + 100 * 365 * 24 * HOUR_S
    assert jwt.verify(token.token).user_id == 1
