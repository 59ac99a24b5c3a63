"""Login back-off: failed logins slow down further attempts, per connection and per user.

Sans-IO: ``reserve(keys, now_s)`` says how long the caller must wait before it checks the
credentials and books the slot after it, or ``None`` when the wait would exceed ``max_s``
(the attempt is then refused at once, unchecked and unbooked, so a flood of parallel
guesses can neither queue a key's slots far into the future nor keep a client waiting more
than ``max_s``); ``failed``/``succeeded`` report the outcome. Keys are any hashables, e.g.
``("connection", client_id)`` and ``("user", username, host)``: a user's back-off is per
host it is guessed from, so a peer guessing a password (it need not be logged in) cannot
lock that user out for everyone, while one host's parallel connections stay serialised.

Rules: the first ``free_attempts`` failures of a key cost nothing; after that each attempt
is spaced by ``base_s * 2**(failures - free_attempts)``, at most ``max_s``. Attempts of one
key are serialised through ``next_at``, so parallel connections guessing one user's
password get no more tries per second than one connection. A key's failures are forgotten
``reset_s`` after its last failure, and after a successful login. At most ``max_keys`` keys
are tracked, so memory stays bounded. The oldest is dropped first, except that a key being
throttled (more than ``free_attempts`` recent failures) among the ``EVICTION_SCAN`` oldest is
kept and one of the others goes: a flood of failures under random user names (one each)
cannot push out, and so reset, the back-off of the user under attack.

The caller waits with ``asyncio.sleep`` in the login handler: only that connection's answer
is delayed (its later requests wait behind it, in order); the event loop and every other
client keep running.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lurcher.runtime.settings import Auth


@dataclass
class BackoffConfig:
    free_attempts: int
    base_s: float
    max_s: float
    reset_s: float
    max_keys: int

    @classmethod
    def from_config(cls, auth: Auth) -> "BackoffConfig":
        """From ``[auth]``'s ``login_*`` keys."""
        return cls(auth.login_free_attempts, auth.login_backoff_base / 1e6,
                   auth.login_backoff_max / 1e6, auth.login_backoff_reset / 1e6,
                   auth.login_backoff_tracked_keys)


@dataclass
class _Entry:
    failures: int = 0
    next_at: float = 0.0
    last_failure: float = 0.0


EVICTION_SCAN = 16


class LoginThrottle:
    def __init__(self, config: BackoffConfig) -> None:
        self.config = config
        self.entries: OrderedDict[Hashable, _Entry] = OrderedDict()

    def spacing_s(self, failures: int) -> float:
        """Time between two attempts of a key with ``failures`` recent failures."""
        c = self.config
        over = failures - c.free_attempts
        if over < 0:
            return 0.0
        return min(c.max_s, c.base_s * 2.0 ** min(over, 60))

    def _entry(self, key: Hashable, now_s: float) -> _Entry | None:
        entry = self.entries.get(key)
        if entry is not None and now_s - entry.last_failure > self.config.reset_s:
            del self.entries[key]
            return None
        return entry

    def reserve(self, keys: Iterable[Hashable], now_s: float) -> float | None:
        """Seconds to wait before checking this attempt (0 when no key has failed enough)
        and the slot after it booked for every key; None (nothing booked) when the wait
        would exceed ``max_s``."""
        keys = list(keys)
        entries = [e for e in (self._entry(k, now_s) for k in keys) if e is not None]
        start = max([now_s, *(e.next_at for e in entries)])
        if start - now_s > self.config.max_s:
            return None
        for entry in entries:
            entry.next_at = start + self.spacing_s(entry.failures)
        return start - now_s

    def failed(self, keys: Iterable[Hashable], now_s: float) -> None:
        for key in keys:
            entry = self._entry(key, now_s) or _Entry()
            entry.failures += 1
            entry.last_failure = now_s
            entry.next_at = max(entry.next_at, now_s + self.spacing_s(entry.failures))
            self.entries[key] = entry
            self.entries.move_to_end(key)
        while len(self.entries) > self.config.max_keys:
            self._evict_one(now_s)

    def _evict_one(self, now_s: float) -> None:
        """Drop the oldest key that is not being throttled among the ``EVICTION_SCAN``
        oldest (the throttled ones scanned move to the newest end); when all are, the
        oldest of them."""
        for _ in range(min(EVICTION_SCAN, len(self.entries))):
            key, entry = next(iter(self.entries.items()))
            throttled = (entry.failures > self.config.free_attempts
                         and now_s - entry.last_failure <= self.config.reset_s)
            if not throttled:
                del self.entries[key]
                return
            self.entries.move_to_end(key)
        self.entries.popitem(last=False)

    def succeeded(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            self.entries.pop(key, None)
