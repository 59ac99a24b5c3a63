"""Socket migration: hand a TCP connection, with its session and unread bytes, to another
shard process.

``Migration`` is this shard's side of it: the policy (a connection moves after
``MIGRATE_AFTER_REQUESTS`` consecutive pinned requests for one foreign shard, when its
transport can move), ``hand_over`` (called by a transport adapter carrying out the connection
core's ``migrate`` intent) and adoption of connections handed to us.

The descriptor travels as SCM_RIGHTS on a Unix datagram socket per shard (abstract
namespace), together with a small msgpack header: the session and the bytes received but
not yet handled (at most ``MAX_CARRIED_BYTES``; a connection with more buffered is
forwarded instead). The receiving shard wraps the descriptor in a new connection that
starts with those bytes, so no request is lost or reordered.

The move is logged by the receiving shard (``client N migrated to shard M``) before it
serves the connection: the line precedes every answer the client gets from its new shard.
"""

from __future__ import annotations

import array
import asyncio
import logging
import os
import socket
import weakref
from typing import Any, Callable

import msgspec

from lurcher.auth.session import Session
from lurcher.core.connection.intents import MAX_CARRIED_BYTES
from lurcher.core.shard.bus import bus_address

log = logging.getLogger(__name__)

MIGRATE_AFTER_REQUESTS = 2  # consecutive pinned requests to one foreign shard
MAX_DATAGRAM_BYTES = MAX_CARRIED_BYTES + 4096


class Handoff(msgspec.Struct, frozen=True):
    client_id: int
    user_id: int | None
    address: str
    transport: int
    login_time_us: int
    token_name: str | None
    pending: bytes
    user_created_at: int | None = None


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


class Migration:
    """Policy, hand-over and adoption of migrating connections for one shard."""

    def __init__(self, shard: Any, namespace: str, enabled: bool) -> None:
        self.shard = shard
        self.enabled = enabled
        self.migrator = Migrator(namespace, shard.shard_id, self._adopt)
        # per connection: (foreign shard, consecutive pinned requests for it)
        self.streaks: weakref.WeakKeyDictionary[Any, tuple[int, int]] = (
            weakref.WeakKeyDictionary())

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.migrator.start(loop)

    def close(self) -> None:
        self.migrator.close()

    def wanted(self, connection: Any, target: int) -> bool:
        """Count a pinned request of ``connection`` for shard ``target``; True once the
        connection should move there."""
        if not (self.enabled and getattr(connection, "can_migrate", False)):
            return False
        last, count = self.streaks.get(connection, (-1, 0))
        count = count + 1 if last == target else 1
        self.streaks[connection] = (target, count)
        return count >= MIGRATE_AFTER_REQUESTS

    def hand_over(self, target: int, sock_fd: int, session: Session, pending: bytes) -> bool:
        """Send a duplicate of ``sock_fd`` with ``session`` and ``pending`` to ``target``.
        False (nothing changed) when the handoff could not be sent."""
        fd = os.dup(sock_fd)
        try:
            self.migrator.send(target, fd, Handoff(
                session.client_id, session.user_id, session.address, session.transport,
                session.login_time_us, getattr(session, "token_name", None), pending,
                session.user_created_at))
        except MigrationError as exc:
            log.info("%s; forwarding instead", exc)
            return False
        finally:
            os.close(fd)
        return True

    def _adopt(self, sock: socket.socket, handoff: Handoff) -> None:
        """Log the move, then serve the connection: the line is written before any answer
        from this shard can reach the client (the shard it left may not have run again)."""
        log.info("client %d migrated to shard %d", handoff.client_id, self.shard.shard_id)
        asyncio.ensure_future(self.shard.adopt_connection(sock, handoff))
