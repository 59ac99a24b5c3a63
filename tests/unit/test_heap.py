"""``lurcher.runtime.heap``: startup's objects leave the collected generations; garbage made
before the freeze is collected, not frozen; objects made after it are collected as before;
and what a later command deletes is still freed: a frozen object left in a reference cycle
would never be collected, so what a shard builds for a stream, its topics and partitions
must not form one."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from lurcher.core.log.segment import Segment
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.streams.delete_stream import DeleteStream
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.runtime.heap import freeze_startup_objects
from tests.unit.shard.harness import ShardHarness


class Node:
    def __init__(self) -> None:
        self.peer: Node | None = None


def cycle() -> Node:
    a, b = Node(), Node()
    a.peer, b.peer = b, a
    return a


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def tracked(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


def test_objects_alive_at_start_leave_every_collected_generation():
    kept = cycle()
    assert tracked(kept)
    frozen = freeze_startup_objects()
    assert 0 < gc.get_freeze_count() <= frozen  # frozen objects may still die (refcount), not join
    assert not tracked(kept)  # get_objects lists the collected generations only


def test_garbage_from_before_the_freeze_is_freed_not_frozen():
    gone = weakref.ref(cycle())
    freeze_startup_objects()
    assert gone() is None


def test_objects_made_after_the_freeze_are_collected_as_before():
    freeze_startup_objects()
    later = weakref.ref(cycle())
    assert later() is not None
    gc.collect()
    assert later() is None


async def test_a_stream_opened_before_the_freeze_and_deleted_after_is_freed(tmp_path: Path):
    harness = ShardHarness(tmp_path)
    try:
        session = await harness.login()
        await harness.call(session, CreateStream("kept-at-start"))
        await harness.call(session, CreateTopic(Identifier.parse("kept-at-start"), 3, 1, 0, 0,
                                                1, "t"))
        partitions = [weakref.ref(p) for p in harness.shard.partitions.values()]
        log_paths = {s.log_path for p in harness.shard.partitions.values() for s in p.segments}
        assert len(partitions) == 3 and len(log_paths) == 3
        freeze_startup_objects()
        await harness.call(session, DeleteStream(Identifier.parse("kept-at-start")))
        await asyncio.sleep(0)
        gc.collect()  # walks what was made after the freeze only
        assert [r for r in partitions if r() is not None] == []
        gc.unfreeze()  # no collection after it: what a cycle kept is still there to be seen
        kept = [o for o in gc.get_objects() if type(o) is Segment and o.log_path in log_paths]
        assert kept == []
    finally:
        harness.close()
