"""With startup's objects frozen (``lurcher.runtime.heap``), what a later command deletes is
still freed: a frozen object left in a reference cycle would never be collected, so the
objects a shard builds for a stream, its topics and partitions must not form one."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from lurcher.core.log.segment import Segment
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.streams.delete_stream import DeleteStream
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.runtime.heap import freeze_startup_objects
from tests.unit.shard.harness import ShardHarness


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


async def test_a_stream_opened_before_the_freeze_and_deleted_after_is_freed(
        harness: ShardHarness):
    session = await harness.login()
    await harness.call(session, CreateStream("kept-at-start"))
    await harness.call(session, CreateTopic(Identifier.parse("kept-at-start"), 3, 1, 0, 0, 1,
                                            "t"))
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
