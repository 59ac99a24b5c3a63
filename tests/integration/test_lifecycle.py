"""The partition lifecycle on live topics with data, checked again after a restart:
DeleteSegments, PurgeTopic, PurgeStream, CreatePartitions, DeletePartitions keep offsets
and stored consumer offsets consistent; FlushUnsavedBuffer with fsync answers OK. A
partition whose directory is already moved aside for its deletion answers
PartitionNotFound."""

from __future__ import annotations

import os
import struct

from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import GetConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import (
    StoreConsumerOffset,
)
from lurcher.core.wire.requests.messages.flush_unsaved_buffer import FlushUnsavedBuffer
from lurcher.core.wire.requests.partitions.create_partitions import CreatePartitions
from lurcher.core.wire.requests.partitions.delete_partitions import DeletePartitions
from lurcher.core.wire.requests.segments.delete_segments import DeleteSegments
from lurcher.core.wire.requests.streams.purge_stream import PurgeStream
from lurcher.core.wire.requests.topics.get_topic import GetTopic
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from lurcher.core.wire.responses.topics import TopicDetails
from lurcher.core.wire.values.consumer import Consumer
from tests.support import raw

S, T = Identifier.parse("s"), Identifier.parse("t")
ENV = {"LURCHER_SYSTEM_SEGMENT_SIZE": "4096"}
BATCH = 8  # 8 x 164 bytes: a segment rolls after 4 batches (32 messages)


def call(c: raw.RawClient, request) -> bytes:
    return c.call(type(request).CODE, request.encode())


def topic(c: raw.RawClient) -> TopicDetails:
    return TopicDetails.decode_exact(call(c, GetTopic(S, T)))


def send(c: raw.RawClient, partition: int, n: int) -> None:
    for start in range(0, n, BATCH):
        c.send("s", "t", raw.partition_id(partition),
               [raw.message(b"x" * 100) for _ in range(min(BATCH, n - start))])


def stored_offset(c: raw.RawClient, partition: int, consumer: int = 1) -> int | None:
    reply = call(c, GetConsumerOffset(Consumer.of(consumer), S, T, partition))
    return struct.unpack_from("<IQQ", reply)[2] if reply else None


def store(c: raw.RawClient, partition: int, offset: int, consumer: int = 1) -> None:
    call(c, StoreConsumerOffset(Consumer.of(consumer), S, T, partition, offset))


def first_offset(c: raw.RawClient, partition: int) -> int | None:
    got = c.poll("s", "t", partition, raw.STRATEGY_OFFSET, 0, 1).messages
    return got[0].offset if got else None


def connect(server) -> raw.RawClient:
    c = raw.RawClient(server.tcp_address)
    c.login()
    return c


def test_delete_segments_keeps_offsets_across_restart(server_factory):
    server = server_factory(ENV)
    with connect(server) as c:
        c.create_stream("s")
        c.create_topic("s", "t", 1)
        send(c, 0, 100)                              # segments 0, 32, 64, 96 (open)
        store(c, 0, 70)
        call(c, DeleteSegments(S, T, 0, 10))         # the barrier (70) keeps [64..95]
        part = topic(c).partitions[0]
        assert (part.segments_count, part.messages_count, part.current_offset) == (2, 36, 99)
        assert first_offset(c, 0) == 64
    server.restart()
    with connect(server) as c:
        part = topic(c).partitions[0]
        assert (part.segments_count, part.messages_count, part.current_offset) == (2, 36, 99)
        assert first_offset(c, 0) == 64 and stored_offset(c, 0) == 70
        send(c, 0, 1)
        assert c.poll("s", "t", 0, raw.STRATEGY_LAST, 0, 1).messages[0].offset == 100
        got = c.poll("s", "t", 0, raw.STRATEGY_NEXT, 0, 1000, consumer=b"\x01" + raw.ident(1))
        assert got.messages[0].offset == 71


def test_purge_topic_and_stream_restart_at_zero(server_factory):
    server = server_factory(ENV)
    with connect(server) as c:
        c.create_stream("s")
        c.create_topic("s", "t", 2)
        send(c, 0, 50)
        send(c, 1, 10)
        store(c, 0, 20)
        call(c, PurgeTopic(S, T))
        assert [(p.messages_count, p.current_offset, p.segments_count)
                for p in topic(c).partitions] == [(0, 0, 1), (0, 0, 1)]
        assert stored_offset(c, 0) is None
        send(c, 0, 3)
        store(c, 0, 1)
        call(c, PurgeStream(S))
        send(c, 1, 2)
    server.restart()
    with connect(server) as c:
        parts = topic(c).partitions
        assert [(p.messages_count, p.current_offset) for p in parts] == [(0, 0), (2, 1)]
        assert stored_offset(c, 0) is None and first_offset(c, 0) is None
        assert [m.offset for m in c.poll_all("s", "t", 1)] == [0, 1]


def test_partitions_created_and_deleted_on_a_live_topic(server_factory):
    server = server_factory(ENV)
    with connect(server) as c:
        c.create_stream("s")
        c.create_topic("s", "t", 1)
        send(c, 0, 40)
        store(c, 0, 30)
        call(c, CreatePartitions(S, T, 2))
        send(c, 1, 5)
        send(c, 2, 7)
        store(c, 2, 4)
        call(c, DeletePartitions(S, T, 1))           # drops partition 2 and its offsets
        call(c, CreatePartitions(S, T, 1))           # a new, empty partition 2
        call(c, FlushUnsavedBuffer(S, T, 0, True))
    server.restart()
    with connect(server) as c:
        parts = topic(c).partitions
        assert [(p.id, p.messages_count, p.current_offset) for p in parts] == [
            (0, 40, 39), (1, 5, 4), (2, 0, 0)]
        assert stored_offset(c, 0) == 30 and stored_offset(c, 2) is None
        assert first_offset(c, 2) is None


def test_offsets_with_enforce_fsync_are_stored_and_survive_a_crash(server_factory):
    """With ``enforce_fsync`` the offset files are written and fsynced off the event loop:
    a store, and a poll's auto-commit, answer once stored, and a SIGKILL loses neither."""
    server = server_factory({**ENV, "LURCHER_SYSTEM_PARTITION_ENFORCE_FSYNC": "true"})
    auto = b"\x01" + raw.ident(2)
    with connect(server) as c:
        c.create_stream("s")
        c.create_topic("s", "t", 1)
        send(c, 0, 20)
        store(c, 0, 5)
        assert stored_offset(c, 0) == 5
        for first in (0, 7):
            got = c.poll("s", "t", 0, raw.STRATEGY_NEXT, 0, 7, auto_commit=True, consumer=auto)
            assert [m.offset for m in got.messages] == list(range(first, first + 7))
        assert stored_offset(c, 0, consumer=2) == 13
    server.restart(crash=True)
    with connect(server) as c:
        assert stored_offset(c, 0) == 5 and stored_offset(c, 0, consumer=2) == 13
        got = c.poll("s", "t", 0, raw.STRATEGY_NEXT, 0, 100, auto_commit=True, consumer=auto)
        assert [m.offset for m in got.messages] == list(range(14, 20))


def test_a_partition_whose_directory_went_for_its_deletion_is_not_found(server_factory):
    """With several shards the metadata owner moves a deleted partition's directory aside
    before the owning shard applies the deletion; a command served there meanwhile finds no
    files. Moving the directory by hand makes that state here: a store, a poll that commits
    and a send that rolls a segment over get PartitionNotFound (3007), the connection goes
    on, and the log shows no traceback."""
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": "1"})  # every send rolls over
    with connect(server) as c:
        c.create_stream("s")
        c.create_topic("s", "t", 1)
        send(c, 0, 1)
        directory = server.data_dir / "streams/0/topics/0/partitions/0"
        os.rename(directory, server.data_dir / "moved-away")
        store_offset = StoreConsumerOffset(Consumer.of(1), S, T, 0, 0)
        poll = raw.poll_payload("s", "t", 0, raw.STRATEGY_NEXT, 0, 10, auto_commit=True)
        sent = raw.send_messages_payload("s", "t", raw.partition_id(0), [raw.message(b"x")])
        statuses = [c.request(type(store_offset).CODE, store_offset.encode()).status,
                    c.request(raw.POLL_MESSAGES, poll).status,
                    c.request(raw.SEND_MESSAGES, sent).status]
        assert statuses == [3007, 3007, 3007]
        c.ping()
    assert "Traceback" not in server.output_path.read_text()
