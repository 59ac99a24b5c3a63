"""A purge's directory fsyncs and its marker's creation run off the event loop, on a real
server with ``enforce_fsync`` (posix and io_uring), as does the directory fsync after a
DeleteSegments: while a slowed directory fsync of the purge or deletion
(``dirsync-slow@n`` through ``TEST_LURCHER_IO_FAULT``, see ``lurcher.core.log.faulty_io``)
is under way, another connection is served, and the purge (or deletion) is answered only
once it is done. Checked by the order of events, not by timing: the other connection's
ping is answered before the fault logs that the slowed fsync is over. (The old purge and
deletion fsynced the directories on the shard's event loop: the other connection's ping
was answered after the fsync was over.)
"""

from __future__ import annotations

import time

import pytest

from lurcher.core.log.faulty_io import SLOWED_DIRSYNC, SLOWED_DIRSYNC_OVER
from lurcher.core.wire.requests.segments.delete_segments import DeleteSegments
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from tests.integration.test_purge_crash import AFTER_FILL_DIRSYNC, MESSAGES, fill
from tests.integration.test_purge_faults import FRESH, S, T, connect, files
from tests.integration.test_purge_off_loop import WAIT_S, answered
from tests.support import raw
from tests.support.server import LurcherServer, ServerFactory

FSYNC = "LURCHER_SYSTEM_PARTITION_ENFORCE_FSYNC"
# one segment, created with the partition: the purge's directory fsyncs are the first ones,
# 1 the marker's (before any change), 2 the partition directory's after the renames
MARKER_DIRSYNC, AFTER_RENAMES_DIRSYNC = 1, 2


def wait_until_dirsync_started(server: LurcherServer) -> None:
    """Until the server logged that the slowed directory fsync began (bounded)."""
    deadline = time.monotonic() + WAIT_S
    while SLOWED_DIRSYNC not in server.log_tail(10**6):
        assert time.monotonic() < deadline, "the purge's directory fsync never began"
        time.sleep(0.01)


def assert_served_during_the_slowed_fsync(server: LurcherServer, other: raw.RawClient) -> None:
    other.ping()
    assert SLOWED_DIRSYNC_OVER not in server.log_tail(10**6), \
        "the others were served only once the slowed directory fsync was over"


def start_purge_of_one_message(server: LurcherServer, purging: raw.RawClient) -> None:
    """Topic s/t with one message; send its PurgeTopic (not reading the answer) and wait
    until the slowed directory fsync began."""
    purging.create_stream("s")
    purging.create_topic("s", "t", 1)
    purging.send("s", "t", raw.partition_id(0), [raw.message(b"purged")])
    request = PurgeTopic(S, T)
    purging.send_frame(request.CODE, request.encode())
    wait_until_dirsync_started(server)


@pytest.mark.parametrize("slowed", [MARKER_DIRSYNC, AFTER_RENAMES_DIRSYNC])
@pytest.mark.parametrize("io", ["posix", "uring"])
def test_another_connection_is_served_while_a_purge_fsyncs_a_directory(
        server_factory: ServerFactory, io: str, slowed: int) -> None:
    server = server_factory({"LURCHER_SYSTEM_IO": io, FSYNC: "true",
                             "TEST_LURCHER_IO_FAULT": f"dirsync-slow@{slowed}"})
    with connect(server) as purging, connect(server) as other:
        start_purge_of_one_message(server, purging)
        assert_served_during_the_slowed_fsync(server, other)
        assert not answered(purging)
        assert purging.read_response(WAIT_S).status == 0
        assert other.poll_all("s", "t", 0) == []
        assert files(server, 0) == FRESH
        other.send("s", "t", raw.partition_id(0), [raw.message(b"after")])
        assert [m.payload for m in other.poll_all("s", "t", 0)] == [b"after"]
    assert "Traceback" not in server.log_tail(10**6)


def test_a_send_during_the_purges_last_fsyncs_is_stored_after_it(
        server_factory: ServerFactory) -> None:
    """A send that comes while the purge fsyncs the directories after its renames waits
    for them and is stored after the purge, from offset 0 (and kept by a restart)."""
    server = server_factory({FSYNC: "true",
                             "TEST_LURCHER_IO_FAULT": f"dirsync-slow@{AFTER_RENAMES_DIRSYNC}"})
    with connect(server) as purging, connect(server) as sending:
        start_purge_of_one_message(server, purging)
        sending.send("s", "t", raw.partition_id(0), [raw.message(b"after")])
        assert purging.read_response(WAIT_S).status == 0
        assert [(m.offset, m.payload) for m in sending.poll_all("s", "t", 0)] == [(0, b"after")]
    server.restart()
    with connect(server) as c:
        assert [(m.offset, m.payload) for m in c.poll_all("s", "t", 0)] == [(0, b"after")]


def test_another_connection_is_served_while_delete_segments_fsyncs_the_directory(
        server_factory: ServerFactory) -> None:
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": "64KiB", FSYNC: "true",
                             "TEST_LURCHER_IO_FAULT": f"dirsync-slow@{AFTER_FILL_DIRSYNC}"})
    with connect(server) as deleting, connect(server) as other:
        fill(deleting)
        request = DeleteSegments(S, T, 0, 1)  # the first segment: offsets 0..2
        deleting.send_frame(request.CODE, request.encode())
        wait_until_dirsync_started(server)
        assert_served_during_the_slowed_fsync(server, other)
        assert not answered(deleting)
        assert deleting.read_response(WAIT_S).status == 0
        offsets = [m.offset for m in other.poll("s", "t", 0, value=0, count=MESSAGES).messages]
        assert offsets == list(range(3, MESSAGES))
