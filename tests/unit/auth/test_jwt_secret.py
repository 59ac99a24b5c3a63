"""The HTTP API's generated JWT secret (``transports.http.jwt.load_secret``) kept in
``state/jwt_secret``: made once, read back, and never taken from a damaged file (an empty
file made every login fail with a traceback; a short one would be a key anyone can guess)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from lurcher.transports.http.jwt import SECRET_BYTES, SecretDamaged, load_secret

GENERATED = SimpleNamespace(encoding_secret="", decoding_secret="")


def test_a_secret_is_generated_once_and_read_back(tmp_path):
    first = load_secret(GENERATED, tmp_path)
    assert first[0] == first[1] and len(first[0]) >= SECRET_BYTES
    assert load_secret(GENERATED, tmp_path) == first


@pytest.mark.parametrize("stored", [b"", b"\n", b"  \n"])
def test_an_empty_secret_file_gets_a_new_secret(tmp_path, caplog, stored):
    (tmp_path / "jwt_secret").write_bytes(stored)
    secret, _ = load_secret(GENERATED, tmp_path)
    assert len(secret) >= SECRET_BYTES
    assert (tmp_path / "jwt_secret").read_text().strip() == secret
    assert f"{tmp_path / 'jwt_secret'} is empty" in caplog.text


@pytest.mark.parametrize("stored", [b"x", b"a" * (SECRET_BYTES - 1), b"\xff" * 64])
def test_a_damaged_secret_file_stops_the_start_and_is_kept(tmp_path, stored):
    (tmp_path / "jwt_secret").write_bytes(stored)
    with pytest.raises(SecretDamaged, match=f"{tmp_path / 'jwt_secret'} is damaged "
                                            f"\\({len(stored)} bytes"):
        load_secret(GENERATED, tmp_path)
    assert (tmp_path / "jwt_secret").read_bytes() == stored
