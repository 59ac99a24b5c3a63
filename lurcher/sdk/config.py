"""``ClientConfig``: everything a ``Client`` needs to connect, as one typed value.

Built by hand (keyword arguments of ``Client``) or from a connection string
(``connstring.parse``). Durations are seconds (float); ``reconnection_retries`` None
means unlimited. ``request_timeout_s`` (default ``DEFAULT_REQUEST_TIMEOUT_S``; None: wait
for ever) bounds every request, the heartbeat's pings and logins included, so a server
that accepts but never answers, or a connection whose peer vanished, ends in TASK_TIMEOUT.
``idle_poll_s`` (0 to ``core.idle_poll.MAX_IDLE_POLL_S``; 0: off) is how long the event
loop may keep polling, instead of sleeping, while a request waits for its answer: it
adapts, and polls only while answers come within that time (``core.idle_poll``).
``options`` keeps transport-specific settings that only a given connection class reads
(e.g. WebSocket buffer sizes), as strings. A duration or count out of its range (a timeout
or heartbeat of 0 or less, a negative interval or retry count) is refused when the config is
made: ``InvalidArgument`` INVALID_CONFIGURATION naming the field (it used to end every
request at once in TaskTimeout).
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

from lurcher.core.idle_poll import MAX_IDLE_POLL_S
from lurcher.core.wire.address import split_address
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.sdk.arguments import InvalidArgument

DEFAULT_ADDRESS = "127.0.0.1:8090"
DEFAULT_REQUEST_TIMEOUT_S = 60.0
# How long a request may poll for its answer before the loop sleeps (``core.idle_poll``).
DEFAULT_IDLE_POLL_S = 0.002
TRANSPORTS = ("tcp", "quic", "http", "ws")


class ClientConfig(msgspec.Struct, frozen=True, kw_only=True):
    transport: str = "tcp"
    address: str = DEFAULT_ADDRESS
    username: str | None = None
    password: str | None = None
    token: str | None = None
    tls: bool = False
    tls_domain: str | None = None
    tls_ca_file: str | None = None
    tls_validate_certificate: bool = True
    nodelay: bool = True
    heartbeat_interval_s: float | None = 5.0
    reconnection_enabled: bool = True
    reconnection_retries: int | None = None
    reconnection_interval_s: float = 1.0
    reestablish_after_s: float = 0.0
    connect_timeout_s: float = 10.0
    request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S
    idle_poll_s: float = DEFAULT_IDLE_POLL_S
    options: dict[str, str] = {}

    def __post_init__(self) -> None:
        for name in ("heartbeat_interval_s", "connect_timeout_s", "request_timeout_s"):
            _in_range(self, name, above_zero=True)
        for name in ("reconnection_interval_s", "reestablish_after_s", "reconnection_retries",
                     "idle_poll_s"):
            _in_range(self, name, above_zero=False)
        if self.idle_poll_s > MAX_IDLE_POLL_S:
            raise InvalidArgument(ErrorCode.INVALID_CONFIGURATION,
                                  f"idle_poll_s: {self.idle_poll_s!r} (at most "
                                  f"{MAX_IDLE_POLL_S})")

    @property
    def has_credentials(self) -> bool:
        return self.token is not None or (self.username is not None and self.password is not None)

    def host_port(self) -> tuple[str, int]:
        """``address`` split into host and port; brackets around an IPv6 host are removed.

        Raises ValueError for an address without a port from 0 to 65535.
        """
        return split_address(self.address)


# Fields where None has a meaning: no heartbeat, no request timeout, unlimited retries.
_NONE_TAKEN = frozenset({"heartbeat_interval_s", "request_timeout_s", "reconnection_retries"})


def _in_range(config: ClientConfig, name: str, above_zero: bool) -> None:
    """Raises InvalidArgument INVALID_CONFIGURATION unless field ``name`` is a finite number
    over 0 (``above_zero``) or at least 0, or None where the field takes None."""
    value: Any = getattr(config, name)
    if value is None and name in _NONE_TAKEN:
        return
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and math.isfinite(value) and (value > 0 if above_zero else value >= 0):
        return
    expected = "more than 0" if above_zero else "0 or more"
    raise InvalidArgument(ErrorCode.INVALID_CONFIGURATION, f"{name}: {value!r} (expected "
                          f"{expected}{', or None' if name in _NONE_TAKEN else ''})")
