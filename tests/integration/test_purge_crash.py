"""A purge that a crash or a failed directory fsync interrupts, on a real server: never half
done, and with ``enforce_fsync`` on the device once answered.

The faults come through ``TEST_LURCHER_IO_FAULT`` (``lurcher.core.log.faulty_io``):
``rename-kill@n`` kills the server at its n-th rename (a purge sets its segment files aside
by renaming them, then its marker), ``rename-eio@n`` fails its n-th rename,
``dirsync-eio@n`` its n-th directory fsync.

Checked: a server killed anywhere in a purge's renames comes back with the partition fully
purged (no message pollable, the stored consumer offset gone, only an empty segment at 0,
sends from offset 0), never with some segments gone and the later ones still served; a
start that cannot finish such a purge (``remove-eio``) is refused with one line naming it,
and the next one finishes it. A purge whose marker cannot be set aside is done and answered, and the partition refuses sends
(CannotWriteToFile, 10006) until a restart, which finds it purged. With ``enforce_fsync``
a purge fsyncs the partition directory: one whose first directory fsync (the marker's)
fails answers CannotDeleteFile (10008) and keeps every message and the offset; one whose
fsync after the changes fails is done and answered, and the partition refuses sends until a
restart, which finds it purged. DeleteSegments fsyncs the directory too (a failure is
logged: the segments are gone). A purge is answered only after the stored offsets' changes
queued before it are undone on the device (a crash right after the answer keeps none).
"""

from __future__ import annotations

import struct

import pytest

from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_offsets.get_consumer_offset import GetConsumerOffset
from lurcher.core.wire.requests.consumer_offsets.store_consumer_offset import (
    StoreConsumerOffset,
)
from lurcher.core.wire.requests.segments.delete_segments import DeleteSegments
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from lurcher.core.wire.values.consumer import Consumer
from tests.integration.test_flush_off_loop import wait_until_fsync_started
from tests.integration.test_purge_faults import (FRESH, MESSAGES, PAYLOAD, call, connect,
                                                 files, refused)
from tests.support import raw
from tests.support.raw import PeerClosed, RawClient, StatusError
from tests.support.server import LurcherServer, ServerFactory, run_server_to_exit

CANNOT_DELETE_FILE = 10008
CANNOT_WRITE_TO_FILE = 10006
IO_FAULT = "TEST_LURCHER_IO_FAULT"
FSYNC = "LURCHER_SYSTEM_PARTITION_ENFORCE_FSYNC"
S, T = Identifier.parse("s"), Identifier.parse("t")
EXIT_WAIT_S = 20.0
STORED = 4  # the offset consumer 1 stores before the purge
AFTER_FILL_DIRSYNC = 3  # the first directory fsync after ``fill`` (1 and 2: its new segments)


def start(server_factory: ServerFactory, fault: str, io: str = "posix",
          fsync: bool = False) -> LurcherServer:
    return server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": "64KiB", "LURCHER_SYSTEM_IO": io,
                           FSYNC: str(fsync).lower(), IO_FAULT: fault})


def fill(c: RawClient) -> None:
    """One partition of three segments, and consumer 1's offset stored at ``STORED``."""
    c.create_stream("s")
    c.create_topic("s", "t", 1)
    for _ in range(MESSAGES):
        c.send("s", "t", raw.partition_id(0), [raw.message(PAYLOAD)])
    call(c, StoreConsumerOffset(Consumer.of(1), S, T, 0, STORED))


def stored_offset(c: RawClient) -> int | None:
    reply = call(c, GetConsumerOffset(Consumer.of(1), S, T, 0))
    return struct.unpack_from("<IQQ", reply)[2] if reply else None


def restart_without_fault(server: LurcherServer) -> None:
    server.env.pop(IO_FAULT, None)
    if server.running:
        server.kill()
    server.restart()


def assert_purged(server: LurcherServer) -> None:
    """Empty, the offset gone, only the fresh segment, and a send gets offset 0."""
    with connect(server) as c:
        assert [m.offset for m in c.poll_all("s", "t", 0)] == []
        assert stored_offset(c) is None
        assert files(server, 0) == FRESH
        c.send("s", "t", raw.partition_id(0), [raw.message(b"after")])
        assert [m.offset for m in c.poll_all("s", "t", 0)] == [0]


# rename 1 is the offset store; 2..7 set aside the three segments' log and index files
@pytest.mark.parametrize("kill_at", [2, 3, 4, 7])
@pytest.mark.parametrize("io", ["posix", "uring"])
def test_server_killed_midway_through_a_purge_restarts_fully_purged(
        server_factory: ServerFactory, io: str, kill_at: int) -> None:
    server = start(server_factory, f"rename-kill@{kill_at}", io)
    with connect(server) as c:
        fill(c)
        with pytest.raises((PeerClosed, ConnectionError)):
            call(c, PurgeTopic(S, T))
    server.proc.wait(EXIT_WAIT_S)  # killed by the fault
    restart_without_fault(server)
    assert_purged(server)
    assert "a purge was interrupted" in server.log_tail(10**6)
    server.restart()
    with connect(server) as c:  # what was sent after the purge stays
        assert [m.offset for m in c.poll_all("s", "t", 0)] == [0]


# rename-eio@8: rename 1 is the offset store, 2..7 set the segment files aside, 8 the
# marker; dirsync-eio@4: the fsync of the partition directory after the changes (see
# ``AFTER_FILL_DIRSYNC``)
@pytest.mark.parametrize("fault, fsync", [("rename-eio@8", False),
                                          (f"dirsync-eio@{AFTER_FILL_DIRSYNC + 1}", True)])
def test_purge_not_finished_on_disk_refuses_sends_until_restart(
        server_factory: ServerFactory, fault: str, fsync: bool) -> None:
    server = start(server_factory, fault, fsync=fsync)
    with connect(server) as c:
        fill(c)
        call(c, PurgeTopic(S, T))
        assert c.poll_all("s", "t", 0) == []
        with pytest.raises(StatusError) as caught:
            c.send("s", "t", raw.partition_id(0), [raw.message(b"would be purged")])
        assert caught.value.status == CANNOT_WRITE_TO_FILE
    restart_without_fault(server)
    assert_purged(server)
    assert "Traceback" not in server.log_tail(10**6)


def test_purge_whose_first_directory_fsync_fails_changes_nothing(
        server_factory: ServerFactory) -> None:
    server = start(server_factory, f"dirsync-eio@{AFTER_FILL_DIRSYNC}", fsync=True)
    with connect(server) as c:
        fill(c)
        before = c.poll_all("s", "t", 0)
        assert refused(c, PurgeTopic(S, T)) == CANNOT_DELETE_FILE
        assert c.poll_all("s", "t", 0) == before
        assert stored_offset(c) == STORED
        call(c, PurgeTopic(S, T))  # the fault fires once
        assert c.poll_all("s", "t", 0) == []
    assert "Traceback" not in server.log_tail(10**6)


def test_delete_segments_fsyncs_the_directory(server_factory: ServerFactory) -> None:
    server = start(server_factory, f"dirsync-eio@{AFTER_FILL_DIRSYNC}", fsync=True)
    with connect(server) as c:
        fill(c)
        call(c, DeleteSegments(S, T, 0, 1))  # below the stored offset (4): offsets 0..2
        polled = c.poll("s", "t", 0, value=0, count=MESSAGES).messages  # from the first kept
        assert [m.offset for m in polled] == list(range(3, MESSAGES))
    assert "segments deleted, but the directory fsync failed" in server.log_tail(10**6)
    assert "Traceback" not in server.log_tail(10**6)


# fsync-slow@4 with enforce_fsync: 1 and 2 are the send's (log, index), 3 the stored offset's
# temporary file, 4 its directory after the rename (the offset file is there by then)
def test_purge_answered_only_once_an_offset_store_queued_before_it_is_removed(
        server_factory: ServerFactory) -> None:
    """A consumer offset whose store is still on the offsets thread when the partition is
    purged: the purge is answered only once the removal queued behind it is done, so a
    crash right after the answer does not bring the offset back. (Messages are sent after
    the purge, so a start keeps such an offset instead of dropping it as past the log.)"""
    server = start(server_factory, "fsync-slow@4", fsync=True)
    with connect(server) as storing, connect(server) as purging:
        storing.create_stream("s")
        storing.create_topic("s", "t", 1)
        storing.send("s", "t", raw.partition_id(0), [raw.message(PAYLOAD)])
        store = StoreConsumerOffset(Consumer.of(1), S, T, 0, 0)
        storing.send_frame(store.CODE, store.encode())
        wait_until_fsync_started(server)
        call(purging, PurgeTopic(S, T))
        purging.send("s", "t", raw.partition_id(0), [raw.message(b"after")] * 2)
    restart_without_fault(server)  # killed: a crash right after the answer
    with connect(server) as c:
        assert [m.payload for m in c.poll_all("s", "t", 0)] == [b"after"] * 2
        assert stored_offset(c) is None, "the offset stored before the purge came back"


def test_start_that_cannot_finish_an_interrupted_purge_refuses_in_one_line(
        server_factory: ServerFactory) -> None:
    """A purge interrupted by a crash is finished at the next start; a start whose removal of
    the purged files fails is refused with one line naming the partition (exit 1, no
    traceback), touching nothing more, and the start after it finishes the purge."""
    server = start(server_factory, "rename-kill@3")
    with connect(server) as c:
        fill(c)
        with pytest.raises((PeerClosed, ConnectionError)):
            call(c, PurgeTopic(S, T))
    server.proc.wait(EXIT_WAIT_S)  # killed by the fault, the purge half done
    env = {**server.env, IO_FAULT: "remove-eio@1"}
    refused_start = run_server_to_exit(server.args, env, cwd=server.data_dir)
    assert refused_start.returncode == 1 and "Traceback" not in refused_start.stderr
    last = refused_start.stderr.strip().splitlines()[-1]
    assert "cannot start:" in last and "interrupted purge" in last, refused_start.stderr
    assert str(server.data_dir / "streams") in last
    restart_without_fault(server)
    assert_purged(server)
