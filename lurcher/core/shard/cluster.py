"""A shard among several: runs each command where its routing kind says (here, on the
owning shard by forwarding, on every shard, or after gathering the others' counters) and
answers the other shards' forwarded commands, stats queries and purges.

Only used when ``system.sharding.shards`` > 1; a single shard never creates one. The other
concerns live beside it: ``meta_sync`` keeps metadata alike on every shard, ``migration``
decides and carries out connection hand-over; ``routing`` says which command runs where and
``peers`` defines the bus messages. ``Cluster`` owns the bus and wires the three together.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any

from lurcher.auth.session import Session
from lurcher.core.connection.intents import MigrateTo
from lurcher.core.shard import routing
from lurcher.core.shard.bus import Bus, BusError, Link, PeerRefused, Reply
from lurcher.core.shard.meta_sync import MetaSync
from lurcher.core.shard.migration import Migration
from lurcher.core.shard.peers import (
    MESSAGE_TYPES, SHOWING_COUNTERS, Forward, PartitionStats, Purge, SessionInfo, StatsQuery,
)
from lurcher.core.shard.reply import payload_bytes
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

log = logging.getLogger(__name__)

FORWARD_TIMEOUT_S = 60.0


def _encoded(request: Any, payload: Any) -> bytes:
    """The request's binary form: the bytes received, or a fresh encoding."""
    return bytes(payload) if payload is not None else request.encode()


class Cluster:
    def __init__(self, shard: Any, namespace: str, socket_migration: bool) -> None:
        self.shard = shard
        self.socket_migration = socket_migration
        self.bus = Bus(namespace, shard.shard_id, MESSAGE_TYPES, {
            Forward: self._on_forward, StatsQuery: self._on_stats, Purge: self._on_purge})
        self.meta_sync = MetaSync(shard, self.bus)
        self.bus.handlers.update(self.meta_sync.handlers)
        self.migration = Migration(shard, namespace, socket_migration)
        self.remote_partitions: dict[tuple[int, int, int], PartitionStats] = {}
        self.remote_sessions: list[SessionInfo] = []

    @property
    def peers(self) -> list[int]:
        return [i for i in range(self.shard.shards_count) if i != self.shard.shard_id]

    # -- start-up -----------------------------------------------------------------------
    async def start(self) -> None:
        await self.bus.start()
        self.migration.start(asyncio.get_running_loop())
        await self.meta_sync.start()

    def client_gone(self, client_id: int) -> None:
        self.meta_sync.client_gone(client_id)

    # -- running commands ------------------------------------------------------------------
    def run(self, route: Any, session: Any, request: Any, payload: Any, connection: Any) -> Any:
        """Run a decoded command where its routing kind says. Returns a reply, an
        awaitable, or ``MigrateTo`` (the connection should move to the shard that runs it;
        its ``fallback`` forwards the request instead)."""
        kind = route.routing
        here = self.shard.dispatcher.run_here
        if kind == routing.LOCAL:
            return here(route, session, request)
        if kind in (routing.META, routing.OWNER):
            if not self.shard.is_metadata_owner:
                return self.forward(0, session, route.spec.code, _encoded(request, payload))
            result = here(route, session, request)
            return self.meta_sync.then_publish(result) if kind == routing.META else result
        if kind == routing.GATHER:
            return self._gathered(route, session, request)
        if kind == routing.BROADCAST:
            return self._broadcast(route, session, request)
        placement = routing.place(self.shard, session, route.spec.name, request)
        target = placement.shard_id
        if target is None or target == self.shard.shard_id:
            return here(route, session, placement.request)
        same = placement.request is request

        def forwarded() -> Any:
            return self.forward(target, session, route.spec.code,
                                _encoded(placement.request, payload if same else None))

        if placement.pinned and connection is not None and \
                self.migration.wanted(connection, target):
            return MigrateTo(target, forwarded)
        return forwarded()

    async def _gathered(self, route: Any, session: Any, request: Any) -> Any:
        await self.gather(peers=route.spec.name in SHOWING_COUNTERS)
        result = self.shard.dispatcher.run_here(route, session, request)
        return await result if inspect.isawaitable(result) else result

    async def _broadcast(self, route: Any, session: Any, request: Any) -> Any:
        """A purge: here, then on every other shard, also when some files here could not
        be removed (each partition is purged whole or not at all); that failure is then
        answered, after the others' (a refusal of the command itself purges nothing)."""
        failed: IggyError | None = None
        try:
            result = self.shard.dispatcher.run_here(route, session, request)
            if inspect.isawaitable(result):
                result = await result
        except IggyError as exc:
            if exc.status != ErrorCode.CANNOT_DELETE_FILE:
                raise
            failed, result = exc, None
        state = self.shard.meta.state
        stream = state.stream(request.stream_id)
        topic_id = state.topic(request.stream_id, request.topic_id).id \
            if hasattr(request, "topic_id") else None
        await self.purge_everywhere(stream.id, topic_id)
        if failed is not None:
            raise failed
        return result

    # -- answering peers -----------------------------------------------------------------
    async def _on_forward(self, link: Link, msg: Forward) -> Reply:
        session = Session(msg.address, msg.transport, client_id=msg.client_id,
                          user_id=msg.user_id, user_created_at=msg.user_created_at,
                          token_name=msg.token_name)
        dispatcher = self.shard.dispatcher
        try:
            route = dispatcher.route(session, msg.code)
            request = route.spec.request.decode_exact(msg.payload)
            result = dispatcher.run_here(route, session, request)
            if route.routing == routing.META:
                result = self.meta_sync.then_publish(result)
            if inspect.isawaitable(result):
                result = await result
            return Reply(rid=msg.rid, payload=payload_bytes(result))
        except IggyError as exc:
            return Reply(rid=msg.rid, status=exc.status)

    async def _on_stats(self, link: Link, msg: StatsQuery) -> Reply:
        peers = self.shard.peer_stats
        if msg.peers and peers is not None:  # a cluster node: partitions held elsewhere too
            await peers.refresh(self.shard.meta.state.topics())
        counters = self.shard.partition_counters() if msg.peers else self.shard.partitions
        parts = [PartitionStats(s, t, p.partition_id, p.created_at, p.segments_count,
                                p.current_offset, p.size_bytes, p.messages_count)
                 for (s, t, _), p in counters.items()]
        sessions = [SessionInfo(x.client_id, x.user_id, x.transport, x.address)
                    for x in self.shard.sessions.values()]
        return Reply(rid=msg.rid, data=[parts, sessions])

    async def _on_purge(self, link: Link, msg: Purge) -> Reply:
        try:
            removals = self.shard.purge_local(msg.stream_id, msg.topic_id)
            if removals is not None:
                await removals
        except IggyError as exc:
            return Reply(rid=msg.rid, status=exc.status)
        return Reply(rid=msg.rid)

    # -- asking peers ----------------------------------------------------------------------
    async def gather(self, peers: bool = False) -> None:
        """Refresh the other shards' partition counters and sessions (``peers``: on a
        cluster node, with the counters of partitions other nodes hold)."""
        partitions: dict[tuple[int, int, int], PartitionStats] = {}
        sessions: list[SessionInfo] = []
        replies = await asyncio.gather(
            *(self.bus.request(p, lambda rid: StatsQuery(rid=rid, peers=peers))
              for p in self.peers),
            return_exceptions=True)
        for reply in replies:
            if isinstance(reply, BaseException):
                log.warning("a shard did not report its stats: %s", reply)
                continue
            for row in reply.data[0]:
                stat = PartitionStats(*row)
                partitions[(stat.stream_id, stat.topic_id, stat.partition_id)] = stat
            sessions.extend(SessionInfo(*row) for row in reply.data[1])
        self.remote_partitions, self.remote_sessions = partitions, sessions

    async def purge_everywhere(self, stream_id: int, topic_id: int | None) -> None:
        """Purge the stream's or topic's partitions on every other shard; each shard does
        its part even when another fails. Raises IggyError: the first refusal's status."""
        replies = await asyncio.gather(*(self.bus.request(p, lambda rid: Purge(
            rid=rid, stream_id=stream_id, topic_id=topic_id)) for p in self.peers),
            return_exceptions=True)
        for reply in replies:
            if isinstance(reply, PeerRefused):
                raise IggyError(reply.status, "purge on another shard") from reply
            if isinstance(reply, BaseException):
                raise IggyError(ErrorCode.ERROR, f"purge on another shard: {reply}") from reply

    async def forward(self, shard_id: int, session: Any, code: int, payload: bytes) -> bytes:
        """Run a command on another shard for this client. Raises IggyError."""
        try:
            reply = await self.bus.request(shard_id, lambda rid: Forward(
                rid=rid, client_id=session.client_id, user_id=session.user_id,
                address=session.address, transport=session.transport, code=code,
                payload=payload, user_created_at=session.user_created_at,
                token_name=session.token_name), FORWARD_TIMEOUT_S)
        except PeerRefused as exc:
            raise IggyError(exc.status, f"from shard {shard_id}") from None
        except BusError as exc:
            raise IggyError(ErrorCode.ERROR, f"shard {shard_id}: {exc}") from exc
        return reply.payload

    async def close(self) -> None:
        await self.bus.close()
        self.migration.close()
