"""Password hashing with Argon2id (argon2-cffi); parameters come from ``[auth]``.

``verify`` never raises for a wrong password and takes the same time whether or not the
user exists (callers pass ``None`` to hash against a dummy), so a login flood learns
nothing from timing. Hashing is CPU-heavy: callers on an event loop run it with
``off_loop``, on this object's own threads: ``workers``, one per CPU divided among the
shard processes (at least one each). So a flood of logins neither takes the event loop's
executor (partition removal, snapshots and cluster metadata writes queue there) nor runs
more hashes at once than there are CPUs to compete with the loops (asyncio's default
executor ran up to CPUs + 4 per process).
Construction hashes once (the dummy), so parameters that cannot hash here (more memory
than can be allocated) stop the start with ``UnusableHashing``, one line, before any login.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import (HashingError, InvalidHashError, VerificationError,
                                VerifyMismatchError)

if TYPE_CHECKING:
    from lurcher.runtime.config import Config

T = TypeVar("T")


class UnusableHashing(ValueError):
    """The ``[auth]`` Argon2 parameters cannot hash here (the memory cannot be allocated)."""


class Passwords:
    def __init__(self, time_cost: int, memory_cost_kib: int, parallelism: int,
                 workers: int | None = None) -> None:
        """``workers``: hashing threads (default: one per CPU)."""
        self._hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_cost_kib,
                                      parallelism=parallelism)
        try:
            self._dummy = self._hasher.hash("lurcher-dummy-password")
        except HashingError as exc:
            raise UnusableHashing(f"auth.argon2_*: cannot hash a password with time cost "
                                  f"{time_cost}, {memory_cost_kib} KiB and parallelism "
                                  f"{parallelism}: {exc}") from None
        self._workers = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1,
                                           thread_name_prefix="argon2")

    @classmethod
    def from_config(cls, config: Config) -> "Passwords":
        """From ``[auth]``'s ``argon2_*`` keys; the CPUs shared among the shard processes."""
        auth = config.typed.auth
        workers = max(1, (os.cpu_count() or 1) // config.shards_count())
        return cls(auth.argon2_time_cost, auth.argon2_memory_cost_kib, auth.argon2_parallelism,
                   workers)

    async def off_loop(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` (``hash``, ``verify`` or a function of them) on a hashing thread."""
        return await asyncio.get_running_loop().run_in_executor(self._workers, work, *args)

    def hash(self, password: str) -> str:
        return self._hasher.hash(password)

    def verify(self, stored_hash: str | None, password: str) -> bool:
        """True when ``password`` matches; a missing user (None) is checked against a dummy."""
        try:
            ok = self._hasher.verify(stored_hash or self._dummy, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
        return ok and stored_hash is not None
