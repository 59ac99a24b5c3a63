"""Revoked JWT ids (``transports.http.jwt.RevokedTokens``): an id is kept, in memory and in
its file, only until its token expires; expired ones are dropped as new ones are added, so
repeated login/logout does not grow them until a restart."""

from __future__ import annotations

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.transports.http.jwt import RevokedTokens

LIFETIME_S = 60


def test_revoking_drops_the_expired_ids_from_memory_and_file(tmp_path):
    path = tmp_path / "tokens"
    revoked = RevokedTokens(path, now_s=0)
    for now in range(0, 100 * LIFETIME_S, 7):  # a logout every 7 s for a long while
        revoked.revoke(f"jti-{now}", now + LIFETIME_S, now_s=now)
    live = LIFETIME_S // 7 + 1
    assert len(revoked.revoked) <= live
    assert len(path.read_text().splitlines()) <= 2 * live + 1
    assert f"jti-{now}" in revoked and "jti-0" not in revoked


def test_an_unexpired_id_stays_revoked_after_a_restart(tmp_path):
    path = tmp_path / "tokens"
    revoked = RevokedTokens(path, now_s=0)
    revoked.revoke("old", LIFETIME_S, now_s=0)
    revoked.revoke("new", 2 * LIFETIME_S, now_s=LIFETIME_S + 1)
    reloaded = RevokedTokens(path, now_s=LIFETIME_S + 2)
    assert "new" in reloaded and "old" not in reloaded


def test_refreshes_are_counted_per_login_until_they_expire(tmp_path):
    path = tmp_path / "tokens"
    revoked = RevokedTokens(path, now_s=0)
    revoked.revoke("logout", LIFETIME_S, now_s=0)
    login = (7, 1_000)  # user id 7, created at 1,000 µs
    for i in range(3):
        revoked.revoke(f"r{i}", LIFETIME_S + i, now_s=i, refreshed_by=login)
    assert revoked.refreshes_of(login, now_s=3) == 3
    assert revoked.refreshes_of((8, 1_000), now_s=3) == 0
    assert RevokedTokens(path, now_s=LIFETIME_S).refreshes_of(login, now_s=LIFETIME_S) == 2
    assert revoked.refreshes_of(login, now_s=LIFETIME_S + 5) == 0


def test_a_user_given_a_deleted_users_id_does_not_inherit_its_refreshes(tmp_path):
    """Refreshes were counted per user id alone, and ids are reused after a delete: the next
    user given the id was refused refreshes (401) for a token lifetime."""
    path = tmp_path / "tokens"
    revoked = RevokedTokens(path, now_s=0)
    for i in range(3):
        revoked.revoke(f"r{i}", LIFETIME_S, now_s=0, refreshed_by=(7, 1_000))
    assert revoked.refreshes_of((7, 2_000), now_s=1) == 0
    assert RevokedTokens(path, now_s=1).refreshes_of((7, 2_000), now_s=1) == 0
    assert RevokedTokens(path, now_s=1).refreshes_of((7, 1_000), now_s=1) == 3


def test_damaged_lines_are_ignored_with_a_warning(tmp_path, caplog):
    """A file that was not UTF-8 stopped the start with a traceback (read_text); torn lines
    were dropped without a word."""
    path = tmp_path / "tokens"
    path.write_bytes(b"kept 100\n\xff\xfe 100\ntorn 1\n" + b"counted 100 7\ntorn-at-the-end")
    revoked = RevokedTokens(path, now_s=50)
    assert "kept" in revoked and "counted" in revoked
    assert revoked.refreshes_of((7, None), now_s=50) == 1  # an older server's line
    assert f"{path}: 2 damaged line(s) ignored" in caplog.text
    assert RevokedTokens(path, now_s=50).revoked == revoked.revoked


def test_a_torn_last_line_that_still_parses_is_counted_as_damaged(tmp_path, caplog):
    """An append cut by a power loss ('late 1000' cut to 'late 1') still parsed, as an
    expired id: it was dropped without a word and its token accepted again. Every line the
    server writes ends with a newline, so a last line without one is torn."""
    path = tmp_path / "tokens"
    path.write_bytes(b"kept 100\nlate 1")
    revoked = RevokedTokens(path, now_s=50)
    assert "kept" in revoked
    assert f"{path}: 1 damaged line(s) ignored" in caplog.text


def test_an_id_whose_line_cannot_be_written_is_not_revoked(tmp_path):
    """The file cannot be written (here a directory in its place; descriptors used up does
    the same): CANNOT_WRITE_TO_FILE, and the id is not revoked in memory either, so the
    answer, memory and a restart agree; once it can be written the revocation goes through."""
    path = tmp_path / "tokens"
    revoked = RevokedTokens(path, now_s=0)
    login = (7, 1_000)
    path.mkdir()
    with pytest.raises(IggyError) as refused:
        revoked.revoke("jti", LIFETIME_S, now_s=0, refreshed_by=login)
    assert refused.value.code == ErrorCode.CANNOT_WRITE_TO_FILE
    assert "jti" not in revoked and revoked.refreshes_of(login, now_s=0) == 0
    path.rmdir()
    revoked.revoke("jti", LIFETIME_S, now_s=0, refreshed_by=login)
    assert "jti" in RevokedTokens(path, now_s=1)
