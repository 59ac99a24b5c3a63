"""The QUIC front end (wire §15.2), on aioquic: one bidirectional stream per request.

A QUIC connection is one session. The client opens a bidirectional stream, writes one
request frame (``length, code, payload``) and finishes its side; the server answers with one
response frame (``status, length, payload``) and finishes. No ALPN is offered or required
(the Iggy clients send none); TLS is always on, with the ``[quic.certificate]`` pair
(self-signed for ``localhost`` when missing). Requests of one connection run one at a time,
in the order their requests completed, so a login is always applied before what follows it.
A stream's bytes go through the same ``FrameReader`` as TCP and WebSocket (``StreamRequests``),
so the limits and refusals are the same: a refused frame is answered on its stream with the
reader's status (InvalidCommand, or Unauthenticated before login) and the stream is stopped;
a stream that ends inside a frame is answered with InvalidCommand; bytes after the first
frame of a stream are ignored. A stream reset by the client drops its partial request and
is reset back, so it is discarded once the client acknowledges that (a stream never
answered would otherwise stay open, and count against the stream limit, until the
connection ends); a reply (or refusal) for a stream the client stopped (STOP_SENDING, as
the SDK does for a request it gave up on) is dropped and the connection goes on with its
next request.
The ``[quic]`` keys (initial_mtu, send_window, receive_window, keep_alive_interval,
max_concurrent_bidi_streams, max_idle_timeout) and the run-time tuning (no pacing, datagram
size fall-back, long STREAM frames, one transmit per receive burst, delayed ACKs riding on
replies) are ``lurcher.core.quic``'s; ``section_settings`` reads them.

Memory bounds of one connection (issue 14, point 3):

- replies: aioquic keeps every reply byte until the client acknowledges it. While a
  connection's queued, unacknowledged reply bytes are at or above ``MAX_QUEUED_REPLY_BYTES``
  no further request of it is handled; complete requests wait in order. At most one reply
  (``limits.max_poll_reply_bytes`` for a poll) is handed over beyond the mark. The bytes are
  counted (a walk over the streams) only when the last count plus what was handed over
  since reaches the mark (``handed_over``), not for every reply. A reply whose
  stream the client stops or resets is let go at once (``let_go_of_reset_reply``), so it
  neither keeps the connection paused nor stays in memory until its stream ends.
- waiting requests: at most ``MAX_PENDING_REQUESTS`` complete requests wait; the next one
  closes the connection (reason "too many pending requests"). Those still waiting when the
  connection starts to close (for any reason) are dropped, never run.
- partial requests: at most ``MAX_UNFINISHED_STREAMS`` streams may hold an incomplete
  request; a stream beyond is answered InvalidCommand and stopped (the connection stays).
- streams left open: at most ``MAX_OPEN_ANSWERED_STREAMS`` streams may have had their request
  taken (or refused) without their FIN; the next one closes the connection (reason "too many
  request streams left open"). aioquic walks every live stream of a connection at each
  transmit, so thousands of them made each request cost the shard milliseconds.
- received bytes not yet delivered (out of order): at most ``STREAM_WINDOW_BYTES`` per
  stream and ``receive_window`` per connection; the windows move with the data consumed and
  never grow, and a peer sending beyond them is closed with FLOW_CONTROL_ERROR
  (``lurcher.core.quic_flow``).
- streams: at most ``max_concurrent_bidi_streams`` (256 by default) held for the connection,
  whatever holds them: a request not yet answered, a reply or reset the client has not
  acknowledged yet (aioquic discards a stream, and gives the client its place back with
  MAX_STREAMS, only then), a stream opened by a frame without a request (RESET_STREAM,
  STOP_SENDING, MAX_STREAM_DATA). A client opening one more is closed with
  STREAM_LIMIT_ERROR as the frame arrives. Only the streams the peer sent a frame on exist
  (about 1 KB each), not every lower stream a frame on a high one opens. The bound matters
  for more than memory: the walks at each transmit (``lurcher.core.quic_steady``) are
  linear in the streams held (with 4,000 held by a client that never acknowledged its
  replies, each further request cost the shard about 10 ms).

A reply whose stored bytes cannot be read (a segment file cut short under the server, a
failed read) is answered CANNOT_READ_FILE on its stream (``read_parts``); the connection
goes on.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from aioquic.asyncio.server import QuicServer
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import (
    ConnectionTerminated,
    HandshakeCompleted,
    QuicEvent,
    StopSendingReceived,
    StreamDataReceived,
    StreamReset,
)

from lurcher.auth.session import TRANSPORT_QUIC
from lurcher.core.connection.framing import BadFrame, Frame, FrameLimits, FrameReader
from lurcher.core.connection.server import FrameQueue, ServerConnection
from lurcher.core.quic import (QuicSettings, TunedQuicProtocol, bound_socket,
                               quic_configuration)
from lurcher.core.quic_receive import is_short_header
from lurcher.core.quic_send import StreamParts
from lurcher.core.shard.reply import error_frame, read_parts
from lurcher.core.udp_offload import open_endpoint
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.runtime.settings import seconds
from lurcher.transports.connection import peer_address, settle_soon
from lurcher.transports.frontend import ListenContext, Listener, ServerListener
from lurcher.core.wire.address import split_address
from lurcher.transports.quic_admission import (Admission, ConnectionIds, Refused,
                                               new_connection_initial)
from lurcher.transports.tls import ensure_certificate

if TYPE_CHECKING:
    from lurcher.runtime.settings import Quic

log = logging.getLogger(__name__)
logging.getLogger("quic").setLevel(logging.WARNING)

QUIC_NO_ERROR = 0
QUIC_APP_REFUSED = 1
MAX_QUEUED_REPLY_BYTES = 16 * 1024 * 1024
MAX_PENDING_REQUESTS = 32
MAX_UNFINISHED_STREAMS = 16
# streams whose request was taken while their FIN has not come (the SDK and Iggy's clients
# end each request stream); every live stream costs each transmit of its connection a walk
MAX_OPEN_ANSWERED_STREAMS = 64
# what aioquic raises for a write or stop on a stream that cannot take it: RuntimeError (1.7.2:
# the peer's STOP_SENDING reset our side, or our side already finished), ValueError (an
# unknown or wrong-direction stream), AssertionError (older aioquic releases)
UNWRITABLE_STREAM = (RuntimeError, ValueError, AssertionError)
STREAM_EVENTS = (StreamDataReceived, StreamReset, StopSendingReceived)


def queued_reply_bytes(quic: Any) -> int:
    """Bytes handed to aioquic on any stream and not yet acknowledged by the peer.

    aioquic (1.x) keeps them in each stream sender's buffer until acknowledged; this and
    ``let_go_of_reset_reply`` are the places that touch that internal state.
    """
    return sum(len(stream.sender._buffer) for stream in quic._streams.values())


def let_go_of_reset_reply(quic: Any, stream_id: int) -> None:
    """Free what stream ``stream_id`` still holds to send once its sending side was reset.

    aioquic 1.7 keeps a reset sender's buffer until the whole stream is discarded, which
    needs the peer to end its side too, yet never sends, resends or acknowledges those
    bytes again (``get_frame`` refuses after a reset, ``on_data_delivery`` ignores it). Left
    there they would count as queued replies, keeping a connection paused, and live as long
    as the stream.
    """
    stream = quic._streams.get(stream_id)
    if stream is not None and stream.sender._reset_error_code is not None:
        stream.sender._buffer = bytearray()


class StreamRequests:
    """Sans-IO: the request of each bidirectional stream of one connection.

    A stream is in at most one of ``partial`` (its request is incomplete: its reader) and
    ``answered`` (its request was taken or refused and its FIN has not come: later bytes
    are ignored); both forget it at its FIN or reset. ``unfinished`` is a count, not a
    scan; the adapter bounds ``answered`` (``MAX_OPEN_ANSWERED_STREAMS``)."""

    def __init__(self, limits: FrameLimits, authenticated: Callable[[], bool]) -> None:
        self.limits = limits
        self.authenticated = authenticated
        self.partial: dict[int, FrameReader] = {}
        self.answered: set[int] = set()

    def data(self, stream_id: int, data: bytes | memoryview,
             end_stream: bool) -> Frame | BadFrame | None:
        """The stream's request once complete (or its refusal); None while incomplete."""
        if stream_id in self.answered:
            if end_stream:
                self.answered.discard(stream_id)
            return None
        reader = self.partial.pop(stream_id, None)
        if reader is None and len(self.partial) >= MAX_UNFINISHED_STREAMS:
            item: Frame | BadFrame | None = BadFrame(
                ErrorCode.INVALID_COMMAND, True,
                f"more than {MAX_UNFINISHED_STREAMS} unfinished request streams")
        else:
            reader = reader or FrameReader(self.limits, self.authenticated)
            reader.feed(data)
            item = reader.next_frame()
            if item is None and end_stream:
                item = BadFrame(ErrorCode.INVALID_COMMAND, True, "stream ended inside a frame")
            if item is None:
                self.partial[stream_id] = reader
                return None
        if not end_stream:
            self.answered.add(stream_id)
        return item

    def reset(self, stream_id: int) -> None:
        self.partial.pop(stream_id, None)
        self.answered.discard(stream_id)

    def unfinished(self) -> int:
        """Streams holding an incomplete request."""
        return len(self.partial)


class QuicClientProtocol(TunedQuicProtocol):
    """The adapter of one QUIC connection (server side) around its ``ServerConnection``.

    ``StreamRequests`` frames each stream; complete requests go, in the order they
    completed, into the core's ``FrameQueue``; the core answers them in that order and each
    answer goes to the stream of the oldest unanswered request (``answer_to``). Once the
    connection is closing (``closing``: this end, aioquic or the peer closed it) the requests
    still queued are dropped, never run: the client gets no answer for them. Refusals
    are answered on their own stream here (they never reach the core). The core is paused
    while the connection's unacknowledged replies are above ``MAX_QUEUED_REPLY_BYTES``.
    """

    def __init__(self, *args: Any, shard: Any, accepted_us: int | None = None,
                 **kwargs: Any) -> None:
        """``accepted_us``: when the endpoint made the connection (its login deadline runs
        from then, the handshake included; None: once the handshake is done)."""
        super().__init__(*args, **kwargs)
        self.shard = shard
        self.frames = FrameQueue(serving=lambda: not self.closing())
        self.core = ServerConnection(shard, TRANSPORT_QUIC, self, frames=self.frames,
                                     accepted_us=accepted_us)
        self.requests = StreamRequests(shard.limits.frames, self.core.authenticated)
        self.answer_to: deque[int] = deque()  # streams of requests given to the core
        self.peer: Any = None
        self.opened = False
        self.paused = False
        self.replies_at_most = 0  # unacknowledged reply bytes, an upper bound (handed_over)
        self.on_established: Callable[[], None] | None = None  # the endpoint's admission

    # -- events -------------------------------------------------------------------------
    def quic_event_received(self, event: QuicEvent) -> None:
        if isinstance(event, STREAM_EVENTS):
            if not self.closing():  # what came with or after a close is not served
                self.on_stream_event(event)
        elif isinstance(event, HandshakeCompleted):
            self.handshake_done()
            self.open_session()
            if self.on_established is not None:
                self.on_established()
                self.on_established = None
        elif isinstance(event, ConnectionTerminated):
            self.tuning.stop()
            self.core.connection_lost()

    def on_stream_event(self, event: QuicEvent) -> None:
        if isinstance(event, StreamDataReceived):
            self.on_data(event)
        elif isinstance(event, StreamReset):
            self.reset_back(event)
        else:  # StopSendingReceived: aioquic reset our side already
            let_go_of_reset_reply(self._quic, event.stream_id)

    def datagrams_received(self, datagrams: list[Any], addr: Any) -> None:
        if self.peer is None:
            self.peer = addr
        super().datagrams_received(datagrams, addr)
        if self.paused and not self.closing():
            self.replies_at_most = queued_reply_bytes(self._quic)
            if self.replies_at_most < MAX_QUEUED_REPLY_BYTES:
                self.paused = False
                self.core.resume_writing()

    def handed_over(self, size: int) -> None:
        """``size`` reply bytes went to aioquic: pause the core once the unacknowledged
        reply bytes reach ``MAX_QUEUED_REPLY_BYTES``. They are counted (a walk over the
        streams) only when an upper bound, the last count plus what was handed over since,
        reaches the mark: acknowledgements only ever lower them."""
        self.replies_at_most += size
        if self.paused or self.replies_at_most < MAX_QUEUED_REPLY_BYTES:
            return
        self.replies_at_most = queued_reply_bytes(self._quic)
        if self.replies_at_most >= MAX_QUEUED_REPLY_BYTES:
            self.paused = True
            self.core.pause_writing()

    def open_session(self) -> None:
        if self.opened:
            return
        self.opened = True
        self.core.open(peer_address(self.peer))
        self.core.frames_ready()

    def connection_lost(self, exc: Exception | None) -> None:
        self.core.connection_lost()
        super().connection_lost(exc)

    def on_data(self, event: StreamDataReceived) -> None:
        item = self.requests.data(event.stream_id, event.data, event.end_stream)
        if len(self.requests.answered) > MAX_OPEN_ANSWERED_STREAMS:
            log.info("closing QUIC connection: more than %d request streams left open",
                     MAX_OPEN_ANSWERED_STREAMS)
            self.close_for("too many request streams left open")
        elif isinstance(item, BadFrame):
            self.refuse(event.stream_id, item)
        elif item is not None and len(self.frames) >= MAX_PENDING_REQUESTS:
            log.info("closing QUIC connection: more than %d pending requests",
                     MAX_PENDING_REQUESTS)
            self.close_for("too many pending requests")
        elif item is not None:
            self.frames.append(item)
            self.answer_to.append(event.stream_id)
            if self.opened:
                self.core.frames_ready()

    def reset_back(self, event: StreamReset) -> None:
        """The client gave up on a stream: drop its partial request and end our side too
        (RESET_STREAM with the client's code), so aioquic discards the stream once the
        client acknowledges it. A request already queued still runs in order; its reply is
        dropped (``write``)."""
        self.requests.reset(event.stream_id)
        try:
            self._quic.reset_stream(event.stream_id, event.error_code)
        except UNWRITABLE_STREAM as exc:
            log.debug("cannot reset stream %d: %s", event.stream_id, exc)
        let_go_of_reset_reply(self._quic, event.stream_id)
        self.send_soon()

    def refuse(self, stream_id: int, bad: BadFrame) -> None:
        log.info("refusing QUIC stream %d: %s", stream_id, bad.detail)
        refusal = error_frame(bad.status)
        try:
            self._quic.send_stream_data(stream_id, refusal, end_stream=True)
            self.handed_over(len(refusal))
        except UNWRITABLE_STREAM as exc:  # the client stopped the stream meanwhile
            log.debug("cannot answer stream %d: %s", stream_id, exc)
        if bad.fatal:
            try:
                self._quic.stop_stream(stream_id, QUIC_APP_REFUSED)
            except UNWRITABLE_STREAM as exc:
                log.debug("cannot stop stream %d: %s", stream_id, exc)
        self.transmit()

    # -- intents of the core ------------------------------------------------------------
    def write(self, parts: list[Any]) -> None:
        """The answer of the oldest unanswered request, on its stream."""
        if not self.answer_to:
            return  # a disconnect with no request in flight: the close says it all
        stream_id = self.answer_to.popleft()
        reply = StreamParts(read_parts(parts))  # held by aioquic as it is, never joined
        try:
            self._quic.send_stream_data(stream_id, reply, end_stream=True)
        except UNWRITABLE_STREAM as exc:  # the client stopped or reset the stream meanwhile
            log.debug("cannot answer stream %d: %s", stream_id, exc)
            return
        self.send_soon()
        self.handed_over(len(reply))

    def wait(self, pending: Any) -> None:
        settle_soon(self.core, pending)

    def pause_reading(self) -> None:
        """Nothing to do: requests wait in the ``FrameQueue`` (bounded above)."""

    def resume_reading(self) -> None:
        """See ``pause_reading``."""

    def close(self, reason: str = "server shutting down") -> None:
        """Server-initiated close of the whole QUIC connection (also aioquic's
        ``QuicServer.close``, which passes no reason)."""
        self.close_for(reason)

    def abort(self) -> None:
        self.close_for("aborted")

    def can_migrate(self) -> bool:
        return False

    def migrate(self, shard_id: int, session: Any, pending: bytes) -> bool:
        return False

    def closing(self) -> bool:
        """Whether the connection is closing: closed by this end (``close_for``, or aioquic
        on a protocol error such as STREAM_LIMIT_ERROR) or by the peer."""
        return self._quic._close_event is not None

    def close_for(self, reason: str, error_code: int = QUIC_NO_ERROR) -> None:
        try:
            self._quic.close(error_code=error_code, reason_phrase=reason)
            self.transmit()
        except (AttributeError, OSError, RuntimeError) as exc:  # transport already gone
            log.debug("QUIC disconnect: %s", exc)


def section_settings(section: Quic) -> QuicSettings:
    """The settings of the typed ``[quic]`` section (its bounds were checked at decode)."""
    return QuicSettings(initial_mtu=section.initial_mtu, send_window=section.send_window,
                        receive_window=section.receive_window,
                        keep_alive_s=seconds(section.keep_alive_interval),
                        max_concurrent_bidi_streams=section.max_concurrent_bidi_streams,
                        idle_timeout_s=seconds(section.max_idle_timeout))


def server_configuration(section: Quic,
                         data_path: Path) -> tuple[QuicSettings, QuicConfiguration]:
    """Settings from ``[quic]``; the certificate from ``[quic.certificate]``."""
    settings = section_settings(section)
    paths = ensure_certificate(section.certificate, data_path)
    config = quic_configuration(settings, is_client=False)
    config.load_cert_chain(str(paths.cert_file), str(paths.key_file))
    return settings, config


class RoutingQuicServer(QuicServer):
    """aioquic's server endpoint; datagrams read together (``lurcher.core.udp_offload``)
    that carry a short-header packet for a known connection ID go to their connection as
    one run (``TunedQuicProtocol.datagrams_received``), found by the ID's bytes instead of a
    parsed header. Every other datagram takes aioquic's ``datagram_received``, in order,
    after ``Admission`` decided on a new connection's Initial (a Retry first, or dropped,
    when many handshakes are under way; ``lurcher.transports.quic_admission``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._protocols = ConnectionIds()
        self.admission = Admission()
        create = self._create_protocol
        self._create_protocol = lambda *args, **kw: self._handshaking(create(*args, **kw))

    def _handshaking(self, protocol: Any) -> Any:
        handshaking = self.admission.handshaking
        handshaking.add(protocol)
        protocol.on_established = lambda: handshaking.discard(protocol)
        return protocol

    def datagram_received(self, data: Any, addr: Any) -> None:
        config = self._configuration
        header = new_connection_initial(data, self._protocols, config.connection_id_length,
                                        config.supported_versions)
        if header is not None:
            try:
                self._retry = self.admission.retry_for(header, addr, self._loop.time())
            except Refused:
                return
        super().datagram_received(data, addr)

    def _connection_terminated(self, protocol: Any) -> None:
        """aioquic's, without its walk over every connection's IDs (``ConnectionIds``)."""
        self._protocols.forget(protocol)
        self.admission.handshaking.discard(protocol)
        protocol.on_established = None

    def datagrams_received(self, datagrams: list[Any], addr: Any) -> None:
        run: list[Any] = []
        target: Any = None
        for data in datagrams:
            protocol = self._short_header_protocol(data)
            if run and protocol is not target:
                target.datagrams_received(run, addr)
                run = []
            if protocol is None:
                self.datagram_received(data, addr)
            else:
                target = protocol
                run.append(data)
        if run:
            target.datagrams_received(run, addr)

    def _short_header_protocol(self, data: Any) -> Any:
        """The connection a short-header (1-RTT) datagram is for, or None."""
        if not is_short_header(data):
            return None
        return self._protocols.get(bytes(data[1:1 + self._configuration.connection_id_length]))


async def listen(shard: Any, section: Quic, context: ListenContext) -> Listener:
    """Listen on UDP ``section.address``. Raises OSError, TlsConfigError."""
    host, port = split_address(section.address)
    settings, configuration = server_configuration(section, context.data_path)

    def create(*args: Any, **kwargs: Any) -> QuicClientProtocol:
        return QuicClientProtocol(*args, shard=shard, settings=settings,
                                  accepted_us=shard.clock(), **kwargs)

    infos = await asyncio.get_running_loop().getaddrinfo(
        host, port, type=socket.SOCK_DGRAM, flags=socket.AI_PASSIVE)
    family, *_, address = infos[0]
    transport, server = await open_endpoint(
        lambda: RoutingQuicServer(configuration=configuration, create_protocol=create),
        bound_socket(family, address))
    return ServerListener(server, transport.get_extra_info("sockname"))
