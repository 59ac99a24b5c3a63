"""With ``enforce_fsync`` (group commit) a segment created by a send is on the device before
that send is acknowledged: its directory is fsynced in the round (a new file's name is durable
only then). A failing directory fsync (``dirsync-eio@n`` through ``TEST_LURCHER_IO_FAULT``,
``lurcher.core.log.faulty_io``) fails the send with CannotSyncFile (10009), as a failing file
fsync does, on a real server.
"""

from __future__ import annotations

import pytest

from tests.integration.test_purge_crash import MESSAGES, PAYLOAD, connect, start
from tests.support import raw
from tests.support.raw import StatusError
from tests.support.server import ServerFactory

CANNOT_SYNC_FILE = 10009


def test_a_send_into_a_new_segment_waits_for_the_directory_fsync(
        server_factory: ServerFactory) -> None:
    """A new segment's files are on the device only once the directory is fsynced: with
    that fsync failing, the first send into the new segment is not acknowledged."""
    server = start(server_factory, "dirsync-eio@1", fsync=True)
    with connect(server) as c:
        c.create_stream("s")
        c.create_topic("s", "t", 1)
        for _ in range(3):  # the first segment: 3 messages of 30 kB pass its 64 KiB
            c.send("s", "t", raw.partition_id(0), [raw.message(PAYLOAD)])
        with pytest.raises(StatusError) as caught:
            c.send("s", "t", raw.partition_id(0), [raw.message(PAYLOAD)])
        assert caught.value.status == CANNOT_SYNC_FILE
        polled = c.poll("s", "t", 0, value=0, count=MESSAGES).messages
        assert [m.offset for m in polled] == [0, 1, 2]
    assert "Traceback" not in server.log_tail(10**6)
