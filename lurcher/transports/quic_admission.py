"""What new QUIC connections may cost the server endpoint (``RoutingQuicServer``).

Owns: ``ConnectionIds``, aioquic's table of connection IDs (ID -> connection) that also keeps
each connection's own IDs, so that a connection's end removes just those (aioquic's server
scans the whole table for every connection that ends: a flood of N connections cost time
quadratic in N, 12 s of event loop for 10,000); and ``Admission``, which decides for each
Initial packet that would create a connection.

aioquic creates a connection, about 90 KiB, for every Initial of at least 1,200 bytes to an
unknown connection ID, before it knows whether the packet decrypts; one that never
completes its handshake is dropped only by the idle timeout. So, counting the connections
still in their handshake:

- from ``RETRY_ABOVE_HANDSHAKES`` on, a client without a token is sent a stateless Retry
  (RFC 9000 §8.1.2) and no connection is made: only a client that receives packets at its
  address comes back, with the token, and gets one. Forged and garbage Initials then cost a
  small reply each and no memory. Below it, a token this endpoint issued (its client was
  sent a Retry earlier) is still taken as one, and any other is ignored;
- at ``MAX_HANDSHAKES`` new Initials are dropped (counted in ``refused``); clients resend
  them, and get in as handshakes finish or time out.

Invariants: ``ConnectionIds.ids_of[p]`` is exactly the set of IDs mapped to ``p``;
``Admission.handshaking`` holds the connections made and neither established nor ended.
"""

from __future__ import annotations

from typing import Any

from aioquic.buffer import Buffer
from aioquic.quic.configuration import SMALLEST_MAX_DATAGRAM_SIZE
from aioquic.quic.packet import QuicPacketType, pull_quic_header
from aioquic.quic.retry import QuicRetryTokenHandler

RETRY_ABOVE_HANDSHAKES = 32
MAX_HANDSHAKES = 256


class ConnectionIds(dict):
    """aioquic's ``QuicServer._protocols`` with each connection's IDs kept (module doc)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids_of: dict[Any, set[bytes]] = {}

    def __setitem__(self, cid: bytes, protocol: Any) -> None:
        previous = self.get(cid)
        if previous is not None and previous is not protocol:
            self._unlink(cid, previous)
        super().__setitem__(cid, protocol)
        self.ids_of.setdefault(protocol, set()).add(cid)

    def __delitem__(self, cid: bytes) -> None:
        protocol = self[cid]
        super().__delitem__(cid)
        self._unlink(cid, protocol)

    def clear(self) -> None:
        super().clear()
        self.ids_of.clear()

    def forget(self, protocol: Any) -> None:
        """Remove every ID of ``protocol``."""
        for cid in self.ids_of.pop(protocol, ()):
            super().__delitem__(cid)

    def _unlink(self, cid: bytes, protocol: Any) -> None:
        ids = self.ids_of.get(protocol)
        if ids is not None:
            ids.discard(cid)
            if not ids:
                del self.ids_of[protocol]


class Admission:
    """Sans-IO: the connections in their handshake and what a new Initial gets."""

    def __init__(self) -> None:
        self.handshaking: set[Any] = set()
        self.tokens = QuicRetryTokenHandler()
        self.refused = 0  # Initials dropped at MAX_HANDSHAKES

    def retry_for(self, header: Any, addr: Any, now: float) -> QuicRetryTokenHandler | None:
        """The Retry token handler aioquic should use for this new connection's Initial
        (None: none, the connection is made at once). Below ``RETRY_ABOVE_HANDSHAKES`` a
        token this endpoint did not issue (a NEW_TOKEN of another server, say) counts as
        absent (RFC 9000 §8.1.3), not as a reason to close. Raises Refused at
        MAX_HANDSHAKES."""
        busy = len(self.handshaking)
        if busy >= MAX_HANDSHAKES:
            self.refused += 1
            raise Refused
        if busy >= RETRY_ABOVE_HANDSHAKES:
            return self.tokens
        return self.tokens if header.token and self._issued(header, addr, now) else None

    def _issued(self, header: Any, addr: Any, now: float) -> bool:
        try:
            self.tokens.validate_token(address=addr, destination_cid=header.destination_cid,
                                       token=header.token, now=now)
        except ValueError:
            return False
        return True


class Refused(Exception):
    """A new connection's Initial dropped (``Admission.retry_for``)."""


def new_connection_initial(data: bytes, known: dict, cid_length: int,
                           versions: list[int]) -> Any:
    """The parsed header of ``data`` when it is an Initial packet that would make aioquic
    create a connection (big enough, a supported version, an unknown destination ID);
    else None."""
    if len(data) < SMALLEST_MAX_DATAGRAM_SIZE or not data[0] & 0x80:
        return None
    try:
        header = pull_quic_header(Buffer(data=data), host_cid_length=cid_length)
    except ValueError:
        return None
    if (header.packet_type != QuicPacketType.INITIAL or header.version not in versions
            or header.destination_cid in known):
        return None
    return header
