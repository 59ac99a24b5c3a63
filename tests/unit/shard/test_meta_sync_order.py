"""A follower's metadata sync (``core.shard.meta_sync``) keeps the owner's order while it
subscribes: what the owner pushes between answering ``Subscribe`` and the follower resuming
with that answer (events, a group snapshot, a barrier) is applied after the answer's
history and snapshot, in arrival order; a failed subscription drops it (the next answer's
history has it). The bus and the shard are stand-ins that record calls: the order of those
calls is what is under test. tests/integration/test_crash_delete.py runs the real race
(a topic re-created under the id a missed deletion frees)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from lurcher.core.shard.bus import BusError, Reply
from lurcher.core.shard.meta_sync import MetaSync
from lurcher.core.shard.peers import Barrier, GroupsUpdate, MetaEvents


Calls = list[tuple[str, Any]]  # what the stand-ins were asked to do, in order


class FollowerShard:
    """The shard and its metadata store in one: it has 3 events already."""

    is_metadata_owner = False
    closing = False
    events_count = 3

    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.meta = self

    def apply_encoded(self, bodies: list[bytes]) -> None:
        self.calls.append(("apply", bodies))

    def catch_up(self, bodies: list[bytes]) -> None:
        self.calls.append(("catch_up", bodies))

    def groups_adopt(self, groups: Any) -> None:
        self.calls.append(("groups", groups))

    def own_memberships(self) -> list[tuple[int, int, int, int]]:
        return []


class OwnerLink:
    def __init__(self, calls: Calls) -> None:
        self.calls = calls
        self.task = asyncio.get_running_loop().create_future()

    def send_nowait(self, message: Any) -> None:
        self.calls.append(("reply", message.rid))


class PendingBus:
    """``request`` waits for the test to answer it (or fail it)."""

    def __init__(self, link: OwnerLink) -> None:
        self.answer: asyncio.Future = asyncio.get_running_loop().create_future()
        self.asked: list[Any] = []
        self._link = link

    async def request(self, peer: int, make: Any, timeout_s: float = 5.0) -> Any:
        self.asked.append(make(1))
        return await self.answer

    async def link(self, peer: int) -> OwnerLink:
        return self._link


async def subscribing() -> tuple[MetaSync, PendingBus, OwnerLink, Calls, asyncio.Task]:
    calls: Calls = []
    link = OwnerLink(calls)
    bus = PendingBus(link)
    sync = MetaSync(FollowerShard(calls), bus)
    task = asyncio.ensure_future(sync.start())
    while not bus.asked:
        await asyncio.sleep(0)
    return sync, bus, link, calls, task


def push(sync: MetaSync, link: OwnerLink, message: Any) -> None:
    sync.handlers[type(message)](link, message)


async def test_what_arrives_while_subscribing_is_applied_after_the_answer_in_order():
    sync, bus, link, calls, task = await subscribing()
    assert bus.asked[0].shard_id == 3  # asks for the history after the events it has
    push(sync, link, MetaEvents(events=[b"created-again"]))
    push(sync, link, GroupsUpdate(groups=[(1, 1, 1, [])]))
    push(sync, link, Barrier(rid=7))
    assert calls == []  # nothing applied, nothing confirmed before the history
    bus.answer.set_result(Reply(rid=1, data=[[b"deleted"], [], 1]))
    await task
    assert calls == [("catch_up", [b"deleted"]), ("groups", []),
                     ("apply", [b"created-again"]), ("groups", [(1, 1, 1, [])]),
                     ("reply", 7)]
    calls.clear()
    push(sync, link, MetaEvents(events=[b"later"]))
    push(sync, link, Barrier(rid=8))
    assert calls == [("apply", [b"later"]), ("reply", 8)]  # subscribed: at once


async def test_a_failed_subscription_drops_what_it_held():
    sync, bus, link, calls, task = await subscribing()
    push(sync, link, MetaEvents(events=[b"from-a-dead-link"]))
    bus.answer.set_exception(BusError("peer link closed"))
    with pytest.raises(BusError):
        await task
    assert calls == []
    push(sync, link, MetaEvents(events=[b"next"]))
    assert calls == [("apply", [b"next"])]
