"""The connection cap of the HTTP listener (``limits.http_max_connections``).

A connection that sends nothing is held until ``limits.http_header_timeout`` (30 s): without
a cap, a client opening connections faster than that used up the process's descriptors,
and then TCP clients were reset and a topic's partition files could not be created. The
cap is the configured count, never more than a quarter of the open-files limit
(``listener_cap``), so the other listeners and the stored files keep the rest.

``ConnectionCap.admits`` is asked by each new connection with the count open, itself
included; one beyond the cap is answered ``503 Service Unavailable`` and closed (uvicorn
counts it only until it is gone). One warning is logged when the cap is first reached, and
again only after the count fell below it. Sans-IO but for that log line. Over TLS uvicorn
sees a connection once its handshake is done: one still in it is not counted (asyncio ends
a handshake after 60 s).
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)

SERVICE_UNAVAILABLE = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n"
                       b"connection: close\r\ncontent-length: 20\r\n\r\ntoo many connections")
OPEN_FILES_SHARE = 4  # the cap is at most 1/4 of the open-files limit


def listener_cap(configured: int, open_files: int | None = None) -> int:
    """The cap of a listener: ``configured`` (0: none), never above a quarter of the
    open-files limit (``open_files``; the process's soft limit when None); None when
    neither bounds it (no key and an unlimited open-files limit)."""
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if open_files == resource.RLIM_INFINITY:
        return configured or None
    share = max(open_files // OPEN_FILES_SHARE, 1)
    return min(configured, share) if configured else share


class ConnectionCap:
    """At most ``limit`` open connections of one listener."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.at_cap = False  # logged, and not below the cap since

    def admits(self, open_count: int) -> bool:
        """Whether the newest of ``open_count`` open connections may stay."""
        if open_count <= self.limit:
            if open_count < self.limit:
                self.at_cap = False
            return True
        if not self.at_cap:
            self.at_cap = True
            log.warning("HTTP: %d connections open (limits.http_max_connections, at most a "
                        "quarter of the open-files limit): new ones are answered 503 until "
                        "fewer are open", self.limit)
        return False
