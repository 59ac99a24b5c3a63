"""Storage faults injected through the storage interface (``TEST_LURCHER_IO_FAULT``, see
``lurcher.core.log.faulty_io``) into a real server, over the posix and io_uring backends,
with segment files written through the page cache and with O_DIRECT.

Checked, for EIO on a batch write, a short (torn) batch write, and a failed group-commit
fsync with ``enforce_fsync``: the affected send is refused with a clear code (10006
CannotWriteToFile for writes, 10009 CannotSyncFile for the fsync), the refused batch is not
in the log (polls never show it); after a write fault later sends succeed, after a failed
fsync the partition refuses writes (10006) until the server restarts (the page cache is
suspect); after a SIGKILL and a restart without the fault every acknowledged message is
polled back byte for byte and in order, and the partition takes writes again.
"""

from __future__ import annotations

import pytest

from lurcher.core.wire.errors import IggyError
from lurcher.sdk import Client
from tests.support.raw import RawClient, StatusError, message, partition_id
from tests.support.server import LurcherServer

CANNOT_WRITE_TO_FILE = 10006
CANNOT_SYNC_FILE = 10009
FAULT_ENV = "TEST_LURCHER_IO_FAULT"
STREAM, TOPIC = "faults", "t"
MESSAGES_PER_SEND = 5
SENDS = 5
FAILING_SEND = 3

# fault -> (fault spec, enforce_fsync, code of the failing send, code of later sends or None)
FAULTS = {
    "write-eio": (f"write-eio@{FAILING_SEND}", False, CANNOT_WRITE_TO_FILE, None),
    "short-write": (f"short-write@{FAILING_SEND}", False, CANNOT_WRITE_TO_FILE, None),
    # with enforce_fsync a failed write fails its send before any fsync is asked for
    "write-eio-durable": (f"write-eio@{FAILING_SEND}", True, CANNOT_WRITE_TO_FILE, None),
    # group commit: two fsyncs (log, index) per send, so send k's first one is 2k - 1
    "fsync-eio": (f"fsync-eio@{2 * FAILING_SEND - 1}", True, CANNOT_SYNC_FILE,
                  CANNOT_WRITE_TO_FILE),
}


def payloads(send: int) -> list[bytes]:
    return [f"send {send} message {i} ".encode().ljust(300 + 37 * i, b"~")
            for i in range(MESSAGES_PER_SEND)]


def send(client: RawClient, number: int) -> int | None:
    """Send batch ``number``; None when acknowledged, else the error status."""
    try:
        client.send(STREAM, TOPIC, partition_id(0), [message(p) for p in payloads(number)])
    except StatusError as exc:
        return exc.status
    return None


def stored(server: LurcherServer) -> list[bytes]:
    with RawClient(server.tcp_address) as client:
        client.login()
        polled = client.poll_all(STREAM, TOPIC, 0)
    assert [m.offset for m in polled] == list(range(len(polled))), "offsets not dense"
    return [m.payload for m in polled]


# How a batch reaches the file: (direct_io, inline_write_max_bytes). Through the page cache a
# small batch on an idle partition is written on the event loop by default ("inline");
# with 0 every write goes to the writer thread or the io_uring ring; O_DIRECT never inline.
WRITE_PATHS = {
    "page-cache-inline": (False, "65536"),
    "page-cache-async": (False, "0"),
    "direct": (True, "65536"),
}


@pytest.mark.parametrize("write_path", sorted(WRITE_PATHS))
@pytest.mark.parametrize("io", ["posix", "uring"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_storage_fault_fails_the_send_and_loses_nothing_acknowledged(server_factory, io: str,
                                                                     fault: str,
                                                                     write_path: str) -> None:
    spec, enforce_fsync, failing_code, later_code = FAULTS[fault]
    direct_io, inline_max = WRITE_PATHS[write_path]
    server = server_factory({
        "LURCHER_SYSTEM_IO": io,
        "LURCHER_SYSTEM_SEGMENT_DIRECT_IO": str(direct_io).lower(),
        "LURCHER_SYSTEM_PARTITION_INLINE_WRITE_MAX_BYTES": inline_max,
        "LURCHER_SYSTEM_SHARDING_SHARDS": "1",
        "LURCHER_SYSTEM_PARTITION_ENFORCE_FSYNC": str(enforce_fsync).lower(),
        FAULT_ENV: spec,
    })
    acknowledged: list[bytes] = []
    with RawClient(server.tcp_address) as client:
        client.login()
        client.create_stream(STREAM)
        client.create_topic(STREAM, TOPIC, 1)
        for number in range(1, SENDS + 1):
            status = send(client, number)
            expected = (None if number < FAILING_SEND else failing_code if number == FAILING_SEND
                        else later_code)
            assert status == expected, f"send {number}: status {status}, expected {expected}"
            if status is None:
                acknowledged += payloads(number)
        client.ping()  # the connection and the server survive the fault
    assert stored(server) == acknowledged, "the log differs from what was acknowledged"

    del server.env[FAULT_ENV]
    server.restart(crash=True)
    assert stored(server) == acknowledged, "acknowledged messages changed across a restart"
    with RawClient(server.tcp_address) as client:
        client.login()
        assert send(client, SENDS + 1) is None, "the partition refuses writes after restart"
    assert stored(server) == acknowledged + payloads(SENDS + 1)


async def test_a_failed_fsync_of_flush_unsaved_buffer_is_cannot_write_to_file(
        server_factory) -> None:
    """FlushUnsavedBuffer with fsync whose fsync fails: the old code let the OSError out of
    the handler, answered Error (1) and logged a traceback. 0.8 answers CannotWriteToFile
    (core/common/src/types/segment_storage/messages_writer.rs, fsync); so does lurcher now,
    with one log line; the connection goes on and the next flush fsyncs."""
    server = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": "1",
                             FAULT_ENV: "fsync-eio@1"})
    async with Client(server.tcp_address, username="iggy", password="iggy") as client:
        await client.create_stream(STREAM)
        await client.create_topic(STREAM, TOPIC, 1)
        await client.send_messages(STREAM, TOPIC, payloads(1), partitioning=0)
        with pytest.raises(IggyError) as refused:
            await client.flush_unsaved_buffer(STREAM, TOPIC, 0, True)
        assert refused.value.status == CANNOT_WRITE_TO_FILE
        await client.flush_unsaved_buffer(STREAM, TOPIC, 0, True)
    output = server.log_tail(10**6)
    assert "Traceback" not in output
    assert output.count("FlushUnsavedBuffer on") == 1


def test_a_poll_of_a_segment_that_cannot_be_opened_is_cannot_read_file(server_factory) -> None:
    """A sealed segment's log removed under the server, its descriptor no longer cached
    (``max_open_files`` 4, four segments): the old code let the OSError of the open out of
    the poll handler, answered Error (1) and logged a traceback. Now CannotReadFile (10002)
    with one warning, as stored bytes that cannot be read are; the connection goes on and
    the other segments are served."""
    server = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": "1",
                             "LURCHER_SYSTEM_SEGMENT_SIZE": "2000 B",
                             "LURCHER_SYSTEM_SEGMENT_MAX_OPEN_FILES": "4"})
    with RawClient(server.tcp_address) as client:
        client.login()
        client.create_stream(STREAM)
        client.create_topic(STREAM, TOPIC, 1)
        for number in range(1, 5):  # a segment each
            assert send(client, number) is None
        logs = sorted(p for p in server.data_dir.rglob("*.log") if "partitions" in p.parts)
        assert len(logs) == 4
        logs[0].unlink()
        with pytest.raises(StatusError) as refused:
            client.poll(STREAM, TOPIC, 0, value=0, count=3)
        assert refused.value.status == 10002
        later = client.poll(STREAM, TOPIC, 0, value=3 * MESSAGES_PER_SEND, count=1)
        assert [m.payload for m in later.messages] == payloads(4)[:1]
    output = server.log_tail(10**6)
    assert "Traceback" not in output and output.count("cannot read a reply") == 1
