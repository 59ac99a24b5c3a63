"""The asyncio side of node-to-node links: one listener, one dialer per other node.

Each node dials every other node and sends only over the connection it dialed; what it
receives arrives over the connections it accepted. So a pair of nodes has two TCP
connections, one per direction, and neither end has to decide who dials whom. Every
connection runs a ``PeerLink`` (handshake with the cluster secret, then frames).

Sending is best effort, as the replication core expects of a network: a message for a node
whose link is down, or whose socket already holds ``MAX_QUEUED_BYTES`` unsent, is dropped
(the core retransmits). A dialer reconnects after ``RECONNECT_S``. A refused handshake is
logged with its one-line reason (at most one line of each kind a second, with a count of
those not logged: ``RefusalLog``) and the connection dropped (aborted: a
peer that never reads cannot hold it with unsent bytes); so is a connection whose handshake
is not done within ``handshake_timeout_s`` of its start (``cluster.handshake_timeout_ms``),
however its bytes trickle in. At most ``max_handshaking`` accepted connections
(``cluster.max_handshaking_links``; with TLS, counting those still in their TLS handshake)
may be unauthenticated at once from the hosts of the other members' ``ip`` (a host name
looked up once, at start), and as many from every other host together: more are dropped as they
arrive, before any byte is written or read (logged once until the count falls below the cap
again). Strangers filling their share cannot keep the members from connecting. An
unauthenticated peer therefore holds at most ``2 * max_handshaking`` descriptors and
``link.MAX_HANDSHAKE_BYTES`` each, each for at most ``handshake_timeout_s``.

An accepted link authenticated as a node index that is not another member is refused; one
authenticated as a member replaces (aborts) that member's older accepted link, if any. So a
node holds at most one accepted link per member, whether the member crashed without closing
its link or a peer with the secret opens more. A link dropped for any of these reasons hands on
nothing more, not even the frames that came in the same read as its proof.

With TLS (``[cluster.tls]``: the pair of contexts of ``tls.mutual_contexts``) every
connection first completes a mutual TLS handshake and the ``PeerLink`` handshake then runs
inside it; on an accepted connection both together must be done within
``handshake_timeout_s`` of the accept (a dialed one has ``handshake_timeout_s`` for each,
from when its TCP connection is up: the name lookup and the connect are not the peer's
time to spend, and counted in they kept a slowly resolved member's link from ever coming
up). A peer without TLS, or whose certificate does not
chain to the cluster's CA, fails it: logged with one line and the socket closed. The
listener then accepts sockets itself (``sock_accept``) and hands each to
``connect_accepted_socket``, whose handshake failure is raised here: a listener created with
``ssl=`` would drop it silently.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import socket
import ssl
from collections.abc import Callable

from lurcher.core.replication.codec import encode_parts
from lurcher.core.replication.link import Established, PeerLink, Received, Refused
from lurcher.core.replication.messages import Message
from lurcher.core.wire.address import peer_host

log = logging.getLogger(__name__)

RECONNECT_S = 0.2
HANDSHAKE_TIMEOUT_S = 5.0  # default: a connection not authenticated by then is dropped
MAX_HANDSHAKING = 64  # default: accepted connections not yet authenticated, at most
MAX_QUEUED_BYTES = 32 * 1024 * 1024
REFUSAL_LOG_S = 1.0  # at most one line per kind of refusal in this time (``RefusalLog``)
Deliver = Callable[[int, int, Message], None]  # (peer, group, message)
TlsPair = tuple[ssl.SSLContext, ssl.SSLContext]  # (accepting, dialing)


class RefusalLog:
    """Warnings about refused links, at most one line of each kind (``template``) per
    ``REFUSAL_LOG_S``; the refusals in between are counted into the next line of that kind,
    or, when no other comes, into a line ``flush`` writes once the time is up (the last
    one's words). A flood of bad connections thus costs the log a line a second, not a line
    each, and its size is never lost. Sans-IO: the caller passes ``now`` and schedules
    ``flush`` at the time ``warn`` and ``flush`` return."""

    def __init__(self) -> None:
        self.quiet_until: dict[str, float] = {}
        self.skipped: dict[str, tuple[int, tuple]] = {}  # count, the last one's args

    def warn(self, now: float, template: str, *args: object) -> float | None:
        """Log or count one refusal; when counted, the time its ``flush`` is due."""
        until = self.quiet_until.get(template, float("-inf"))
        if now < until:
            count, _ = self.skipped.get(template, (0, ()))
            self.skipped[template] = (count + 1, args)
            return until
        self._write(now, template, args, self.skipped.pop(template, (0, ()))[0])
        return None

    def flush(self, now: float) -> float | None:
        """Write the counted refusals of each kind whose quiet time is over; the time the
        next flush is due, None when nothing is counted."""
        for template, until in list(self.quiet_until.items()):
            if template in self.skipped and now >= until:
                count, args = self.skipped.pop(template)
                self._write(now, template, args, count - 1)
        return min((self.quiet_until[t] for t in self.skipped), default=None)

    def _write(self, now: float, template: str, args: tuple, more: int) -> None:
        self.quiet_until[template] = now + REFUSAL_LOG_S
        log.warning(template + "%s", *args,
                    f" ({more} more since the last such line)" if more else "")


class _LinkProtocol(asyncio.Protocol):
    def __init__(self, links: "Links", dialed: int | None, admitted: bool = False,
                 started: float | None = None) -> None:
        """``dialed``: the node this end dialed, None for an accepted connection;
        ``admitted``: an accepted connection already counted against the cap (TLS);
        ``started``: the loop time its handshake deadline counts from (an accepted socket
        with TLS: its accept), None for when the connection is made."""
        self.links, self.dialed, self.admitted = links, dialed, admitted
        self.started = started
        self.link = links.new_link(dialed)
        self.transport: asyncio.Transport | None = None
        self.overdue: asyncio.TimerHandle | None = None
        self.pool: set | None = None  # accepted: the handshaking pool it counts in, until done

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.dialed is None:
            pool = self.links.pool_of(transport.get_extra_info("peername"))
            if not (self.admitted or self.links.admit(pool)):
                self.transport.abort()
                return
            self.pool = pool
            pool.add(self)
        self.links.open.add(self)
        self.transport.write(self.link.hello())
        loop = asyncio.get_running_loop()
        started = loop.time() if self.started is None else self.started
        self.overdue = loop.call_at(started + self.links.handshake_timeout_s,
                                    self._handshake_overdue)

    def _handshake_overdue(self) -> None:
        if not self.link.established and not self.transport.is_closing():
            self.links.refused("cluster link refused: no handshake within %gs",
                               self.links.handshake_timeout_s)
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        for event in self.link.receive_data(data):
            if self.transport.is_closing():  # refused on an earlier event: nothing more
                return
            if isinstance(event, Received):
                self.links.deliver(self.link.peer, event.group, event.message)
            elif isinstance(event, Established):
                self._established(event.peer)
            elif isinstance(event, Refused):
                self.links.refused("cluster link refused: %s", event.reason)
                self.transport.abort()
        proof = self.link.take_output()
        if proof and not self.transport.is_closing():
            self.transport.write(proof)

    def _handshake_done(self) -> None:
        if self.pool is not None:
            self.pool.discard(self)
            self.pool = None

    def _established(self, peer: int) -> None:
        self._handshake_done()
        if self.dialed is None:
            self.links.accepted_from(peer, self)
        elif peer != self.dialed:
            self.links.refused("cluster link to node %d answered as node %d", self.dialed, peer)
            self.transport.abort()
        else:
            self.links.outgoing[peer] = self
            log.info("cluster link to node %d up", peer)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.overdue is not None:
            self.overdue.cancel()
        self.links.open.discard(self)
        self._handshake_done()
        if self.dialed is None and self.links.incoming.get(self.link.peer) is self:
            del self.links.incoming[self.link.peer]
        if self.dialed is not None and self.links.outgoing.get(self.dialed) is self:
            del self.links.outgoing[self.dialed]
            log.info("cluster link to node %d down", self.dialed)


class Links:
    def __init__(self, cluster: str, secret: bytes, index: int,
                 addresses: dict[int, tuple[str, int]], deliver: Deliver,
                 max_frame_bytes: int, tls: TlsPair | None = None,
                 handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
                 max_handshaking: int = MAX_HANDSHAKING) -> None:
        """``max_frame_bytes``: the largest frame an authenticated peer may send (the
        node derives it from its memory bounds, ``host.MAX_FRAME_BYTES``); ``tls``: the
        contexts of mutual TLS, None for plain TCP; ``handshake_timeout_s`` and
        ``max_handshaking``: the bounds on unauthenticated connections (module doc)."""
        self.cluster, self.secret, self.index = cluster, secret, index
        self.max_frame_bytes = max_frame_bytes
        self.addresses, self.deliver = addresses, deliver
        self.outgoing: dict[int, _LinkProtocol] = {}
        self.incoming: dict[int, _LinkProtocol] = {}  # the authenticated accepted links
        self.open: set[_LinkProtocol] = set()
        self.server: asyncio.base_events.Server | None = None
        self.listener: socket.socket | None = None  # with TLS: accepted by ``_accept_tls``
        self.tasks: list[asyncio.Task] = []  # the dialers and, with TLS, the accept loop
        self.handshakes: set[asyncio.Task] = set()  # TLS handshakes of accepted sockets
        # accepted, not yet authenticated (links and TLS handshakes): from the members'
        # hosts, from any other; the hosts that were capped and logged, until below the cap
        self.members_pool: set = set()
        self.strangers_pool: set = set()
        self.member_hosts = {peer_host(f"[{ip}]:0") for ip, _ in addresses.values()}
        self.at_cap: set[int] = set()
        self.handshake_timeout_s, self.max_handshaking = handshake_timeout_s, max_handshaking
        self.tls = tls
        self.refusals = RefusalLog()
        self.flushing: asyncio.TimerHandle | None = None  # the next ``RefusalLog.flush``

    def refused(self, template: str, *args: object) -> None:
        """Log a refused link (``RefusalLog``)."""
        loop = asyncio.get_running_loop()
        self._flush_at(self.refusals.warn(loop.time(), template, *args))

    def _flush_at(self, due: float | None) -> None:
        if due is not None and self.flushing is None:
            self.flushing = asyncio.get_running_loop().call_at(due, self._flush_refusals)

    def _flush_refusals(self) -> None:
        self.flushing = None
        self._flush_at(self.refusals.flush(asyncio.get_running_loop().time()))

    def pool_of(self, address: tuple | None) -> set:
        """The handshaking pool of a connection from ``address`` (module doc)."""
        member = address is not None and peer_host(f"[{address[0]}]:0") in self.member_hosts
        return self.members_pool if member else self.strangers_pool

    def admit(self, pool: set) -> bool:
        """Whether one more accepted connection may start its handshake in ``pool``."""
        if len(pool) < self.max_handshaking:
            self.at_cap.discard(id(pool))
            return True
        if id(pool) not in self.at_cap:
            self.at_cap.add(id(pool))
            who = "members' hosts" if pool is self.members_pool else "other hosts"
            log.warning("cluster link refused: %d connections from %s already handshaking "
                        "(cluster.max_handshaking_links); dropping more until they finish",
                        self.max_handshaking, who)
        return False

    def new_link(self, dialed: int | None) -> PeerLink:
        """A link's handshake state: to ``dialed``, or accepted (None)."""
        return PeerLink(self.cluster, self.secret, self.index, os.urandom(16),
                        dialer=dialed is not None, expect=dialed,
                        max_frame_bytes=self.max_frame_bytes)

    def accepted_from(self, peer: int, protocol: _LinkProtocol) -> None:
        """An accepted link authenticated as ``peer``: refused unless ``peer`` is another
        member; it replaces an older link from ``peer`` (which is dead from the peer's side:
        a node dials one link at a time)."""
        if peer not in self.addresses:
            self.refused("cluster link refused: node %d is not a member of the cluster", peer)
            protocol.transport.abort()
            return
        older = self.incoming.get(peer)
        self.incoming[peer] = protocol
        if older is not None:
            older.transport.abort()

    async def start(self, host: str, port: int) -> None:
        loop = asyncio.get_running_loop()
        self.tasks = []
        await self._resolve_member_hosts()
        if self.tls is None:
            self.server = await loop.create_server(lambda: _LinkProtocol(self, None),
                                                   host, port)
        else:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            self.listener = socket.create_server((host, port), family=family)
            self.listener.setblocking(False)
            self.tasks.append(asyncio.create_task(self._accept_tls()))
        self.tasks += [asyncio.create_task(self._dial(peer)) for peer in self.addresses]

    async def _resolve_member_hosts(self) -> None:
        """Add the addresses of members whose ``ip`` is a host name to ``member_hosts``
        (looked up once, here: a connection comes from an address, never a name). A name
        that does not resolve is logged; connections from it count among the strangers."""
        loop = asyncio.get_running_loop()
        for ip, _ in self.addresses.values():
            if _is_address(ip):
                continue  # already in ``member_hosts``
            try:
                found = await loop.getaddrinfo(ip, None, type=socket.SOCK_STREAM)
            except (OSError, UnicodeError) as exc:  # UnicodeError: not a valid name
                log.warning("cluster member host %r does not resolve (%s): its connections "
                            "count in the strangers' handshaking pool", ip, exc)
                continue
            self.member_hosts |= {peer_host(f"[{info[4][0]}]:0") for info in found}

    @property
    def port(self) -> int:
        listening = self.listener or self.server.sockets[0]
        return listening.getsockname()[1]

    async def _accept_tls(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, address = await loop.sock_accept(self.listener)
            except OSError as exc:  # out of file descriptors, ...
                self.refused("cluster link not accepted: %s", exc)
                await asyncio.sleep(RECONNECT_S)
                continue
            pool = self.pool_of(address)
            if not self.admit(pool):
                sock.close()
                continue
            task = asyncio.create_task(self._tls_handshake(loop, sock, loop.time()))
            self.handshakes.add(task)
            pool.add(task)
            task.add_done_callback(self.handshakes.discard)
            task.add_done_callback(pool.discard)

    async def _tls_handshake(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                             started: float) -> None:
        try:
            await loop.connect_accepted_socket(
                lambda: _LinkProtocol(self, None, admitted=True, started=started), sock,
                ssl=self.tls[0],
                ssl_handshake_timeout=self.handshake_timeout_s)
        except (OSError, EOFError) as exc:  # the socket is closed
            self.refused("cluster link refused: TLS handshake failed: %s", _one_line(exc))

    async def _dial(self, peer: int) -> None:
        loop = asyncio.get_running_loop()
        host, port = self.addresses[peer]
        tls = {} if self.tls is None else {"ssl": self.tls[1],
                                           "ssl_handshake_timeout": self.handshake_timeout_s}
        while True:
            try:
                transport, _ = await loop.create_connection(
                    lambda: _LinkProtocol(self, peer), host, port, **tls)
                while not transport.is_closing():
                    await asyncio.sleep(RECONNECT_S)
            except ssl.SSLError as exc:
                self.refused("cluster link to node %d refused: TLS handshake failed: %s",
                             peer, _one_line(exc))
            except (OSError, UnicodeError):  # not reachable, or not a valid name (logged)
                pass
            await asyncio.sleep(RECONNECT_S)

    def send(self, peer: int, group: int, message: Message,
             body: list | None = None) -> bool:
        """Queue ``message`` for ``peer``; False when it was dropped. ``body``: the
        message already encoded (``encode_parts``), when it goes to several peers."""
        protocol = self.outgoing.get(peer)
        if protocol is None or protocol.transport.get_write_buffer_size() > MAX_QUEUED_BYTES:
            return False
        parts = body if body is not None else encode_parts(message)
        protocol.transport.writelines(protocol.link.frame(group, parts))
        return True

    async def close(self) -> None:
        if self.flushing is not None:
            self.flushing.cancel()
            self.refusals.flush(float("inf"))
        for task in [*self.tasks, *self.handshakes]:
            task.cancel()
        for protocol in list(self.open):
            protocol.transport.abort()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
        if self.listener is not None:
            await asyncio.sleep(0)  # the cancelled accept loop lets go of the socket
            self.listener.close()


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else f"{type(exc).__name__} (closed by the peer)"
