"""Password hashing with Argon2id (argon2-cffi); parameters come from ``[auth]``.

``verify`` never raises for a wrong password and takes the same time whether or not the
user exists (callers pass ``None`` to hash against a dummy), so a login flood learns
nothing from timing. Hashing is CPU-heavy: callers on an event loop run it in a thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

if TYPE_CHECKING:
    from lurcher.runtime.config import Config


class Passwords:
    def __init__(self, time_cost: int, memory_cost_kib: int, parallelism: int) -> None:
        self._hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_cost_kib,
                                      parallelism=parallelism)
        self._dummy = self._hasher.hash("lurcher-dummy-password")

    @classmethod
    def from_config(cls, config: Config) -> "Passwords":
        """From ``[auth]``'s ``argon2_*`` keys."""
        auth = config.typed.auth
        return cls(auth.argon2_time_cost, auth.argon2_memory_cost_kib, auth.argon2_parallelism)

    def hash(self, password: str) -> str:
        return self._hasher.hash(password)

    def verify(self, stored_hash: str | None, password: str) -> bool:
        """True when ``password`` matches; a missing user (None) is checked against a dummy."""
        try:
            ok = self._hasher.verify(stored_hash or self._dummy, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False
        return ok and stored_hash is not None
