"""One node-to-node link as a sans-IO state machine: authentication, then framed messages.

Bytes in (``receive_data``), events out (``Established``, ``Received``, ``Refused``); what
to write comes back from ``hello()`` / ``send()`` / ``receive_data`` as bytes. No sockets,
no clock, no randomness (the nonce is passed in), so a test or the simulator drives it.

Handshake, symmetric (both ends send the same two messages):

1. ``HELLO``: magic ``LRCL``, version u8, node index u8, nonce (16 bytes), cluster name
   (u8 length + UTF-8).
2. on the peer's hello: ``PROOF`` = HMAC-SHA256(secret, "lurcher-cluster" || peer nonce ||
   own index || cluster name), 32 bytes.

A link is established once the peer's proof verifies against the nonce this end sent; a
wrong magic, version, cluster name or proof, or a peer claiming this end's own index, is
``Refused`` with a one-line reason, and the link yields nothing more (the adapter closes the
socket and logs the reason). Replaying a recorded handshake fails: the proof covers the
receiver's fresh nonce.

Then each frame is ``u32 length`` (of what follows) ``u32 group`` and one replication
message (``core.replication.codec``). A frame longer than ``max_frame_bytes`` or one that does
not decode is ``Refused`` (the peer is broken or hostile; messages are never skipped
silently, as a lost prefix would desynchronise the stream). Memory: at most one partial
frame of ``max_frame_bytes`` is buffered.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

from lurcher.core.replication.codec import ReplicationWireError, decode, encode
from lurcher.core.replication.messages import Message

MAGIC = b"LRCL"
VERSION = 1
NONCE_BYTES = 16
PROOF_BYTES = 32
HELLO_FIXED = struct.Struct("<4sBB16sB")
FRAME_HEADER = struct.Struct("<II")
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
_DOMAIN = b"lurcher-cluster"


@dataclass(frozen=True)
class Established:
    peer: int


@dataclass(frozen=True)
class Received:
    group: int
    message: Message


@dataclass(frozen=True)
class Refused:
    reason: str


Event = Established | Received | Refused


def _proof(secret: bytes, nonce: bytes, prover: int, cluster: bytes) -> bytes:
    return hmac.new(secret, _DOMAIN + nonce + bytes([prover]) + cluster, hashlib.sha256).digest()


class PeerLink:
    """The state of one link; ``index`` is this node, ``nonce`` fresh per connection."""

    def __init__(self, cluster: str, secret: bytes, index: int, nonce: bytes,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if len(nonce) != NONCE_BYTES:
            raise ValueError(f"nonce must be {NONCE_BYTES} bytes")
        self.cluster = cluster.encode()
        if not 0 < len(self.cluster) < 256:
            raise ValueError("cluster name must be 1..255 bytes")
        self.secret, self.index, self.nonce = secret, index, nonce
        self.max_frame_bytes = max_frame_bytes
        self.peer: int | None = None
        self.established = False
        self.failed = False
        self.buffer = bytearray()
        self.outgoing: list[bytes] = []

    # ---- output ---------------------------------------------------------------------

    def hello(self) -> bytes:
        return HELLO_FIXED.pack(MAGIC, VERSION, self.index, self.nonce,
                                len(self.cluster)) + self.cluster

    def send(self, group: int, message: Message) -> bytes:
        """The bytes of one frame. Raises RuntimeError before the link is established."""
        if not self.established:
            raise RuntimeError("link not established")
        body = encode(message)
        return FRAME_HEADER.pack(len(body) + 4, group) + body

    def take_output(self) -> bytes:
        """Bytes the handshake produced while receiving (the proof)."""
        out, self.outgoing = b"".join(self.outgoing), []
        return out

    # ---- input ----------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        if self.failed:
            return []
        self.buffer += data
        events: list[Event] = []
        while not self.failed:
            event = self._next_event()
            if event is None:
                break
            events.append(event)
        return events

    def _next_event(self) -> Event | None:
        if self.peer is None:
            return self._read_hello()
        if not self.established:
            return self._read_proof()
        return self._read_frame()

    def _refuse(self, reason: str) -> Refused:
        self.failed = True
        self.buffer.clear()
        return Refused(reason)

    def _read_hello(self) -> Event | None:
        if len(self.buffer) < HELLO_FIXED.size:
            return None
        magic, version, peer, nonce, name_len = HELLO_FIXED.unpack_from(self.buffer)
        if magic != MAGIC:
            return self._refuse("not a lurcher cluster peer (bad magic)")
        if version != VERSION:
            return self._refuse(f"cluster protocol version {version}, expected {VERSION}")
        end = HELLO_FIXED.size + name_len
        if len(self.buffer) < end:
            return None
        name = bytes(self.buffer[HELLO_FIXED.size:end])
        del self.buffer[:end]
        if name != self.cluster:
            return self._refuse(f"peer belongs to cluster {name.decode(errors='replace')!r}, "
                                f"not {self.cluster.decode()!r}")
        if peer == self.index:
            return self._refuse(f"peer claims this node's own index {peer}")
        self.peer = peer
        self.outgoing.append(_proof(self.secret, nonce, self.index, self.cluster))
        return self._next_event()

    def _read_proof(self) -> Event | None:
        if len(self.buffer) < PROOF_BYTES:
            return None
        proof = bytes(self.buffer[:PROOF_BYTES])
        del self.buffer[:PROOF_BYTES]
        expected = _proof(self.secret, self.nonce, self.peer, self.cluster)
        if not hmac.compare_digest(proof, expected):
            return self._refuse(f"node {self.peer} failed authentication (wrong cluster secret)")
        self.established = True
        return Established(self.peer)

    def _read_frame(self) -> Event | None:
        if len(self.buffer) < FRAME_HEADER.size:
            return None
        length, group = FRAME_HEADER.unpack_from(self.buffer)
        if length < 5 or length > self.max_frame_bytes:
            return self._refuse(f"frame of {length} bytes from node {self.peer} "
                                f"(limit {self.max_frame_bytes})")
        end = 4 + length
        if len(self.buffer) < end:
            return None
        body = bytes(self.buffer[FRAME_HEADER.size:end])
        del self.buffer[:end]
        try:
            return Received(group, decode(body))
        except ReplicationWireError as e:
            return self._refuse(f"undecodable message from node {self.peer}: {e}")
