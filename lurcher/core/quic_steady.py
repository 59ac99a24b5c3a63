"""aioquic's 1-RTT packet loop without the checks a steady connection never needs.

Owns: ``steady`` and ``write_steady``, used by ``LongFrameQuicConnection._write_application``.
aioquic's loop asks, for every packet it builds, whether a path challenge, HANDSHAKE_DONE,
PATH_RESPONSE, NEW_CONNECTION_ID, RETIRE_CONNECTION_ID, STREAMS_BLOCKED, a PING, a probe,
CRYPTO data or a DATAGRAM is pending, and builds two sets and a new stream queue per packet.
At 1,200-byte datagrams that bookkeeping is a sizeable share of a packet's cost. Once the
handshake is done none of those is pending almost always, and nothing the loop itself writes
(ACK, MAX_DATA/MAX_STREAMS, MAX_STREAM_DATA, STOP_SENDING, RESET_STREAM, STREAM) makes one
pending; so when ``steady`` finds none pending as the loop starts, ``write_steady`` builds the
packets with only the frames that can occur, in aioquic's order and with aioquic's own frame
writers, and serves the streams as aioquic does (one pass over the queue per packet; streams
that sent move to the back, in queue order where aioquic's set has no order; when they are
the back already, as with one busy stream, the queue is kept as it is). The flow-control
limit frames (MAX_DATA, MAX_STREAMS, MAX_STREAM_DATA) are checked for the first packet of a
call and for the packet after one whose pass discarded a stream: what makes them due (data or
streams received from the peer, a limit frame lost) cannot happen while packets are built,
except a discarded stream, which raises MAX_STREAMS; aioquic checks for every packet and, in
between, finds nothing to write. Before every packet after the first, when no ACK and no limit
frame is due, the full packets of a lone stream are built as a run (``lurcher.core.quic_run``,
the same packets); the loop goes on with what a run leaves.

Invariants: any pending frame of the skipped kinds, or keys not ready, make ``steady`` False
and aioquic's loop runs unchanged; packets are paced as aioquic paces them; aioquic is pinned
(``lurcher.core.quic_frames.AIOQUIC_VERSION``) and tests/unit/test_quic_steady.py fails if the
loop this mirrors changes.
"""

from __future__ import annotations

from typing import Any

from aioquic import tls
from aioquic.quic.connection import stream_is_client_initiated
from aioquic.quic.packet import QuicPacketType

from lurcher.core.quic_run import can_run, write_run

ONE_RTT = QuicPacketType.ONE_RTT


def steady(quic: Any, network_path: Any) -> bool:
    """Whether ``quic`` has 1-RTT keys, a done handshake and none of the frames pending that
    ``write_steady`` leaves out."""
    crypto_stream = quic._crypto_streams.get(tls.Epoch.ONE_RTT)
    return (quic._handshake_complete and quic._cryptos[tls.Epoch.ONE_RTT].send.is_valid()
            and (network_path.is_validated or network_path.local_challenge_sent)
            and not quic._handshake_done_pending and not network_path.remote_challenges
            and not quic._retire_connection_ids and not quic._streams_blocked_pending
            and not quic._ping_pending and not quic._probe_pending
            and not quic._datagrams_pending
            and (crypto_stream is None or crypto_stream.sender.buffer_is_empty)
            and all(cid.was_sent for cid in quic._host_cids))


def write_steady(quic: Any, builder: Any, now: float) -> None:
    """aioquic's ``_write_application`` loop for a ``steady`` connection."""
    crypto = quic._cryptos[tls.Epoch.ONE_RTT]
    space = quic._spaces[tls.Epoch.ONE_RTT]
    pacer = quic._loss._pacer
    start_packet, streams = builder.start_packet, quic._streams
    write_connection_limits, write_stream_limits = (quic._write_connection_limits,
                                                    quic._write_stream_limits)
    limits_due = True  # the limit frames can only fall due again after a stream's discard
    runs = can_run(quic, builder, crypto, pacer)
    while True:
        ack_at = space.ack_at
        if ack_at is None or ack_at >= now:
            quic._pacing_at = pacer.next_send_time(now)
            if quic._pacing_at is not None:
                break
        if runs and not limits_due and (ack_at is None or ack_at > now):
            write_run(quic, builder, crypto)
        start_packet(ONE_RTT, crypto)
        if ack_at is not None and ack_at <= now:
            quic._write_ack_frame(builder, space, now)
        if limits_due:
            write_connection_limits(builder, space)
            for stream in streams.values():
                write_stream_limits(builder, space, stream)
        discarded = limits_due = _write_streams(quic, builder, space)
        if builder.packet_is_empty:
            if not discarded:  # a discarded stream may let the next packet raise MAX_STREAMS
                break
        else:
            pacer.update_after_send(now)


def _write_streams(quic: Any, builder: Any, space: Any) -> bool:
    """One pass over the stream queue as aioquic makes it; whether a stream was discarded."""
    queue = quic._streams_queue
    sent: list = []
    discarded: list = []
    try:
        for stream in queue:
            if stream.is_finished:
                quic._streams.pop(stream.stream_id)
                if stream_is_client_initiated(stream.stream_id) != quic._is_client:
                    quic._stream_limit(stream.stream_id).value += 1
                discarded.append(stream)
                continue
            if stream.receiver.stop_pending:
                quic._write_stop_sending_frame(builder=builder, stream=stream)
            sender = stream.sender
            if sender.reset_pending:
                quic._write_reset_stream_frame(builder=builder, stream=stream)
            elif not stream.is_blocked and not sender.buffer_is_empty:
                used = quic._write_stream_frame(
                    builder=builder, space=space, stream=stream,
                    max_offset=min(sender.highest_offset + quic._remote_max_data
                                   - quic._remote_max_data_used,
                                   stream.max_stream_data_remote))
                quic._remote_max_data_used += used
                if used > 0:
                    sent.append(stream)
    finally:
        if discarded or (sent and queue[len(queue) - len(sent):] != sent):
            moved = set(sent) | set(discarded)
            quic._streams_queue = [s for s in queue if s not in moved] + sent
    return bool(discarded)
