"""PurgeTopic and PurgeStream whose files cannot all be removed, on a real server (one and
two shards, posix and io_uring), the faults injected through ``TEST_LURCHER_IO_FAULT``
(``lurcher.core.log.faulty_io``).

Checked: a segment file that cannot be set aside (``rename-eio``) answers CANNOT_DELETE_FILE
(10008, as Iggy 0.8) and each partition is purged whole or not at all: its messages all
still readable from the same files, or all gone; the others are purged all the same. A
restart shows the same state, and the purge asked again empties everything. A file set
aside that cannot be removed (``remove-eio``) does not stop the purge: it answers OK, every
partition is empty and takes messages from offset 0, and a start removes the file (one that
cannot does not stop the start). A stored consumer offset whose file cannot be removed
answers 10008 and keeps the offset and every message. No traceback in the log.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import GetConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import (
    StoreConsumerOffset,
)
from lurcher.core.wire.requests.streams.purge_stream import PurgeStream
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from lurcher.core.wire.values.consumer import Consumer
from tests.support import raw
from tests.support.raw import RawClient, StatusError
from tests.support.server import LurcherServer, ServerFactory

CANNOT_DELETE_FILE = 10008
IO_FAULT = "TEST_LURCHER_IO_FAULT"
S, T = Identifier.parse("s"), Identifier.parse("t")
PARTITIONS = 2
MESSAGES = 9  # three segments of 64 KiB per partition
PAYLOAD = b"x" * 30_000
FRESH = ["00000000000000000000.index", "00000000000000000000.log"]
PURGES = {"topic": PurgeTopic(S, T), "stream": PurgeStream(S)}


def call(c: RawClient, request) -> bytes:
    return c.call(type(request).CODE, request.encode())


def start(server_factory: ServerFactory, fault: str, shards: int, io: str) -> LurcherServer:
    return server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": "64KiB", "LURCHER_SYSTEM_IO": io,
                           "LURCHER_SYSTEM_SHARDING_SHARDS": str(shards), IO_FAULT: fault})


def connect(server: LurcherServer) -> RawClient:
    c = RawClient(server.tcp_address)
    c.login()
    return c


def fill(c: RawClient) -> None:
    c.create_stream("s")
    c.create_topic("s", "t", PARTITIONS)
    for partition in range(PARTITIONS):
        for _ in range(MESSAGES):
            c.send("s", "t", raw.partition_id(partition), [raw.message(PAYLOAD)])


def files(server: LurcherServer, partition: int) -> list[str]:
    """The file names in the partition's directory (its offsets directory left out)."""
    directory = server.data_dir / "streams" / "0" / "topics" / "0" / "partitions" / str(partition)
    return sorted(p.name for p in Path(directory).iterdir() if p.is_file())


def state(c: RawClient, server: LurcherServer) -> list[tuple[list[int], list[str]]]:
    """Per partition: the offsets polled back and the files on disk."""
    return [([m.offset for m in c.poll_all("s", "t", p)], files(server, p))
            for p in range(PARTITIONS)]


def refused(c: RawClient, request) -> int:
    with pytest.raises(StatusError) as caught:
        call(c, request)
    return caught.value.status


def restarted_state(server: LurcherServer) -> list[tuple[list[int], list[str]]]:
    server.env.pop(IO_FAULT, None)
    server.restart()
    with connect(server) as c:
        return state(c, server)


def assert_no_traceback(server: LurcherServer) -> None:
    assert "Traceback" not in server.log_tail(10**6)


@pytest.mark.parametrize("purge", sorted(PURGES))
@pytest.mark.parametrize("io", ["posix", "uring"])
@pytest.mark.parametrize("shards", [1, 2])
def test_purge_whose_segment_cannot_be_set_aside_keeps_that_partition_whole(
        server_factory: ServerFactory, shards: int, io: str, purge: str) -> None:
    server = start(server_factory, "rename-eio@3", shards, io)  # a partition's second segment
    with connect(server) as c:
        fill(c)
        full = state(c, server)
        assert refused(c, PURGES[purge]) == CANNOT_DELETE_FILE
        after = state(c, server)
        c.ping()
    kept = [p for p in range(PARTITIONS) if after[p] == full[p]]
    assert kept, "a purge answered 10008 but every partition is purged"
    assert all(after[p] == ([], FRESH) for p in range(PARTITIONS) if p not in kept), \
        f"a partition half-purged: {after}"
    assert restarted_state(server) == after
    with connect(server) as c:
        call(c, PURGES[purge])
        assert state(c, server) == [([], FRESH)] * PARTITIONS
    assert restarted_state(server) == [([], FRESH)] * PARTITIONS
    assert_no_traceback(server)


@pytest.mark.parametrize("io", ["posix", "uring"])
@pytest.mark.parametrize("shards", [1, 2])
def test_purge_whose_set_aside_file_stays_empties_every_partition(
        server_factory: ServerFactory, shards: int, io: str) -> None:
    server = start(server_factory, "remove-eio@1", shards, io)  # a set-aside log file
    with connect(server) as c:
        fill(c)
        call(c, PurgeTopic(S, T))
        assert [offsets for offsets, _ in state(c, server)] == [[]] * PARTITIONS
        for partition in range(PARTITIONS):
            c.send("s", "t", raw.partition_id(partition), [raw.message(b"after the purge")])
        assert [offsets for offsets, _ in state(c, server)] == [[0]] * PARTITIONS
    server.restart()  # the fault again: the leftover's removal at start fails, and is logged
    with connect(server) as c:
        assert [offsets for offsets, _ in state(c, server)] == [[0]] * PARTITIONS
    assert restarted_state(server) == [([0], FRESH)] * PARTITIONS  # the leftover is gone
    assert_no_traceback(server)


@pytest.mark.parametrize("shards", [1, 2])
def test_purge_whose_consumer_offset_file_stays_keeps_offset_and_messages(
        server_factory: ServerFactory, shards: int) -> None:
    server = start(server_factory, "remove-eio@1", shards, "posix")
    with connect(server) as c:
        fill(c)
        call(c, StoreConsumerOffset(Consumer.of(1), S, T, 0, 4))
        full = state(c, server)
        assert refused(c, PurgeTopic(S, T)) == CANNOT_DELETE_FILE
        assert state(c, server)[0] == full[0]
        assert stored_offset(c) == 4
    restarted = restarted_state(server)
    assert restarted[0] == full[0]
    with connect(server) as c:
        assert stored_offset(c) == 4
    assert_no_traceback(server)


def stored_offset(c: RawClient) -> int | None:
    """The offset consumer 1 stored on partition 0."""
    reply = call(c, GetConsumerOffset(Consumer.of(1), S, T, 0))
    return struct.unpack_from("<IQQ", reply)[2] if reply else None
