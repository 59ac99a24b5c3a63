"""The connection caps of the listeners: how many connections each may hold open, so that
connections that send nothing cannot use up the process's descriptors.

Without a cap, a client opening connections faster than they time out (an HTTP connection
is held until ``limits.http_header_timeout``, a binary one until ``limits.login_timeout``,
30 s each) used up the descriptors: new clients were reset and a topic's partition files
could not be created. Two caps, each the configured count bounded by the open-files limit:

- HTTP (``limits.http_max_connections``, ``listener_cap``): never more than a quarter of the
  open-files limit; a connection beyond it is answered ``503 Service Unavailable`` and
  closed (counted only until it is gone), over TLS closed before its handshake.
  ``lurcher-mcp``'s HTTP listener has the same kind of cap (``http.max_connections``,
  ``listener_connections``);
- the binary listeners of one shard process together, TCP (and TLS), WebSocket and the Unix
  socket (``limits.binary_max_connections``, ``binary_cap``): never more than the limit
  leaves once the segment files (``system.segment.max_open_files``), HTTP's share (shard 0)
  and ``OTHER_DESCRIPTORS`` are set aside, nor less than a quarter of it (below that the
  segment file cache gives way: it evicts when out of descriptors). A TCP or Unix-socket
  connection beyond it is closed at once, a WebSocket one answered 503 before its upgrade.

``admit``/``adopt``/``release`` keep the count (``admits`` answers for a given count). One
warning is logged when the cap is first reached, and again only after the count fell below
it; it says what becomes of new connections on that listener's kind (``refused_http``,
``refused_binary``). Sans-IO but for that log line. Over TLS a connection counts from its
accept, its handshake included (``transports.handshake``); one beyond the cap is closed before
it. Invariant: ``open`` is the number of connections admitted or adopted and not yet released.
"""

from __future__ import annotations

import logging
import resource
import sys
from typing import Any

log = logging.getLogger(__name__)

SERVICE_UNAVAILABLE = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n"
                       b"connection: close\r\ncontent-length: 20\r\n\r\ntoo many connections")
OPEN_FILES_SHARE = 4  # the HTTP cap is at most 1/4 of the open-files limit
# descriptors neither connections nor segment files: the metadata log, state files, log
# files, listeners, the shard bus, io_uring and directory listings (about 30 at rest)
OTHER_DESCRIPTORS = 64


def open_files_limit() -> int:
    """The process's soft open-files limit (``resource.RLIM_INFINITY`` when unlimited)."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def bounded(configured: int, bound: int | None) -> int | None:
    """``configured`` (0: none) never above ``bound`` (None: unbounded); None when neither
    bounds it."""
    if bound is None:
        return configured or None
    return min(configured, bound) if configured else bound


def listener_cap(configured: int, open_files: int | None = None) -> int | None:
    """The HTTP cap: ``configured`` (0: none), never above a quarter of the open-files limit
    (``open_files``; the process's soft limit when None); None when neither bounds it (no
    key and an unlimited open-files limit)."""
    if open_files is None:
        open_files = open_files_limit()
    if open_files == resource.RLIM_INFINITY:
        return bounded(configured, None)
    return bounded(configured, max(open_files // OPEN_FILES_SHARE, 1))


def binary_cap(configured: int, segment_files: int, http_share: int,
               open_files: int | None = None) -> int | None:
    """The binary listeners' cap in one shard process: ``configured`` (0: none), never above
    what the open-files limit leaves once ``segment_files``, ``http_share`` and
    ``OTHER_DESCRIPTORS`` are set aside, nor below a quarter of that limit; None when
    nothing bounds it."""
    if open_files is None:
        open_files = open_files_limit()
    if open_files == resource.RLIM_INFINITY:
        return bounded(configured, None)
    left = open_files - segment_files - http_share - OTHER_DESCRIPTORS
    return bounded(configured, max(left, open_files // OPEN_FILES_SHARE, 1))


def http_connections(limits: Any, tls: bool = False) -> ConnectionCap | None:
    """The cap of the HTTP listener (over TLS when ``tls``) from the typed ``[limits]``;
    None: no cap."""
    return listener_connections("HTTP", "limits.http_max_connections",
                                limits.http_max_connections, tls)


def refused_http(tls: bool) -> str:
    """What becomes of a connection beyond an HTTP listener's cap (over TLS when ``tls``)."""
    return "closed before their TLS handshake" if tls else "answered 503"


def listener_connections(listener: str, key: str, configured: int,
                         tls: bool = False) -> ConnectionCap | None:
    """The cap of an HTTP ``listener`` (over TLS when ``tls``) whose configuration ``key``
    says ``configured`` (0: none), at most a quarter of the open-files limit
    (``listener_cap``); None: no cap."""
    cap = listener_cap(configured)
    if cap is None:
        return None
    return ConnectionCap(cap, f"{listener}: {cap} connections open ({key}, at most a quarter "
                              f"of the open-files limit): new ones are {refused_http(tls)} "
                              f"until fewer are open")


def refused_binary(websocket: Any) -> str:
    """What becomes of a connection beyond the binary listeners' cap, given the typed
    ``[websocket]`` section: closed, but a plain WebSocket one is answered 503 first."""
    if websocket.enabled and not websocket.tls.enabled:
        return "closed (WebSocket ones answered 503)"
    return "closed"


def binary_connections(config: Any, shard_id: int) -> ConnectionCap:
    """The counting cap of this shard process's binary listeners (module doc), from the
    typed ``config``; HTTP's share is set aside on shard 0, where HTTP listens."""
    typed = config.typed
    http_share = (listener_cap(typed.limits.http_max_connections) or 0
                  if typed.http.enabled and shard_id == 0 else 0)
    cap = binary_cap(typed.limits.binary_max_connections,
                     typed.system.segment.max_open_files, http_share)
    limit = sys.maxsize if cap is None else cap
    return ConnectionCap(limit, f"TCP, WebSocket and Unix socket: {limit} connections open "
                                f"(limits.binary_max_connections, bounded by the open-files "
                                f"limit): new ones are {refused_binary(typed.websocket)} "
                                f"until fewer are open")


class ConnectionCap:
    """At most ``limit`` open connections of one listener (or of the binary listeners of
    one process); ``warning`` is logged each time the cap is reached."""

    def __init__(self, limit: int, warning: str) -> None:
        self.limit = limit
        self.warning = warning
        self.at_cap = False  # logged, and not below the cap since
        self.open = 0  # connections counted by admit and adopt, not yet released

    def admits(self, open_count: int) -> bool:
        """Whether the newest of ``open_count`` open connections may stay."""
        if open_count <= self.limit:
            if open_count < self.limit:
                self.at_cap = False
            return True
        if not self.at_cap:
            self.at_cap = True
            log.warning("%s", self.warning)
        return False

    def admit(self) -> bool:
        """Count a new connection; False (not counted) when it is beyond the cap."""
        if not self.admits(self.open + 1):
            return False
        self.open += 1
        return True

    def adopt(self) -> None:
        """Count a connection that stays whatever the count (one migrated from another
        shard: logged in, with a request to answer)."""
        self.open += 1

    def release(self) -> None:
        """A counted connection is gone."""
        self.open -= 1
