"""A UDP datagram transport with segmentation offload, for QUIC's datagrams.

Owns: one non-blocking UDP socket and its reading and writing on the event loop, presented
to an ``asyncio.DatagramProtocol`` as asyncio's datagram transport (``sendto``, ``close``,
``abort``, ``get_extra_info``, ``get_write_buffer_size``), plus ``send_datagrams``:

- Sending (``UDP_SEGMENT``, generic segmentation offload): a run of datagrams of one size to
  one address (the last may be shorter) leaves in one ``sendmsg`` call, at most
  ``SEGMENTS_PER_SEND`` datagrams and ``OFFLOAD_BYTES`` bytes; the kernel cuts it into the
  datagrams. 1 MB in 1,200-byte datagrams is about 14 system calls instead of 870.
- Receiving (``UDP_GRO``): one ``recvmsg`` returns up to 64 KB of same-size datagrams that
  arrived together, with the size in a control message; they are handed to the protocol
  together (``datagrams_received(datagrams, addr)``) where it has that method (a datagram
  read alone too, as a run of one: the QUIC server then finds its connection by the ID's
  bytes, ``RoutingQuicServer``, instead of aioquic's parsed header; at 64,000-byte datagrams
  every read holds one), else one by one as if read separately. At most ``READS_PER_TURN``
  reads per loop turn, so other connections and timers get theirs.

Invariants: datagrams go out in the order given. When the socket's send buffer is full,
the rest waits in a queue (sent when the socket is writable, in order, as asyncio's
transport does), and later datagrams queue behind it; the queue holds at most
``BACKLOG_BYTES`` (beyond it datagrams are dropped and counted, as the kernel drops them from
a full buffer; QUIC's loss recovery resends), so a send buffer that stays full cannot grow this
process's memory. No datagram is sent twice. A datagram over half of
``OFFLOAD_BYTES`` goes out alone, in a plain send. A kernel or device that refuses the
offload (the socket option, or the first offloaded send failing with anything but "would
block") makes this socket send and receive one datagram per call from then on. Errors the
kernel reports on a connected socket (ICMP port unreachable) reach ``error_received``.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import socket
import struct
from typing import Any, Iterable

UDP_SEGMENT = getattr(socket, "UDP_SEGMENT", 103)  # linux/udp.h
UDP_GRO = getattr(socket, "UDP_GRO", 104)
SEGMENTS_PER_SEND = 64
OFFLOAD_BYTES = 65_000  # under the 65,507-byte limit of one UDP send
READS_PER_TURN = 64
BACKLOG_BYTES = 4 * 1024 * 1024  # datagrams waiting for a full socket buffer, at most
RECEIVE_BYTES = 65_536
_CMSG_SPACE = socket.CMSG_SPACE(4)
_SEGMENT_SIZE = struct.Struct("=H")
_GRO_SIZE = struct.Struct("=i")
_OFFLOAD_REFUSED = {errno.EIO, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOPROTOOPT}


def enable_receive_offload(sock: socket.socket) -> bool:
    """Ask the kernel to coalesce received datagrams (``UDP_GRO``); False when refused."""
    try:
        sock.setsockopt(socket.IPPROTO_UDP, UDP_GRO, 1)
    except OSError:
        return False
    return True


def datagrams_per_send(size: int) -> int:
    """How many datagrams of ``size`` bytes one offloaded send carries (at least one)."""
    return max(1, min(SEGMENTS_PER_SEND, OFFLOAD_BYTES // size))


def offload_runs(datagrams: list[bytes]) -> Iterable[list[bytes]]:
    """Split ``datagrams`` (in order) into runs one offloaded send can carry: every datagram
    the size of the first but the last, which may be shorter."""
    run: list[bytes] = []
    size = total = 0
    for data in datagrams:
        n = len(data)
        if run and (n > size or total + n > OFFLOAD_BYTES or len(run) == SEGMENTS_PER_SEND):
            yield run
            run = []
        if not run:
            size, total = n, 0
        run.append(data)
        total += n
        if n < size:  # a shorter one ends the run
            yield run
            run = []
    if run:
        yield run


def split_segments(data: bytes, segment: int) -> Iterable[bytes]:
    """The datagrams of a coalesced read: ``segment`` bytes each, the last may be shorter."""
    if segment <= 0 or segment >= len(data):
        yield data
        return
    for start in range(0, len(data), segment):
        yield data[start:start + segment]


def _segment_size(ancillary: list[tuple[int, int, bytes]]) -> int:
    for level, kind, value in ancillary:
        if level == socket.IPPROTO_UDP and kind == UDP_GRO and len(value) >= 4:
            return _GRO_SIZE.unpack_from(value)[0]
    return 0


class OffloadDatagramTransport(asyncio.DatagramTransport):
    """asyncio's datagram transport over ``sock``, with segmentation offload."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 protocol: asyncio.DatagramProtocol) -> None:
        super().__init__()
        sock.setblocking(False)
        self._loop, self._sock, self._protocol = loop, sock, protocol
        self._fd = sock.fileno()
        self._send_offload = True
        self._receive_offload = enable_receive_offload(sock)
        self._backlog: collections.deque[tuple[bytes, Any]] = collections.deque()
        self._backlog_bytes = 0
        self.dropped = 0  # datagrams dropped because the backlog was full
        self._closing = False
        self._extra = {"socket": sock, "sockname": sock.getsockname()}
        loop.call_soon(protocol.connection_made, self)
        loop.call_soon(loop.add_reader, self._fd, self._read_ready)

    # -- asyncio.DatagramTransport

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "peername":
            try:
                return self._sock.getpeername()
            except OSError:
                return default
        return self._extra.get(name, default)

    def is_closing(self) -> bool:
        return self._closing

    def get_write_buffer_size(self) -> int:
        return self._backlog_bytes

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._protocol

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._protocol = protocol  # type: ignore[assignment]

    def sendto(self, data: Any, addr: Any = None) -> None:
        self.send_datagrams([bytes(data) if not isinstance(data, bytes) else data], addr)

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        if not self._backlog:
            self._finish(None)

    def abort(self) -> None:
        self._backlog.clear()
        self._backlog_bytes = 0
        self._closing = True
        self._finish(None)

    # -- sending

    def send_datagrams(self, datagrams: list[bytes], addr: Any) -> None:
        """Send ``datagrams`` to ``addr`` in order, same-size runs in one call each."""
        if self._closing:
            return
        if self._backlog:
            self._queue(datagrams, addr)
            return
        sent = 0
        for run in self._runs(datagrams):
            try:
                done = self._send_run(run, addr)
            except OSError as exc:
                self._protocol.error_received(exc)
                done = len(run)
            sent += done
            if done < len(run):  # the socket would block: the rest waits, in order
                self._queue(datagrams[sent:], addr)
                return

    def _runs(self, datagrams: list[bytes]) -> Iterable[list[bytes]]:
        if self._send_offload and len(datagrams) > 1:
            return offload_runs(datagrams)
        return ([data] for data in datagrams)

    def _send_run(self, run: list[bytes], addr: Any) -> int:
        """Send one run; returns how many of its datagrams left before the socket would
        block (all of them, normally). Raises OSError for any other failure."""
        if len(run) == 1:
            try:
                self._send_one(run[0], addr)
            except (BlockingIOError, InterruptedError):
                return 0
            return 1
        control = [(socket.IPPROTO_UDP, UDP_SEGMENT, _SEGMENT_SIZE.pack(len(run[0])))]
        try:
            self._sendmsg(run, control, addr)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as exc:
            if exc.errno not in _OFFLOAD_REFUSED:
                raise
            self._send_offload = False  # this kernel or device cannot: one per call from now
            return self._send_each(run, addr)
        return len(run)

    def _send_each(self, run: list[bytes], addr: Any) -> int:
        """Send ``run`` one datagram per call; how many left before the socket would block
        (a datagram the kernel refuses is reported and counts as gone, as in ``sendto``)."""
        for count, data in enumerate(run):
            try:
                self._send_one(data, addr)
            except (BlockingIOError, InterruptedError):
                return count
            except OSError as exc:
                self._protocol.error_received(exc)
        return len(run)

    def _send_one(self, data: bytes, addr: Any) -> None:
        if addr is None:
            self._sock.send(data)
        else:
            self._sock.sendto(data, addr)

    def _sendmsg(self, run: list[bytes], control: list, addr: Any) -> None:
        if addr is None:
            self._sock.sendmsg(run, control)
        else:
            self._sock.sendmsg(run, control, 0, addr)

    def _queue(self, datagrams: list[bytes], addr: Any) -> None:
        """Put datagrams behind the backlog; past ``BACKLOG_BYTES`` they are dropped (and
        counted), as a full socket buffer drops them: QUIC resends what it misses."""
        was_empty = not self._backlog
        for data in datagrams:
            if self._backlog_bytes + len(data) > BACKLOG_BYTES:
                self.dropped += 1
                continue
            self._backlog.append((data, addr))
            self._backlog_bytes += len(data)
        if was_empty and self._backlog:
            self._loop.add_writer(self._fd, self._write_ready)

    def _write_ready(self) -> None:
        while self._backlog:
            data, addr = self._backlog[0]
            try:
                self._send_one(data, addr)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._protocol.error_received(exc)
            self._backlog.popleft()
            self._backlog_bytes -= len(data)
        self._loop.remove_writer(self._fd)
        if self._closing:
            self._finish(None)

    # -- receiving

    def _read_ready(self) -> None:
        receive = self._protocol.datagram_received
        receive_many = getattr(self._protocol, "datagrams_received", None)
        for _ in range(READS_PER_TURN):
            if self._closing:
                return
            try:
                data, ancillary, _flags, addr = self._sock.recvmsg(RECEIVE_BYTES, _CMSG_SPACE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._protocol.error_received(exc)
                return
            segment = _segment_size(ancillary) if self._receive_offload and ancillary else 0
            if segment and segment < len(data) and receive_many is not None:
                receive_many(list(split_segments(data, segment)), addr)
            elif segment and segment < len(data):
                for datagram in split_segments(data, segment):
                    receive(datagram, addr)
            elif receive_many is not None:
                receive_many([data], addr)
            else:
                receive(data, addr)

    def _finish(self, exc: Exception | None) -> None:
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self._loop.call_soon(self._protocol.connection_lost, exc)
        self._loop.call_soon(self._sock.close)


async def open_endpoint(protocol_factory: Any, sock: socket.socket
                        ) -> tuple[OffloadDatagramTransport, Any]:
    """Serve ``sock`` (bound, and connected if wanted) with a new protocol; like asyncio's
    ``create_datagram_endpoint(sock=...)``, ``connection_made`` has run on return. The
    socket is closed when this fails or is cancelled."""
    loop = asyncio.get_running_loop()
    try:
        protocol = protocol_factory()
        transport = OffloadDatagramTransport(loop, sock, protocol)
    except BaseException:
        sock.close()
        raise
    try:
        await asyncio.sleep(0)  # let connection_made and add_reader run
    except BaseException:
        transport.abort()
        raise
    return transport, protocol
