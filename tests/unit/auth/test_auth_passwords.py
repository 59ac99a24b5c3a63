"""auth.passwords: Argon2id hashing and verification (cheap parameters for speed)."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest
from argon2 import PasswordHasher
from argon2.exceptions import HashingError

from lurcher.auth.passwords import Passwords, UnusableHashing
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


async def test_off_loop_runs_at_most_one_hash_per_cpu_on_its_own_threads() -> None:
    """A login flood ran a hash per request on asyncio's default executor (up to CPUs + 4
    at once, beside the loop, and ahead of the partition removals and snapshots queued
    there): hashes now run on the hasher's threads, no more at once than CPUs."""
    p = cheap()
    running, most, names, lock = 0, 0, set(), threading.Lock()

    def work(password: str) -> bool:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            names.add(threading.current_thread().name)
        time.sleep(0.02)  # long enough for every free thread to start one
        with lock:
            running -= 1
        return p.verify(None, password)

    results = await asyncio.gather(*(p.off_loop(work, "x") for _ in range(24)))
    assert results == [False] * 24
    assert most == (os.cpu_count() or 1)
    assert all(name.startswith("argon2") for name in names)


def test_hashing_threads_are_shared_among_shard_processes() -> None:
    """With one shard process per CPU, one hashing thread per CPU in each ran CPUs² hashes
    at once across the machine: the CPUs are divided among the shards (at least one)."""
    cpus = os.cpu_count() or 1
    for shards, expected in ((1, cpus), (2, max(1, cpus // 2)), (0, 1), (cpus * 4, 1)):
        config = Config({"system": {"sharding": {"shards": shards}}})
        assert Passwords.from_config(config)._workers._max_workers == expected


def test_parameters_that_cannot_hash_are_one_line_refusal(monkeypatch) -> None:
    """argon2 failing to hash (its memory cannot be allocated: 4 TiB asked) is a one-line
    ``UnusableHashing`` naming the parameters, which the server's start reports as
    "cannot start"; a HashingError traceback before (found by the docs audit)."""
    def refuse(self, password, *, salt=None):
        raise HashingError("Memory allocation error")
    monkeypatch.setattr(PasswordHasher, "hash", refuse)
    with pytest.raises(UnusableHashing, match="4294967295 KiB .*Memory allocation error"):
        Passwords(time_cost=1, memory_cost_kib=0xFFFF_FFFF, parallelism=1)
