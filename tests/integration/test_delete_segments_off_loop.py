"""DeleteSegments removes its files off the event loop and a crash never half deletes, on a
real server (posix and io_uring), the faults injected through ``TEST_LURCHER_IO_FAULT``
(``lurcher.core.log.faulty_io``).

Checked by the order of events, not by timing: while a slowed removal (``remove-slow@n``)
of a DeleteSegments is under way, another connection is served and already finds the
segments gone, and the DeleteSegments is answered only once the files are gone. (The old
handler unlinked the files on the shard's event loop: the other connection's ping was
answered after the deletion.) A server killed in the middle of the renames that set the
files aside (``rename-kill@n``), or while the worker thread removes them, restarts with a
prefix of the segments gone and every other message readable as sent: no segment set
aside comes back, none is served half there, no file set aside stays.
"""

from __future__ import annotations

import time

import pytest

from lurcher.core.log.faulty_io import SLOWED_REMOVAL
from lurcher.core.wire.requests.segments.delete_segments import DeleteSegments
from tests.integration.test_purge_faults import MESSAGES, PAYLOAD, S, T, call, connect, files
from tests.integration.test_purge_off_loop import WAIT_S, answered
from tests.support import raw
from tests.support.raw import PeerClosed, RawClient
from tests.support.server import LurcherServer, ServerFactory

IO_FAULT = "TEST_LURCHER_IO_FAULT"
EXIT_WAIT_S = 20.0
PER_SEGMENT = 3  # ``PAYLOAD`` messages per 64 KiB segment
DELETE_TWO = DeleteSegments(S, T, 0, 2)


def start(server_factory: ServerFactory, fault: str, io: str) -> LurcherServer:
    return server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": "64KiB", "LURCHER_SYSTEM_IO": io,
                           "LURCHER_SYSTEM_SHARDING_SHARDS": "1", IO_FAULT: fault})


def fill(c: RawClient) -> None:
    """One partition of ``MESSAGES`` messages in three segments."""
    c.create_stream("s")
    c.create_topic("s", "t", 1)
    for _ in range(MESSAGES):
        c.send("s", "t", raw.partition_id(0), [raw.message(PAYLOAD)])


def segment_files(first: int) -> list[str]:
    """The files of the segments from offset ``first`` on, as ``files`` lists them."""
    starts = range(first, MESSAGES, PER_SEGMENT)
    return sorted(f"{start:020d}.{suffix}" for start in starts for suffix in ("index", "log"))


def polled(c: RawClient) -> list:
    """The messages polled from offset 0 (polls of deleted offsets start at the first one
    kept)."""
    return c.poll("s", "t", 0, value=0, count=MESSAGES).messages


def wait_until_removal_started(server: LurcherServer) -> None:
    """Until the server logged that the slowed removal began (bounded by ``WAIT_S``)."""
    deadline = time.monotonic() + WAIT_S
    while SLOWED_REMOVAL not in server.log_tail(10**6):
        assert time.monotonic() < deadline, "the deletion's removal never began"
        time.sleep(0.01)


def assert_kept_from(server: LurcherServer, first: int) -> None:
    """Every message from ``first`` on is polled back as sent, none before it, and the
    partition directory holds those segments' files only."""
    with connect(server) as c:
        kept = polled(c)
        assert [m.offset for m in kept] == list(range(first, MESSAGES))
        assert all(m.payload == PAYLOAD for m in kept)
    assert files(server, 0) == segment_files(first)


@pytest.mark.parametrize("io", ["posix", "uring"])
def test_another_connection_is_served_while_delete_segments_removes_its_files(
        server_factory: ServerFactory, io: str) -> None:
    server = start(server_factory, "remove-slow@1", io)  # the first segment's log
    with connect(server) as deleting, connect(server) as other:
        fill(deleting)
        deleting.send_frame(DELETE_TWO.CODE, DELETE_TWO.encode())
        wait_until_removal_started(server)
        other.ping()
        assert [m.offset for m in polled(other)] == list(range(6, MESSAGES))
        assert not answered(deleting), "the others were served only once the deletion was done"
        assert deleting.read_response(WAIT_S).status == 0
        assert files(server, 0) == segment_files(6)  # answered once the files are gone
    assert "Traceback" not in server.log_tail(10**6)


# renames 1 and 2 set the first segment's log and index aside, 3 and 4 the second's
@pytest.mark.parametrize("kill_at, first_kept", [(1, 0), (2, 3), (3, 3), (4, 6)])
@pytest.mark.parametrize("io", ["posix", "uring"])
def test_server_killed_while_delete_segments_sets_files_aside_never_half_deletes(
        server_factory: ServerFactory, io: str, kill_at: int, first_kept: int) -> None:
    server = start(server_factory, f"rename-kill@{kill_at}", io)
    with connect(server) as c:
        fill(c)
        with pytest.raises((PeerClosed, ConnectionError)):
            call(c, DELETE_TWO)
    server.proc.wait(EXIT_WAIT_S)  # killed by the fault
    server.env.pop(IO_FAULT)
    server.restart()
    assert_kept_from(server, first_kept)
    assert "Traceback" not in server.log_tail(10**6)


@pytest.mark.parametrize("io", ["posix", "uring"])
def test_server_killed_while_delete_segments_removes_files_restarts_without_them(
        server_factory: ServerFactory, io: str) -> None:
    server = start(server_factory, "remove-slow@2", io)  # the first segment's index
    with connect(server) as c:
        fill(c)
        c.send_frame(DELETE_TWO.CODE, DELETE_TWO.encode())
        wait_until_removal_started(server)
        server.kill()
    server.env.pop(IO_FAULT)
    server.restart()
    assert_kept_from(server, 6)  # the files still set aside are removed at the start
    assert "Traceback" not in server.log_tail(10**6)
