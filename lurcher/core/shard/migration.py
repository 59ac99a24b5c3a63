"""Socket migration: hand a TCP connection, with its session and unread bytes, to another
shard process.

The descriptor travels as SCM_RIGHTS on a Unix datagram socket per shard (abstract
namespace), together with a small msgpack header: the session and the bytes received but
not yet handled (at most ``MAX_CARRIED_BYTES``; a connection with more buffered is
forwarded instead). The receiving shard wraps the descriptor in a new connection that
starts with those bytes, so no request is lost or reordered.
"""

from __future__ import annotations

import array
import asyncio
import logging
import socket
from typing import Callable

import msgspec

from lurcher.core.shard.bus import bus_address

log = logging.getLogger(__name__)

MAX_CARRIED_BYTES = 64 * 1024
MAX_DATAGRAM_BYTES = MAX_CARRIED_BYTES + 4096


class Handoff(msgspec.Struct, frozen=True):
    client_id: int
    user_id: int | None
    address: str
    transport: int
    login_time_us: int
    token_name: str | None
    pending: bytes


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Handoff)


class MigrationError(Exception):
    """The handoff could not be sent (peer down, buffer full)."""


class Migrator:
    """This shard's handoff endpoint: ``send`` to a peer, ``on_receive`` for incoming."""

    def __init__(self, namespace: str, shard_id: int,
                 on_receive: Callable[[socket.socket, Handoff], None]) -> None:
        self.namespace = namespace
        self.on_receive = on_receive
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(bus_address(namespace, shard_id, "migrate"))
        self.sock.setblocking(False)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * MAX_DATAGRAM_BYTES)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * MAX_DATAGRAM_BYTES)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.add_reader(self.sock.fileno(), self._drain)

    def send(self, peer: int, fd: int, handoff: Handoff) -> None:
        """Pass ``fd`` (still owned by the caller, who closes it after) to ``peer``.
        Raises MigrationError."""
        body = _encoder.encode(handoff)
        try:
            self.sock.sendmsg([body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                        array.array("i", [fd]))],
                               0, bus_address(self.namespace, peer, "migrate"))
        except OSError as exc:
            raise MigrationError(f"handoff to shard {peer} failed: {exc}") from exc

    def _drain(self) -> None:
        while True:
            try:
                body, fds, _flags, _addr = socket.recv_fds(self.sock, MAX_DATAGRAM_BYTES, 1)
            except BlockingIOError:
                return
            if not fds:
                continue
            try:
                handoff = _decoder.decode(body)
            except msgspec.DecodeError:
                log.warning("dropping a malformed connection handoff")
                for fd in fds:
                    socket.close(fd)
                continue
            self.on_receive(socket.socket(fileno=fds[0]), handoff)

    def close(self) -> None:
        self.sock.close()
