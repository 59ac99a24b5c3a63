"""``host:port`` addresses, as the server's configuration, the SDK and the tools write them.

One parser for all of them (the SDK may not import the transports): ``split_address``
takes ``host:port`` with an IPv6 host in brackets (``[::1]:8090``) and a port of ASCII
digits from 0 to 65535. ``peer_host`` says which host an address is, for the bounds kept
per host (login back-off, the cluster's handshake cap).
"""

from __future__ import annotations

import ipaddress

from lurcher.core.wire.units import decimal

MAX_PORT = 65_535


def split_address(address: str) -> tuple[str, int]:
    """"host:port" (IPv6 as "[::1]:port") -> (host, port). Raises ValueError."""
    host, _, port = address.rpartition(":")
    if not host or not (port.isascii() and port.isdigit()):
        raise ValueError(f"address must be host:port, got {address!r}")
    number = decimal(port, MAX_PORT)
    if number is None:
        raise ValueError(f"port of {address!r} is above {MAX_PORT}")
    return host.strip("[]"), number


def peer_host(address: str) -> str:
    """Who a connection comes from, for what is bounded per host (a login's back-off, the
    cluster's handshake cap): the IPv4 host of a ``host:port`` address (IPv4-mapped IPv6
    included), or the /64 network of an IPv6 one (a client usually holds all of a /64, so a
    key per address would give it 2^64 fresh back-offs); a name is itself."""
    host = (address.rpartition(":")[0] or address).strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.version == 4:
        return str(ip)
    return str(ipaddress.ip_network(f"{ip}/64", strict=False))
