"""Real handlers through the in-process harness: encoded requests in, wire replies out."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from lurcher.core.log.offsets import ConsumerOffsets

from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.messages.poll_messages import PollMessages
from lurcher.core.wire.requests.messages.send_messages import SendMessages
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import StoreConsumerOffset
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.streams.get_streams import GetStreams
from lurcher.core.wire.requests.system.ping import Ping
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.core.wire.requests.users.create_user import CreateUser
from lurcher.core.wire.values.consumer import Consumer
from lurcher.core.wire.values.partitioning import Partitioning
from lurcher.core.wire.values.polling import PollingStrategy
from tests.unit.shard.harness import ShardHarness

S, T = Identifier.parse("orders"), Identifier.parse("eu")


async def make_topic(harness: ShardHarness, session, partitions: int = 2) -> None:
    stream = await harness.call(session, CreateStream("orders"))
    assert stream.header.name == "orders"
    topic = await harness.call(session, CreateTopic(S, partitions, 1, 0, 0, 0, "eu"))
    assert (topic.header.name, len(topic.partitions)) == ("eu", partitions)


async def test_ping_needs_no_login(harness: ShardHarness) -> None:
    assert await harness.exchange(harness.connect(), Ping()) == (0, b"")


async def test_commands_before_login_are_unauthenticated(harness: ShardHarness) -> None:
    status, payload = await harness.exchange(harness.connect(), GetStreams())
    assert (status, payload) == (ErrorCode.UNAUTHENTICATED, b"")


async def test_create_stream_and_topic(harness: ShardHarness) -> None:
    root = await harness.login()
    await make_topic(harness, root)
    streams = await harness.call(root, GetStreams())
    assert [(s.name, s.topics_count) for s in streams] == [("orders", 1)]


async def test_send_then_poll(harness: ShardHarness) -> None:
    root = await harness.login()
    await make_topic(harness, root)
    batch = MessageBatch.build([b"one", b"two", b"three"]).writable()
    await harness.call(root, SendMessages(S, T, Partitioning.partition(1), batch))
    polled = await harness.call(root, PollMessages(
        Consumer.of(7), S, T, 1, PollingStrategy.offset(0), 10))
    assert (polled.partition_id, polled.current_offset, polled.messages_count) == (1, 2, 3)
    assert [(m.offset, m.payload) for m in polled.messages()] == [
        (0, b"one"), (1, b"two"), (2, b"three")]


async def test_user_without_permission_is_refused(harness: ShardHarness) -> None:
    root = await harness.login()
    await harness.call(root, CreateUser("reader", "reader-password"))
    reader = await harness.login("reader", "reader-password")
    with pytest.raises(IggyError) as refused:
        await harness.call(reader, CreateStream("not-allowed"))
    assert refused.value.status == ErrorCode.UNAUTHORIZED
    assert [s.name for s in await harness.call(root, GetStreams())] == []


async def test_group_id_reused_after_a_missed_deletion_starts_without_offset(tmp_path) -> None:
    """A group deletion recorded but not carried out on the partitions (a crash right after
    the event was written, or a shard down meanwhile) leaves no offset for a group that
    re-uses its id, and none that holds back retention."""
    from lurcher.core.meta import events as ev
    from lurcher.core.meta.store import MetaStore
    from lurcher.core.wire.requests.consumer_groups.create_consumer_group import (
        CreateConsumerGroup)

    harness = ShardHarness(tmp_path)
    root = await harness.login()
    await make_topic(harness, root, partitions=1)
    await harness.call(root, CreateConsumerGroup(S, T, "old"))
    harness.shard.partitions[(0, 0, 0)].store_offset("groups", 0, 41)
    harness.close()
    store = MetaStore(tmp_path / "state" / "log")  # only the event, none of its effects
    store.record(ev.ConsumerGroupDeleted(0, 0, 0))
    store.close()

    harness = ShardHarness(tmp_path)
    try:
        root = await harness.login()
        created = await harness.call(root, CreateConsumerGroup(S, T, "new"))
        assert created.header.id == 0
        partition = harness.shard.partitions[(0, 0, 0)]
        assert partition.get_offset("groups", 0) is None
        assert partition.min_stored_offset() is None
    finally:
        harness.close()


async def test_a_clean_close_stores_the_offsets_still_queued(tmp_path: Path) -> None:
    """With enforce_fsync offsets are stored by the offsets thread; closing the shard (a
    clean stop, after which the process exits and the daemon thread with it) waits for
    the calls queued before it."""
    harness = ShardHarness(tmp_path, {"LURCHER_SYSTEM_PARTITION_ENFORCE_FSYNC": "true"})
    root = await harness.login()
    await make_topic(harness, root)
    batch = MessageBatch.build([b"one", b"two", b"three"]).writable()
    await harness.call(root, SendMessages(S, T, Partitioning.partition(1), batch))
    busy = threading.Event()  # the offsets thread is busy with an earlier call
    ConsumerOffsets._writer.run(lambda: busy.wait(10), lambda error: None)
    storing = asyncio.ensure_future(
        harness.exchange(root, StoreConsumerOffset(Consumer.of(7), S, T, 1, 2)))
    for _ in range(5):
        await asyncio.sleep(0)  # the store is queued behind the busy call
    threading.Timer(0.3, busy.set).start()
    harness.close()
    stored = list(tmp_path.rglob("offsets/consumers/7"))
    assert [int.from_bytes(path.read_bytes(), "little") for path in stored] == [2]
    storing.cancel()
