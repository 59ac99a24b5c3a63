"""QUIC settings and run-time tuning shared by the server's front end and the SDK (aioquic).

Owns: the Iggy-named QUIC options (``[quic]`` keys on the server, connection-string options
in the SDK) and their one mapping to aioquic (``quic_configuration``), plus what aioquic has
no option for, applied per connection by ``QuicTuning``:

- ``initial_mtu``: the UDP payload size used once the handshake is done (the handshake
  itself always uses 1,200-byte datagrams, which every QUIC path carries), never more than
  the peer's ``max_udp_payload_size`` transport parameter (RFC 9000 §18.2). When a probe
  timeout fires while the larger size is in use (a path that drops large datagrams loses
  every packet, so nothing is acknowledged), the connection drops to 1,200 bytes; it tries
  the larger size again after ``MTU_RETRY_S``, doubling the wait after each failure up to
  ``MTU_RETRY_MAX_S``. Once a packet sent since the larger size was put in use has been
  acknowledged the path is taken to carry it, and only ``PROVEN_PATH_PTOS`` probe timeouts
  in a row (no ACK at all for several round trips) make it fall back: a single late ACK
  from a busy peer is not a path that drops large datagrams.
- ``send_window``: the bytes in flight without acknowledgement never exceed it (a cap on
  the congestion window).
- ``receive_window``: the connection-level flow-control window offered to the peer
  (``max_data``): the bytes it may send beyond what was consumed. It moves as data is
  consumed and never grows, so it bounds what a connection's streams buffer out of order
  together; each stream's window is ``STREAM_WINDOW_BYTES``, likewise
  (``lurcher.core.quic_flow``).
- ``keep_alive_interval``: a PING every interval (0 or none: never).
- ``max_concurrent_bidi_streams``: the bidirectional streams the peer may have open at once
  (a stream it opens implicitly costs nothing until a frame for it arrives). A stream counts
  until aioquic discards it, after its reply (or reset) is acknowledged. 256 by default, not
  Iggy's 10,000: the transmit loop (``lurcher.core.quic_steady``) walks every stream held.
- ``max_idle_timeout``: the QUIC idle timeout.

``initial_mtu`` goes up to 65,507 bytes (the largest IPv4 UDP payload): STREAM frames are
written with a 4-byte length (``lurcher.core.quic_frames``), so one frame fills a datagram
of any size.

Sockets: both ends use ``lurcher.core.udp_offload`` (same-size datagrams sent in one system
call, received coalesced), on sockets made by ``bound_socket``. Receiving: a transmit asked
for while a datagram is received waits for the end of the loop turn (``TunedQuicProtocol``),
so the datagrams read in one turn cost one transmit. ACKs: an ACK waits up to
``ACK_DELAY_S`` and rides on the next packet that carries stream data (a reply, the next
request) when one goes out first (``send_soon``), instead of one ACK-only packet per
millisecond. ``TunedQuicProtocol.transmit`` replaces aioquic's (same steps, datagrams sent
in chunks of whole datagrams as they are built, handed out by the packet builder itself).
Once the handshake is done, 1-RTT packets are protected without aioquic's whole-packet
copies (``lurcher.core.quic_crypto``).

Invariants: packet pacing is off (aioquic paces with asyncio timers, whose millisecond
resolution caps a connection near 16 datagrams per millisecond; the congestion window still
bounds every burst); UDP socket buffers are asked for ``SOCKET_BUFFER_BYTES`` (the kernel caps
it) so a window's burst of large datagrams is not dropped by the receiving socket.
Values are checked by ``quic_settings``: a bad one raises ValueError naming the key.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from aioquic import tls
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.quic.configuration import SMALLEST_MAX_DATAGRAM_SIZE, QuicConfiguration
from aioquic.quic.congestion.base import K_INITIAL_WINDOW

from lurcher.core.quic_crypto import lean_packet_protection
from lurcher.core.quic_frames import (FRAMES_PER_STREAM, MAX_DATAGRAM_BYTES, MAX_FRAMES_PER_PACKET,
                                     use_long_frames)
from lurcher.core.udp_offload import datagrams_per_send
from lurcher.core.wire.units import parse_duration, parse_size

SMALLEST_DATAGRAM_BYTES = SMALLEST_MAX_DATAGRAM_SIZE  # 1,200: what every QUIC path carries
SOCKET_BUFFER_BYTES = 4 * 1024 * 1024
STREAM_WINDOW_BYTES = 4 * 1024 * 1024
MTU_RETRY_S = 2.0
MTU_RETRY_MAX_S = 600.0
PROVEN_PATH_PTOS = 3  # probe timeouts in a row that make a proven large size fall back
STREAM_COUNT_MAX = 1 << 60
ACK_DELAY_S = 0.010  # within the 25 ms max_ack_delay aioquic announces to the peer


@dataclass(frozen=True)
class QuicSettings:
    """The QUIC options of one end, in bytes and seconds (0 disables ``keep_alive_s``)."""
    initial_mtu: int = 64_000
    send_window: int = 16 * 1024 * 1024
    receive_window: int = 16 * 1024 * 1024
    keep_alive_s: float = 5.0
    max_concurrent_bidi_streams: int = 256
    idle_timeout_s: float = 10.0


def _duration(value: Any, plain_unit_s: float) -> float:
    """Seconds from a humantime string, or a plain number in ``plain_unit_s`` units."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) * plain_unit_s
    text = str(value).strip()
    if text.lower() in ("none", "0"):
        return 0.0
    if text.replace(".", "", 1).isdigit():
        return float(text) * plain_unit_s
    return parse_duration(text)


def _size(value: Any) -> int:
    return parse_size(value if isinstance(value, int) else str(value).strip())


def _count(value: Any) -> int:
    return int(str(value).replace("_", ""))


# key -> (QuicSettings field, converter taking (value, plain number unit in seconds))
_KEYS: dict[str, tuple[str, Callable[[Any, float], Any]]] = {
    "initial_mtu": ("initial_mtu", lambda v, _: _size(v)),
    "send_window": ("send_window", lambda v, _: _size(v)),
    "receive_window": ("receive_window", lambda v, _: _size(v)),
    "keep_alive_interval": ("keep_alive_s", _duration),
    "max_concurrent_bidi_streams": ("max_concurrent_bidi_streams", lambda v, _: _count(v)),
    "max_idle_timeout": ("idle_timeout_s", _duration),
}
_BOUNDS = {"initial_mtu": (SMALLEST_MAX_DATAGRAM_SIZE, MAX_DATAGRAM_BYTES),
           "send_window": (SMALLEST_MAX_DATAGRAM_SIZE, None),
           "receive_window": (1, None),
           "max_concurrent_bidi_streams": (1, STREAM_COUNT_MAX)}


def quic_settings(options: Mapping[str, Any], plain_unit_s: float = 1.0) -> QuicSettings:
    """The settings named in ``options`` (other keys are ignored) over the defaults.

    A plain number given for a duration counts ``plain_unit_s`` seconds (the SDK's
    connection strings use milliseconds, as Iggy's). Raises ValueError naming the key.
    """
    values: dict[str, Any] = {}
    for key, (name, convert) in _KEYS.items():
        if key not in options:
            continue
        try:
            value = convert(options[key], plain_unit_s)
        except ValueError as exc:
            raise ValueError(f"quic option {key}: {exc}") from None
        low, high = _BOUNDS.get(key, (0, None))
        if value < low or (high is not None and value > high):
            raise ValueError(f"quic option {key}: {options[key]!r} is outside "
                             f"{low}..{high if high is not None else 'unlimited'}")
        values[name] = value
    return QuicSettings(**values)


def quic_configuration(settings: QuicSettings, *, is_client: bool,
                       **extra: Any) -> QuicConfiguration:
    """The aioquic configuration of ``settings`` (``extra``: server_name and the like)."""
    return QuicConfiguration(is_client=is_client, alpn_protocols=None,
                             idle_timeout=settings.idle_timeout_s or 1e9,
                             max_datagram_size=SMALLEST_MAX_DATAGRAM_SIZE,
                             max_data=settings.receive_window,
                             max_stream_data=STREAM_WINDOW_BYTES, **extra)


def enlarge_socket_buffers(sock: Any) -> None:
    """Ask for ``SOCKET_BUFFER_BYTES`` of send and receive buffer (the kernel may cap it)."""
    for option in (socket.SO_RCVBUF, socket.SO_SNDBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, option, SOCKET_BUFFER_BYTES)
        except OSError:
            pass


def bound_socket(family: int, address: tuple) -> socket.socket:
    """A UDP socket of ``family`` bound to ``address``, its buffers enlarged. Raises OSError."""
    sock = socket.socket(family, socket.SOCK_DGRAM)
    try:
        enlarge_socket_buffers(sock)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


def chunk_bytes(datagram_bytes: int) -> int:
    """The bytes handed out per chunk while a build goes on: the whole datagrams one
    offloaded send carries (``udp_offload.datagrams_per_send``). A bigger chunk saves no
    system call and holds its first datagram back until the rest is built (at 64,000-byte
    datagrams, one datagram per send: about 50 us each)."""
    return datagrams_per_send(datagram_bytes) * datagram_bytes


class _NoPacing:
    """Stands in for aioquic's packet pacer: never holds a packet back."""
    packet_time = None

    def next_send_time(self, now: float) -> None:
        return None

    def update_after_send(self, now: float) -> None:
        """Nothing to account."""

    def update_rate(self, congestion_window: int, smoothed_rtt: float) -> None:
        """Nothing to compute."""


def set_datagram_size(quic: Any, size: int) -> None:
    """Use ``size``-byte datagrams from now on (aioquic 1.x keeps it in three places)."""
    quic._max_datagram_size = size
    cc = quic._loss._cc
    if hasattr(cc, "_max_datagram_size"):
        cc._max_datagram_size = size
    if hasattr(cc, "additive_increase_factor"):
        cc.additive_increase_factor = size


class QuicTuning:
    """The run-time tuning of one aioquic connection (see the module docstring).

    The owner calls ``handshake_done`` on HandshakeCompleted and ``before_transmit`` before
    each transmit, and ``stop`` when the connection ends.
    """

    def __init__(self, quic: Any, settings: QuicSettings, loop: Any,
                 transmit: Callable[[], None]) -> None:
        self.quic, self.settings, self.loop, self.transmit = quic, settings, loop, transmit
        self.large = False
        self.failures = 0
        self.retry_at = 0.0
        self.raised_at = 0.0
        self.first_large_packet = 0  # the first packet number sent at the larger size
        self.keep_alive: Any = None
        quic._loss._pacer = _NoPacing()
        quic._ack_delay = ACK_DELAY_S
        use_long_frames(quic)
        quic.frames_per_packet = max(MAX_FRAMES_PER_PACKET,
                                     FRAMES_PER_STREAM * settings.max_concurrent_bidi_streams)
        streams = quic._local_max_streams_bidi
        streams.value = streams.sent = settings.max_concurrent_bidi_streams

    def handshake_done(self) -> None:
        lean_packet_protection(self.quic)
        self.raise_size()
        cc = self.quic._loss._cc  # the initial window, in datagrams of the size now used
        initial = min(K_INITIAL_WINDOW * self.quic._max_datagram_size, self.settings.send_window)
        cc.congestion_window = max(cc.congestion_window, initial)
        if self.settings.keep_alive_s > 0 and self.keep_alive is None:
            self.keep_alive = self.loop.call_later(self.settings.keep_alive_s, self.ping)

    def raise_size(self) -> None:
        """Use ``initial_mtu``, or the peer's ``max_udp_payload_size`` when it is smaller."""
        size = min(self.settings.initial_mtu, self.quic.peer_max_udp_payload)
        if size > SMALLEST_MAX_DATAGRAM_SIZE:
            set_datagram_size(self.quic, size)
            self.large = True
            self.raised_at = self.loop.time()
            self.first_large_packet = self.quic._packet_number

    def ack_with_data(self) -> None:
        """Let the next packet carry the ACK that is waiting for its delay to pass."""
        space = self.quic._spaces.get(tls.Epoch.ONE_RTT)
        if space is not None and space.ack_at is not None:
            space.ack_at = self.loop.time()

    def before_transmit(self) -> None:
        """Fall back to small datagrams on a probe timeout, retry later; cap the window."""
        loss = self.quic._loss
        if self.large and loss._pto_count >= (PROVEN_PATH_PTOS if self.proven() else 1):
            set_datagram_size(self.quic, SMALLEST_MAX_DATAGRAM_SIZE)
            self.large = False
            self.retry_at = self.loop.time() + min(MTU_RETRY_S * 2 ** self.failures,
                                                   MTU_RETRY_MAX_S)
            self.failures += 1
        elif self.large and self.failures and self.loop.time() - self.raised_at > MTU_RETRY_S:
            self.failures = 0  # the larger size held: the next failure waits the least
        elif (not self.large and self.retry_at and loss._pto_count == 0
              and self.loop.time() >= self.retry_at):
            self.raise_size()
        if loss._cc.congestion_window > self.settings.send_window:
            loss._cc.congestion_window = self.settings.send_window

    def proven(self) -> bool:
        """Whether the peer acknowledged a packet sent at the larger datagram size."""
        space = self.quic._spaces.get(tls.Epoch.ONE_RTT)
        return space is not None and space.largest_acked_packet >= self.first_large_packet

    def ping(self) -> None:
        self.keep_alive = None
        if self.quic._state.name in ("CONNECTED", "FIRSTFLIGHT"):
            self.quic.send_ping(0)
            self.transmit()
            self.keep_alive = self.loop.call_later(self.settings.keep_alive_s, self.ping)

    def stop(self) -> None:
        if self.keep_alive is not None:
            self.keep_alive.cancel()
            self.keep_alive = None


class TunedQuicProtocol(QuicConnectionProtocol):
    """aioquic's connection protocol with ``QuicTuning``; the base of the server's and the
    SDK's QUIC protocols. Subclasses call ``handshake_done`` on HandshakeCompleted.

    A transmit asked for while a datagram is being received is deferred to one transmit at
    the end of the loop turn (aioquic's ``_transmit_soon``), so a burst of datagrams read in
    one turn costs one transmit, one timer re-arm and at most one ACK. Datagrams read
    together (``datagrams_received``) are received as a run (their in-order STREAM data
    handed up once, ``lurcher.core.quic_receive_run``) and have their events handled once,
    after all of them.
    """

    def __init__(self, *args: Any, settings: QuicSettings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.receiving = False
        self.tuning = QuicTuning(self._quic, settings, self._loop, self.transmit)
        self.sent_early = 0
        self._quic.early_send = self.send_early

    def handshake_done(self) -> None:
        self.tuning.handshake_done()

    def datagram_received(self, data: bytes | str, addr: Any) -> None:
        self.datagrams_received([data], addr)

    def datagrams_received(self, datagrams: list[Any], addr: Any) -> None:
        """Datagrams from ``addr`` read together (``lurcher.core.udp_offload``): each goes
        to the connection, then their events are handled and a transmit asked for, once."""
        self.receiving = True
        try:
            quic, now = self._quic, self._loop.time()
            quic.receive_datagrams(datagrams, addr, now)  # a LongFrameQuicConnection
            self._process_events()
            self.transmit()
        finally:
            self.receiving = False

    def transmit(self) -> None:
        """aioquic's transmit, with the datagrams sent in chunks (``send_datagrams``)."""
        if self.receiving:
            self._transmit_soon()
            return
        self._transmit_task = None
        self.tuning.before_transmit()
        self.send_datagrams()
        self.arm_timer()

    def send_datagrams(self) -> None:
        """Send what the congestion window allows. A steady connection's builder hands its
        finished datagrams to ``send_early`` every ``chunk_bytes`` while it builds the rest
        (``lurcher.core.quic_builder``), so the peer works on the first datagrams while
        later ones are built (aioquic builds all before sending any); the rest leave here."""
        quic = self._quic
        self.sent_early = 0
        quic.early_bytes = chunk_bytes(quic._max_datagram_size)
        datagrams = quic.datagrams_to_send(now=self._loop.time())
        self.send_by_address(datagrams[self.sent_early:])  # what the build handed out is counted

    def send_by_address(self, datagrams: list[tuple[Any, Any]]) -> None:
        """Each run of ``(data, address)`` with one address in one ``send_to``: aioquic's
        transmit holds the active path's datagrams, then those probing other paths
        (PATH_CHALLENGE, PATH_RESPONSE), each path's together, for its own address; so
        when the last goes where the first goes, all do (the usual case, one call)."""
        if datagrams and datagrams[-1][1] == datagrams[0][1]:
            self.send_to([data for data, _ in datagrams], datagrams[0][1])
            return
        start = 0
        for end in range(1, len(datagrams) + 1):
            if end == len(datagrams) or datagrams[end][1] != datagrams[start][1]:
                self.send_to([data for data, _ in datagrams[start:end]], datagrams[start][1])
                start = end

    def send_early(self, datagrams: list[bytearray]) -> None:
        """Datagrams a build hands out before it ends: only a steady build of the active
        path (its first network path) hands any out, so they go to that path's address."""
        self.sent_early += len(datagrams)
        self.send_to(datagrams, self._quic._network_paths[0].addr)

    def send_to(self, datagrams: list[Any], addr: Any) -> None:
        """All at once (one system call per run of same-size datagrams,
        ``lurcher.core.udp_offload``) where the transport can."""
        transport = self._transport
        batch = getattr(transport, "send_datagrams", None)
        if batch is not None:
            batch(datagrams, addr)
            return
        for data in datagrams:
            transport.sendto(data, addr)

    def arm_timer(self) -> None:
        """Re-arm the connection's timer (as aioquic's transmit does)."""
        timer_at = self._quic.get_timer()
        if self._timer is not None and self._timer_at != timer_at:
            self._timer.cancel()
            self._timer = None
        if self._timer is None and timer_at is not None:
            self._timer = self._loop.call_at(timer_at, self._handle_timer)
        self._timer_at = timer_at

    def send_soon(self) -> None:
        """Transmit newly queued stream data soon, with any pending ACK in its packet."""
        self.tuning.ack_with_data()
        self._transmit_soon()

    def connection_lost(self, exc: Exception | None) -> None:
        self.tuning.stop()
        super().connection_lost(exc)
