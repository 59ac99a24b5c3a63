"""Metadata kept alike on every shard of one server: shard 0 owns it, the others follow.

The owner (shard 0) runs every metadata command; each event it records is pushed to every
subscribed shard (``MetaEvents``), and so are consumer-group memberships (``GroupsUpdate``).
A follower subscribes at start with the number of events it has, receives the history it
misses, and re-subscribes whenever its link to the owner drops. Invariant: a metadata
command is answered only after every reachable shard confirmed it applied the change
(``barrier``), so a client sees it next on any shard. Clients that leave a follower are
reported to the owner (``ClientGone``), which owns group membership. Clients of a shard that
dies are never reported: when a shard (re)subscribes, the owner first asks for the sessions
of every subscribed shard and of the subscribing one, and removes from the groups each
member connected to none of them nor to the owner (a member whose connection is migrating
at that moment may be dropped too; when a shard does not answer, nobody is). The owner keeps
memberships only in memory, so a restarted owner knows none: a subscribing shard sends the
memberships of its clients as it last adopted them, with the owner's start time it last saw;
an owner started since then joins again those still connected (and not reported gone
meanwhile) whose group still exists. Subscriptions are handled one at a time, so one shard's
members joined again are among the clients the next subscription checks; one that waited
longer than its requester does is refused rather than followed by pushes the requester
would apply without the history before them.

Order on a follower: the owner starts pushing to a link as it answers its ``Subscribe``, and
the link's reader handles a pushed message at once, while the subscribing coroutine resumes
with the answer only later. So what arrives while a subscription is pending is held and
applied after the answer's history and group snapshot, in arrival order: an event recorded
after the history (a topic created under an id the history frees) never lands before it, a
newer group snapshot is never overwritten by the answer's older one, and a ``Barrier`` is
confirmed only once what came before it is applied. What is held is at most what the owner
pushes during one ``Subscribe`` request, which the bus's request timeout bounds.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import Any

from lurcher.core.shard.bus import Bus, BusError, Link, Reply
from lurcher.core.shard.peers import (Barrier, ClientGone, GroupsUpdate, MetaEvents,
                                      StatsQuery, Subscribe)

log = logging.getLogger(__name__)

BARRIER_TIMEOUT_S = 60.0
STATS_TIMEOUT_S = 10.0
SUBSCRIBE_TIMEOUT_S = 30.0  # a follower gives a Subscribe this long


class MetaSync:
    """One shard's side of the metadata sync; its bus handlers are in ``handlers``."""

    def __init__(self, shard: Any, bus: Bus) -> None:
        self.shard, self.bus = shard, bus
        self.subscribers: set[Link] = set()
        self.owner_started_at = 0  # a follower's: the owner's start time at its last subscribe
        self._subscribing = asyncio.Lock()
        self._gone_while_subscribing: set[int] = set()  # ClientGone during a subscription
        self._held: list[tuple[Any, Any]] | None = None  # pushed while subscribing

    @property
    def handlers(self) -> dict[type, Any]:
        return {Subscribe: self._on_subscribe, MetaEvents: self._on_meta_events,
                GroupsUpdate: self._on_groups_update, ClientGone: self._on_client_gone,
                Barrier: self._on_barrier}

    async def start(self) -> None:
        if self.shard.is_metadata_owner:
            self.shard.meta.listeners.append(self._publish)
        else:
            await self._subscribe()

    async def _subscribe(self) -> None:
        done = self.shard.meta.events_count
        self._held = []
        try:
            members, seen = self.shard.own_memberships(), self.owner_started_at
            reply = await self.bus.request(0, lambda rid: Subscribe(
                rid=rid, shard_id=done, members=members, owner_started_at=seen),
                SUBSCRIBE_TIMEOUT_S)
            self.owner_started_at = reply.data[2]
            self.shard.catch_up(list(reply.data[0]))
            self.shard.groups_adopt(reply.data[1])
            for apply, msg in self._held:  # synchronous: nothing is added meanwhile
                apply(msg)
        finally:  # a failed subscription drops what it held: the next one's history has it
            self._held = None
        link = await self.bus.link(0)
        link.task.add_done_callback(lambda _t: self._resubscribe_later())

    def _resubscribe_later(self) -> None:
        if not self.shard.closing:
            asyncio.ensure_future(self._resubscribe())

    async def _resubscribe(self) -> None:
        while not self.shard.closing:
            try:
                await self._subscribe()
                return
            except BusError as exc:
                log.warning("metadata owner unreachable (%s); retrying", exc)
                await asyncio.sleep(0.5)

    # -- owner side ------------------------------------------------------------------------
    async def _on_subscribe(self, link: Link, msg: Subscribe) -> Reply:
        """Drop group members connected nowhere, then subscribe ``link``: its history and
        group snapshot are taken at the moment it starts receiving live pushes."""
        arrived = time.monotonic()
        async with self._subscribing:
            self._gone_while_subscribing.clear()
            alive = await self._connected_clients({link, *self.subscribers})
            if alive is not None:
                self._drop_departed_members(alive)
            if msg.owner_started_at not in (0, self.shard.started_at_us):
                gone = self._gone_while_subscribing
                self._rejoin([m for m in msg.members if m[3] not in gone
                              and (alive is None or m[3] in alive)])
            if time.monotonic() - arrived > SUBSCRIBE_TIMEOUT_S - 1.0:
                # the subscriber gave up waiting: pushing to it now would skip the history
                raise BusError("subscription handled after its requester's timeout")
            self.subscribers.add(link)
            history = self.shard.meta.history[msg.shard_id:]
            return Reply(rid=msg.rid, data=[history, self.shard.groups_export(),
                                            self.shard.started_at_us])

    def _rejoin(self, members: list[tuple[int, int, int, int]]) -> None:
        """Join again the memberships a subscribing shard's clients had under the owner's
        previous run (this one forgot them all)."""
        rejoined = self.shard.rejoin(members)
        if rejoined:
            log.info("%d consumer group membership(s) of a shard's clients joined again",
                     rejoined)
            self.publish_groups()

    async def _connected_clients(self, links: set[Link]) -> set[int] | None:
        """Client ids with a session here or on the shards behind ``links`` (the subscribed
        ones: a shard that is not has no clients, or had them before the owner restarted,
        which forgot every membership); None when one of them did not say."""
        links = {link for link in links if not link.writer.is_closing()}
        replies = await asyncio.gather(
            *(link.request(StatsQuery(rid=self.bus.next_rid()), STATS_TIMEOUT_S)
              for link in links), return_exceptions=True)
        alive = set(self.shard.sessions)
        for reply in replies:
            if isinstance(reply, BaseException):
                log.warning("cannot check group members against a shard's clients: %s", reply)
                return None
            alive.update(row[0] for row in reply.data[1])
        return alive

    def _drop_departed_members(self, alive: set[int]) -> None:
        """Remove from every group the clients no shard serves any more (those of a shard
        that died), so their partitions go to live members and a client of the restarted
        shard that gets a dead one's id does not inherit its membership."""
        members = {m.client_id for group in self.shard.groups.groups.values()
                   for m in group.members.values()}
        departed = members - alive
        for client_id in sorted(departed):
            log.info("client %d is connected to no shard: it leaves its consumer groups",
                     client_id)
            self.shard.forget_client(client_id)
        if departed:
            self.publish_groups()

    def _publish(self, body: bytes) -> None:
        for link in list(self.subscribers):
            if link.writer.is_closing():
                self.subscribers.discard(link)
            else:
                link.send_nowait(MetaEvents(events=[body]))

    def publish_groups(self) -> None:
        update = GroupsUpdate(groups=self.shard.groups_export())
        for link in list(self.subscribers):
            if not link.writer.is_closing():
                link.send_nowait(update)

    def _on_client_gone(self, link: Link, msg: ClientGone) -> None:
        if self._subscribing.locked():  # it may be in the memberships being joined again
            self._gone_while_subscribing.add(msg.client_id)
        self.shard.forget_client(msg.client_id)
        self.publish_groups()

    # -- follower side --------------------------------------------------------------------
    def _on_meta_events(self, link: Link, msg: MetaEvents) -> None:
        self._apply_or_hold(self._apply_events, msg)

    def _on_groups_update(self, link: Link, msg: GroupsUpdate) -> None:
        self._apply_or_hold(self._adopt_groups, msg)

    def _on_barrier(self, link: Link, msg: Barrier) -> None:
        """Confirm once everything that came before the barrier is applied (held, too)."""
        self._apply_or_hold(lambda barrier: link.send_nowait(Reply(rid=barrier.rid)), msg)

    def _apply_or_hold(self, apply: Any, msg: Any) -> None:
        if self._held is None:
            apply(msg)
        else:
            self._held.append((apply, msg))

    def _apply_events(self, msg: MetaEvents) -> None:
        self.shard.meta.apply_encoded(list(msg.events))

    def _adopt_groups(self, msg: GroupsUpdate) -> None:
        self.shard.groups_adopt(msg.groups)

    def client_gone(self, client_id: int) -> None:
        if self.shard.is_metadata_owner:
            self.shard.forget_client(client_id)
            self.publish_groups()
        else:
            asyncio.ensure_future(self._tell_owner(ClientGone(client_id=client_id)))

    async def _tell_owner(self, msg: ClientGone) -> None:
        try:
            (await self.bus.link(0)).send_nowait(msg)
        except BusError as exc:
            log.warning("could not report client %d gone: %s", msg.client_id, exc)

    async def then_publish(self, result: Any) -> Any:
        """Finish a metadata command on the owner: publish group membership, then wait
        until every other shard has applied the change (so any client sees it next)."""
        try:
            if inspect.isawaitable(result):
                result = await result
        finally:
            self.publish_groups()
            await self.barrier()
        return result

    async def barrier(self) -> None:
        links = [link for link in self.subscribers if not link.writer.is_closing()]
        results = await asyncio.gather(
            *(link.request(Barrier(rid=self.bus.next_rid()), BARRIER_TIMEOUT_S) for link in links),
            return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                log.warning("a shard did not confirm a metadata change: %s", result)
