"""``host:port`` addresses, as the server's configuration, the SDK and the tools write them.

One parser for all of them (the SDK may not import the transports): ``split_address``
takes ``host:port`` with an IPv6 host in brackets (``[::1]:8090``) and a port of ASCII
digits from 0 to 65535.
"""

from __future__ import annotations

MAX_PORT = 65_535


def split_address(address: str) -> tuple[str, int]:
    """"host:port" (IPv6 as "[::1]:port") -> (host, port). Raises ValueError."""
    host, _, port = address.rpartition(":")
    if not host or not (port.isascii() and port.isdigit()):
        raise ValueError(f"address must be host:port, got {address!r}")
    if len(port) > 5 or int(port) > MAX_PORT:
        raise ValueError(f"port of {address!r} is above {MAX_PORT}")
    return host.strip("[]"), int(port)
