"""A client's FlushUnsavedBuffer with fsync runs its fsyncs off the event loop, on a real
server (posix and io_uring): while a slowed fsync (``fsync-slow@n`` through
``TEST_LURCHER_IO_FAULT``, see ``lurcher.core.log.faulty_io``) is under way, another
connection is served, and the flush is answered only once its fsyncs are done. Checked by
the order of events, not by timing. (The old handler fsynced on the shard's event loop: the
other connection's ping was answered after the flush.)
"""

from __future__ import annotations

import time

import pytest

from lurcher.core.log.faulty_io import SLOWED_FSYNC
from lurcher.core.wire.requests.messages.flush_unsaved_buffer import FlushUnsavedBuffer
from tests.integration.test_purge_faults import S, T, connect
from tests.integration.test_purge_off_loop import WAIT_S, answered
from tests.support import raw
from tests.support.server import LurcherServer, ServerFactory

SLOW_FSYNC = "fsync-slow@1"  # without enforce_fsync the flush's fsync is the process's first


def wait_until_fsync_started(server: LurcherServer) -> None:
    """Until the server logged that the slowed fsync began (bounded by ``WAIT_S``)."""
    deadline = time.monotonic() + WAIT_S
    while SLOWED_FSYNC not in server.log_tail(10**6):
        assert time.monotonic() < deadline, "the flush's fsync never began"
        time.sleep(0.01)


@pytest.mark.parametrize("io", ["posix", "uring"])
def test_another_connection_is_served_while_a_flush_fsyncs(
        server_factory: ServerFactory, io: str) -> None:
    server = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": "1", "LURCHER_SYSTEM_IO": io,
                             "TEST_LURCHER_IO_FAULT": SLOW_FSYNC})
    with connect(server) as flushing, connect(server) as other:
        flushing.create_stream("s")
        flushing.create_topic("s", "t", 1)
        flushing.send("s", "t", raw.partition_id(0), [raw.message(b"kept")])
        request = FlushUnsavedBuffer(S, T, 0, True)
        flushing.send_frame(request.CODE, request.encode())
        wait_until_fsync_started(server)
        other.ping()
        assert not answered(flushing), "the others were served only once the flush was done"
        assert flushing.read_response(WAIT_S).status == 0
        assert [m.payload for m in other.poll_all("s", "t", 0)] == [b"kept"]
