"""The metadata owner's side of a subscription (``core.shard.meta_sync``) after the owner
restarted: the subscriber's clients' memberships are joined again only when the owner
started since the subscriber last saw it, only for clients still connected, and not for a
client reported gone while the subscription waited for the shards' sessions; a subscription
handled after its requester gave up is refused, not followed by pushes. The shard and the
link are stand-ins that record calls. tests/integration/test_sharding.py restarts a real
shard 0 under 2 and 3 shards."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from lurcher.core.shard import meta_sync
from lurcher.core.shard.bus import BusError, Reply
from lurcher.core.shard.meta_sync import MetaSync
from lurcher.core.shard.peers import ClientGone, Subscribe

OWNER_STARTED_AT = 2
MEMBERS = [(0, 0, 0, 42), (0, 0, 0, 43)]


class Groups:
    groups: dict = {}


class OwnerShard:
    """The restarted owner: no groups, no sessions of its own."""

    is_metadata_owner = True
    started_at_us = OWNER_STARTED_AT

    def __init__(self) -> None:
        self.sessions: dict[int, Any] = {}
        self.groups = Groups()
        self.meta = self
        self.history: list[bytes] = []
        self.rejoined: list[list[tuple[int, int, int, int]]] = []
        self.forgotten: list[int] = []

    def rejoin(self, members: list[tuple[int, int, int, int]]) -> int:
        self.rejoined.append(list(members))
        return len(members)

    def forget_client(self, client_id: int) -> None:
        self.forgotten.append(client_id)

    def groups_export(self) -> list:
        return []


class Writer:
    @staticmethod
    def is_closing() -> bool:
        return False


class SubscriberLink:
    """The subscribing shard's link: its StatsQuery answer waits for the test."""

    def __init__(self) -> None:
        self.writer = Writer()
        self.sessions: asyncio.Future = asyncio.get_running_loop().create_future()
        self.asked = 0

    async def request(self, message: Any, timeout_s: float) -> Reply:
        self.asked += 1
        return Reply(rid=message.rid, data=[[], [[cid] for cid in await self.sessions]])

    def send_nowait(self, message: Any) -> None:
        pass


class Bus:
    def next_rid(self) -> int:
        return 1


async def subscription(seen: int) -> tuple[MetaSync, OwnerShard, SubscriberLink, asyncio.Task]:
    shard, link = OwnerShard(), SubscriberLink()
    sync = MetaSync(shard, Bus())
    task = asyncio.ensure_future(sync.handlers[Subscribe](
        link, Subscribe(rid=5, members=MEMBERS, owner_started_at=seen)))
    while not link.asked:
        await asyncio.sleep(0)
    return sync, shard, link, task


async def test_a_restarted_owner_joins_the_connected_members_again():
    sync, shard, link, task = await subscription(seen=1)
    link.sessions.set_result([42, 43])
    reply = await task
    assert shard.rejoined == [MEMBERS] and reply.data[2] == OWNER_STARTED_AT
    assert link in sync.subscribers


async def test_a_client_gone_during_the_subscription_is_not_joined_again():
    sync, shard, link, task = await subscription(seen=1)
    sync.handlers[ClientGone](link, ClientGone(client_id=42))  # after its shard answered...
    link.sessions.set_result([42, 43])  # ... that it was connected
    await task
    assert shard.forgotten == [42] and shard.rejoined == [[(0, 0, 0, 43)]]


async def test_the_same_owner_and_a_first_subscription_join_nobody_again():
    for seen in (OWNER_STARTED_AT, 0):
        _sync, shard, link, task = await subscription(seen)
        link.sessions.set_result([42, 43])
        await task
        assert shard.rejoined == []


async def test_a_subscription_handled_after_its_requester_gave_up_is_refused(monkeypatch):
    sync, shard, link, task = await subscription(seen=1)
    # the StatsQuery round ends past the requester's timeout
    monkeypatch.setattr(meta_sync, "time", SimpleNamespace(monotonic=lambda: 1e9))
    link.sessions.set_result([42, 43])
    with pytest.raises(BusError):
        await task
    assert link not in sync.subscribers
