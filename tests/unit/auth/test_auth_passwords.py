"""auth.passwords: Argon2id hashing and verification (cheap parameters for speed)."""

from __future__ import annotations

from lurcher.auth.passwords import Passwords
from lurcher.runtime.config import Config


def cheap() -> Passwords:
    return Passwords(time_cost=1, memory_cost_kib=64, parallelism=1)


def test_hash_and_verify() -> None:
    p = cheap()
    stored = p.hash("secret-password")
    assert stored.startswith("$argon2id$")
    assert "secret-password" not in stored
    assert p.verify(stored, "secret-password")
    assert not p.verify(stored, "secret-passwore")


def test_hashes_are_salted() -> None:
    p = cheap()
    assert p.hash("same") != p.hash("same")


def test_missing_user_and_garbage_hash_never_verify() -> None:
    p = cheap()
    assert not p.verify(None, "lurcher-dummy-password")
    assert not p.verify(None, "anything")
    assert not p.verify("not-a-hash", "anything")


def test_from_config_reads_auth_section() -> None:
    config = Config({"auth": {"argon2_time_cost": 1, "argon2_memory_cost_kib": 64,
                              "argon2_parallelism": 1}})
    p = Passwords.from_config(config)
    assert "m=64,t=1,p=1" in p.hash("x")
