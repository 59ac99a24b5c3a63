"""One node-to-node link as a sans-IO state machine: authentication, then framed messages.

Bytes in (``receive_data``), events out (``Established``, ``Received``, ``Refused``); what
to write comes back from ``hello()`` / ``send()`` / ``receive_data`` as bytes. No sockets,
no clock, no randomness (the nonce is passed in), so a test or the simulator drives it.

Handshake, symmetric (both ends send the same two messages):

1. ``HELLO``: magic ``LRCL``, version u8, node index u8, nonce (16 bytes), cluster name
   (u8 length + UTF-8).
2. on the peer's hello: ``PROOF`` = HMAC-SHA256(secret, "lurcher-cluster" || role ||
   peer nonce || own index || peer index || cluster name), 32 bytes; role is ``D`` from the
   end that dialed the connection, ``A`` from the end that accepted it.

A link is established once the peer's proof verifies against the nonce this end sent; a
wrong magic, version, cluster name or proof, or a peer claiming this end's own index, is
``Refused`` with a one-line reason, and the link yields nothing more (the adapter closes the
socket and logs the reason). Replaying a recorded handshake fails: the proof covers the
receiver's fresh nonce. Relaying fails too: a proof is sent before the peer's is checked,
so a node proves its identity over any nonce to anyone who connects; but that proof is an
acceptor's (the relayer dialed it), made for the index the relayer claimed, while the
node the relayer also dialed expects a dialer's proof made for itself. A dialer gives its
proof only to the node it dialed (``expect``): whoever holds a member's address gets a
dialer's proof made for that member, never one another node would take. Before version 2 a
proof named neither role nor verifier, and a relayer without the secret passed as any node.

Then each frame is ``u32 length`` (of what follows) ``u32 group`` and one replication
message (``core.replication.codec``). A frame longer than ``max_frame_bytes`` or one that does
not decode is ``Refused`` (the peer is broken or hostile; messages are never skipped
silently, as a lost prefix would desynchronise the stream). Memory: at most one partial
frame of ``max_frame_bytes`` is buffered, and before the handshake completes at most
``MAX_HANDSHAKE_BYTES`` (a hello and a proof are under 350 bytes; an unauthenticated peer
that sends more while the handshake is unfinished is ``Refused``).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass

from lurcher.core.replication.codec import ReplicationWireError, decode, encode_parts
from lurcher.core.replication.messages import Message

MAGIC = b"LRCL"
VERSION = 2  # 2: proofs bind the role and the verifier
NONCE_BYTES = 16
PROOF_BYTES = 32
HELLO_FIXED = struct.Struct("<4sBB16sB")
FRAME_HEADER = struct.Struct("<II")
DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_HANDSHAKE_BYTES = 4096
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


def _proof(secret: bytes, nonce: bytes, prover: int, verifier: int, by_dialer: bool,
           cluster: bytes) -> bytes:
    """The proof ``prover`` gives ``verifier`` over the nonce ``verifier`` sent."""
    role = b"D" if by_dialer else b"A"
    message = _DOMAIN + role + nonce + bytes([prover, verifier]) + cluster
    return hmac.new(secret, message, hashlib.sha256).digest()


class PeerLink:
    """The state of one link; ``index`` is this node, ``nonce`` fresh per connection,
    ``dialer`` whether this end dialed the connection (False: accepted it), ``expect``
    the node a dialer dialed: a hello naming another is refused before any proof is sent."""

    def __init__(self, cluster: str, secret: bytes, index: int, nonce: bytes, *,
                 dialer: bool, expect: int | None = None,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if len(nonce) != NONCE_BYTES:
            raise ValueError(f"nonce must be {NONCE_BYTES} bytes")
        self.cluster = cluster.encode()
        if not 0 < len(self.cluster) < 256:
            raise ValueError("cluster name must be 1..255 bytes")
        self.secret, self.index, self.nonce, self.dialer = secret, index, nonce, dialer
        self.expect = expect
        self.max_frame_bytes = max_frame_bytes
        self.peer: int | None = None
        self.established = False
        self.failed = False
        self.chunks: list[bytes] = []  # received, not yet read
        self.have = 0  # bytes in ``chunks``
        self.need = HELLO_FIXED.size  # bytes needed before the next step can be read
        self.view, self.pos = memoryview(b""), 0  # while reading: the joined chunks
        self.outgoing: list[bytes] = []

    # ---- output ---------------------------------------------------------------------

    def hello(self) -> bytes:
        return HELLO_FIXED.pack(MAGIC, VERSION, self.index, self.nonce,
                                len(self.cluster)) + self.cluster

    def send(self, group: int, message: Message) -> bytes:
        """The bytes of one frame. Raises RuntimeError before the link is established."""
        return b"".join(self.frame(group, encode_parts(message)))

    def frame(self, group: int, body: list) -> list:
        """One frame around a message already encoded (``codec.encode_parts``), as parts
        for ``writelines``: the body's large blobs are not copied. Raises RuntimeError
        before the link is established."""
        if not self.established:
            raise RuntimeError("link not established")
        return [FRAME_HEADER.pack(sum(map(len, body)) + 4, group), *body]

    def take_output(self) -> bytes:
        """Bytes the handshake produced while receiving (the proof)."""
        out, self.outgoing = b"".join(self.outgoing), []
        return out

    # ---- input ----------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        """Events of the bytes received so far. Bytes are kept as the chunks they came in
        and joined once, when the next step (hello, proof, a whole frame) can be read, so a
        large frame costs one copy and no per-chunk work."""
        if self.failed:
            return []
        self.chunks.append(bytes(data))
        self.have += len(data)
        if self.have < self.need:
            return []
        buf = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        self.pos, self.view = 0, memoryview(buf)
        events: list[Event] = []
        while not self.failed:
            event = self._next_event()
            if event is None:
                break
            events.append(event)
        if self.failed:
            return events
        self.chunks = [buf[self.pos:]] if self.pos < len(buf) else []
        self.have = len(buf) - self.pos
        self.view = memoryview(b"")
        if not self.established and self.have > MAX_HANDSHAKE_BYTES:
            events.append(self._refuse(f"{self.have} bytes before the handshake completed "
                                       f"(limit {MAX_HANDSHAKE_BYTES})"))
        return events

    @property
    def _left(self) -> int:
        return len(self.view) - self.pos

    def _next_event(self) -> Event | None:
        if self.peer is None:
            return self._read_hello()
        if not self.established:
            return self._read_proof()
        return self._read_frame()

    def _refuse(self, reason: str) -> Refused:
        self.failed = True
        self.chunks, self.have, self.view = [], 0, memoryview(b"")
        return Refused(reason)

    def _read_hello(self) -> Event | None:
        if self._left < HELLO_FIXED.size:
            self.need = HELLO_FIXED.size
            return None
        magic, version, peer, nonce, name_len = HELLO_FIXED.unpack_from(self.view, self.pos)
        if magic != MAGIC:
            return self._refuse("not a lurcher cluster peer (bad magic)")
        if version != VERSION:
            return self._refuse(f"cluster protocol version {version}, expected {VERSION}")
        end = HELLO_FIXED.size + name_len
        if self._left < end:
            self.need = end
            return None
        name = bytes(self.view[self.pos + HELLO_FIXED.size:self.pos + end])
        self.pos += end
        if name != self.cluster:
            return self._refuse(f"peer belongs to cluster {name.decode(errors='replace')!r}, "
                                f"not {self.cluster.decode()!r}")
        if peer == self.index:
            return self._refuse(f"peer claims this node's own index {peer}")
        if self.expect is not None and peer != self.expect:
            return self._refuse(f"the link to node {self.expect} answered as node {peer}")
        self.peer = peer
        self.outgoing.append(_proof(self.secret, nonce, self.index, peer, self.dialer,
                                    self.cluster))
        return self._next_event()

    def _read_proof(self) -> Event | None:
        if self._left < PROOF_BYTES:
            self.need = PROOF_BYTES
            return None
        proof = bytes(self.view[self.pos:self.pos + PROOF_BYTES])
        self.pos += PROOF_BYTES
        expected = _proof(self.secret, self.nonce, self.peer, self.index, not self.dialer,
                          self.cluster)
        if not hmac.compare_digest(proof, expected):
            return self._refuse(f"node {self.peer} failed authentication (wrong cluster secret)")
        self.established = True
        return Established(self.peer)

    def _read_frame(self) -> Event | None:
        if self._left < FRAME_HEADER.size:
            self.need = FRAME_HEADER.size
            return None
        length, group = FRAME_HEADER.unpack_from(self.view, self.pos)
        if length < 5 or length > self.max_frame_bytes:
            return self._refuse(f"frame of {length} bytes from node {self.peer} "
                                f"(limit {self.max_frame_bytes})")
        end = 4 + length
        if self._left < end:
            self.need = end
            return None
        body = self.view[self.pos + FRAME_HEADER.size:self.pos + end]
        self.pos += end
        try:
            return Received(group, decode(body))
        except ReplicationWireError as e:
            return self._refuse(f"undecodable message from node {self.peer}: {e}")
