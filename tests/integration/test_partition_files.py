"""CreateTopic and CreatePartitions when a partition's files cannot be made, on a real server.

Checked: descriptors used up (the server's open-files limit lowered under it) answer
CANNOT_CREATE_PARTITION (3000) and a directory that cannot be made (a file in its place)
CANNOT_CREATE_PARTITION_DIRECTORY (3002), with no traceback in the log; nothing is recorded
(the same name is created once the cause is gone, and the topic has only the partitions
created); the server keeps answering; what is created afterwards takes messages at once,
and a restart keeps them and finds every partition directory. A consumer offset whose file
cannot be opened answers CANNOT_OPEN_CONSUMER_OFFSETS_FILE (3023) and keeps the stored one.
DeleteSegments of which a file cannot be renamed aside (``rename-eio`` injected through
``TEST_LURCHER_IO_FAULT``, one and two shards, posix and io_uring) answers
CANNOT_DELETE_FILE (10008) and keeps every segment, in memory as on disk (the files already
set aside put back); the same call afterwards deletes them. One whose file, set aside,
cannot be removed (``remove-eio``) is done: answered OK, the segments gone from polls, and
the file left is removed at the next start.
"""

from __future__ import annotations

import os
import resource
import struct
from pathlib import Path
from typing import Iterator

import pytest

from tests.support import admin, raw
from tests.support.raw import RawClient, StatusError
from tests.support.server import LurcherServer, ServerFactory

CANNOT_CREATE_PARTITION = 3000
CANNOT_CREATE_PARTITION_DIRECTORY = 3002
PARTITION_NOT_FOUND = 3007
CANNOT_OPEN_CONSUMER_OFFSETS_FILE = 3023
CANNOT_DELETE_FILE = 10008
DELETE_SEGMENTS = 503
STORE_CONSUMER_OFFSET = 121
GET_CONSUMER_OFFSET = 120
OPEN_FILES = 64
WAIT_S = 30.0
IO_FAULT = "TEST_LURCHER_IO_FAULT"


def refused(call, *args) -> int:
    """The error status ``call(*args)`` answers (fails when it succeeds)."""
    with pytest.raises(StatusError) as caught:
        call(*args)
    return caught.value.status


def hold_descriptors(server: LurcherServer) -> None:
    """Leave the server no descriptor to open: its soft open-files limit lowered (prlimit)
    to its lowest free descriptor number, so every new open or accept fails with EMFILE.
    (Idle connections cannot do it: the connection caps keep descriptors for storage.)"""
    open_now = {int(fd) for fd in os.listdir(f"/proc/{server.pid}/fd")}
    lowest_free = next(n for n in range(len(open_now) + 1) if n not in open_now)
    resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (lowest_free, OPEN_FILES))


def release_descriptors(server: LurcherServer) -> None:
    resource.prlimit(server.pid, resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))


def send_and_read(client: RawClient, topic: str, partition: int, payload: bytes) -> None:
    client.send("s", topic, raw.partition_id(partition), [raw.message(payload)])
    assert [m.payload for m in client.poll("s", topic, partition).messages] == [payload]


def assert_no_traceback(server: LurcherServer) -> None:
    assert "Traceback" not in server.log_tail(10**6)


@pytest.fixture
def few_descriptors(tmp_path: Path) -> Iterator[LurcherServer]:
    """A one-shard server limited to ``OPEN_FILES`` descriptors, stream "s" created."""
    with LurcherServer() as server:
        server.open_files_limit = (OPEN_FILES, OPEN_FILES)
        server.start(tmp_path / "data", {"LURCHER_SYSTEM_SHARDING_SHARDS": "1"})
        with RawClient(server.tcp_address) as c:
            c.login()
            c.create_stream("s")
        yield server


def test_create_topic_out_of_descriptors_records_nothing(
        few_descriptors: LurcherServer) -> None:
    server = few_descriptors
    with RawClient(server.tcp_address) as c:
        c.login()
        hold_descriptors(server)
        try:
            assert refused(c.create_topic, "s", "t", 2) == CANNOT_CREATE_PARTITION
        finally:
            release_descriptors(server)
        c.create_topic("s", "t", 2)  # no TOPIC_NAME_ALREADY_EXISTS: nothing recorded
        send_and_read(c, "t", 1, b"after descriptors came back")
    assert_no_traceback(server)
    server.restart()
    assert "is missing" not in server.log_tail(10**6)
    with RawClient(server.tcp_address) as c:
        c.login()
        assert [m.payload for m in c.poll("s", "t", 1).messages] == [
            b"after descriptors came back"]


def block_directory(server: LurcherServer, *ids: int) -> Path:
    """A regular file where the directory ``streams/<s>/topics/<t>[/partitions/<p>]``
    goes, so that it cannot be made (EACCES does not stop root; this stops anyone)."""
    path = server.data_dir / "streams" / str(ids[0]) / "topics" / str(ids[1])
    if len(ids) == 3:
        path = path / "partitions" / str(ids[2])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"in the way")
    return path


def test_topic_and_partitions_whose_directories_cannot_be_made(
        server_factory: ServerFactory) -> None:
    server = server_factory()
    with RawClient(server.tcp_address) as c:
        c.login()
        c.create_stream("s")
        blocker = block_directory(server, 0, 0)
        assert refused(c.create_topic, "s", "t", 1) == CANNOT_CREATE_PARTITION_DIRECTORY
        blocker.unlink()
        c.create_topic("s", "t", 1)
        blocker = block_directory(server, 0, 0, 1)
        assert refused(admin.create_partitions, c, "s", "t", 2) == \
            CANNOT_CREATE_PARTITION_DIRECTORY
        assert refused(c.send, "s", "t", raw.partition_id(1), [raw.message(b"x")]) == \
            PARTITION_NOT_FOUND  # the topic still has its one partition
        assert not (blocker.parent / "2").exists()  # what the refused command made is gone
        blocker.unlink()
        admin.create_partitions(c, "s", "t", 2)
        send_and_read(c, "t", 2, b"to the third partition")
    assert_no_traceback(server)


def offset_request(consumer: int, partition: int) -> bytes:
    """Consumer ``consumer``, stream "s", topic "t", partition ``partition``."""
    return (b"\x01" + raw.ident(consumer) + raw.ident("s") + raw.ident("t") + b"\x01"
            + struct.pack("<I", partition))


def stored_offset(client: RawClient, consumer: int) -> int:
    """The offset consumer ``consumer`` stored on partition 0 (GetConsumerOffset: partition
    id u32, current offset u64, stored offset u64)."""
    return struct.unpack_from("<IQQ", client.call(GET_CONSUMER_OFFSET,
                                                  offset_request(consumer, 0)))[2]


def test_consumer_offset_out_of_descriptors_keeps_the_stored_one(
        few_descriptors: LurcherServer) -> None:
    server = few_descriptors
    with RawClient(server.tcp_address) as c:
        c.login()
        c.create_topic("s", "t", 1)
        c.send("s", "t", raw.partition_id(0), [raw.message(b"a"), raw.message(b"b")])
        c.call(STORE_CONSUMER_OFFSET, offset_request(1, 0) + struct.pack("<Q", 0))
        hold_descriptors(server)
        try:
            assert refused(c.call, STORE_CONSUMER_OFFSET,
                           offset_request(1, 0) + struct.pack("<Q", 1)) == \
                CANNOT_OPEN_CONSUMER_OFFSETS_FILE
            c.ping()
        finally:
            release_descriptors(server)
        assert stored_offset(c, 1) == 0
    assert_no_traceback(server)


def segment_logs(server: LurcherServer) -> list[str]:
    """The names of the .log files in partition 0 of stream 0, topic 0."""
    directory = server.data_dir / "streams" / "0" / "topics" / "0" / "partitions" / "0"
    return sorted(p.name for p in directory.glob("*.log"))


DELETE_TWO = raw.ident("s") + raw.ident("t") + struct.pack("<II", 0, 2)  # partition 0


def three_segments(server_factory: ServerFactory, io: str, fault: str,
                   shards: int = 1) -> LurcherServer:
    """A server with ``fault`` injected and partition 0 of "s"/"t" holding nine messages,
    three per 64 KiB segment."""
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": "64KiB", "LURCHER_SYSTEM_IO": io,
                             "LURCHER_SYSTEM_SHARDING_SHARDS": str(shards), IO_FAULT: fault})
    with RawClient(server.tcp_address) as c:
        c.login()
        c.create_stream("s")
        c.create_topic("s", "t", 1)
        for _ in range(9):
            c.send("s", "t", raw.partition_id(0), [raw.message(b"x" * 30_000)])
    return server


def first_offsets(c: RawClient) -> list[int]:
    return [m.offset for m in c.poll("s", "t", 0, raw.STRATEGY_FIRST, 0, 10).messages]


@pytest.mark.parametrize("io", ["posix", "uring"])
@pytest.mark.parametrize("shards", [1, 2])
def test_delete_segments_that_cannot_be_set_aside_keeps_them(server_factory: ServerFactory,
                                                             shards: int, io: str) -> None:
    # rename 3 sets the second segment's log aside: the first segment's files are put back
    server = three_segments(server_factory, io, "rename-eio@3", shards)
    logs = segment_logs(server)
    with RawClient(server.tcp_address) as c:
        c.login()
        assert refused(c.call, DELETE_SEGMENTS, DELETE_TWO) == CANNOT_DELETE_FILE
        assert len(c.poll_all("s", "t", 0)) == 9
        assert segment_logs(server) == logs
        c.call(DELETE_SEGMENTS, DELETE_TWO)  # the fault fires once
        assert first_offsets(c) == [6, 7, 8]  # offsets 0-5 are gone
        assert segment_logs(server) == logs[2:]
    assert_no_traceback(server)


@pytest.mark.parametrize("io", ["posix", "uring"])
def test_delete_segments_whose_files_cannot_be_removed_deletes_them(
        server_factory: ServerFactory, io: str) -> None:
    # removal 1: the first segment's log, set aside
    server = three_segments(server_factory, io, "remove-eio@1")
    logs = segment_logs(server)
    with RawClient(server.tcp_address) as c:
        c.login()
        c.call(DELETE_SEGMENTS, DELETE_TWO)
        assert first_offsets(c) == [6, 7, 8]
    assert segment_logs(server) == logs[2:]
    left = server.data_dir / "streams" / "0" / "topics" / "0" / "partitions" / "0"
    assert [p.name for p in left.glob("*.purged")] == [logs[0] + ".purged"]
    server.env.pop(IO_FAULT)
    server.restart()
    assert not list(left.glob("*.purged"))
    with RawClient(server.tcp_address) as c:
        c.login()
        assert first_offsets(c) == [6, 7, 8]
    assert_no_traceback(server)
