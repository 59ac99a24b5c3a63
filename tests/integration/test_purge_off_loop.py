"""A purge's file removals run off the event loop, on a real server (posix and io_uring):
while a slowed removal (``remove-slow@n`` through ``TEST_LURCHER_IO_FAULT``, see
``lurcher.core.log.faulty_io``) is under way, another connection is served, and the purge is
answered only once its files are gone. Checked by the order of events, not by timing.
"""

from __future__ import annotations

import select
import time

import pytest

from tests.integration.test_purge_faults import (FRESH, MESSAGES, PAYLOAD, S, T, connect,
                                                 files)
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from tests.support import raw
from tests.support.server import LurcherServer, ServerFactory

WAIT_S = 20.0


def wait_for_set_aside(server: LurcherServer) -> None:
    """Until the partition directory holds a file set aside by a purge (bounded by
    ``WAIT_S``)."""
    deadline = time.monotonic() + WAIT_S
    while not any(name.endswith(".purged") for name in files(server, 0)):
        assert time.monotonic() < deadline, f"nothing set aside: {files(server, 0)}"
        time.sleep(0.01)


def answered(c: raw.RawClient) -> bool:
    """Whether a reply is waiting on ``c``'s socket (without reading it)."""
    return bool(select.select([c.sock], [], [], 0)[0])


@pytest.mark.parametrize("io", ["posix", "uring"])
def test_another_connection_is_served_while_a_purge_removes_its_files(
        server_factory: ServerFactory, io: str) -> None:
    # removal 1 is the purge's marker (on the loop), 2 the first segment's log set aside
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": "64KiB", "LURCHER_SYSTEM_IO": io,
                             "TEST_LURCHER_IO_FAULT": "remove-slow@2"})
    with connect(server) as purging, connect(server) as other:
        purging.create_stream("s")
        purging.create_topic("s", "t", 1)
        for _ in range(MESSAGES):
            purging.send("s", "t", raw.partition_id(0), [raw.message(PAYLOAD)])
        request = PurgeTopic(S, T)
        purging.send_frame(request.CODE, request.encode())
        wait_for_set_aside(server)  # the purge is under way
        other.ping()
        assert other.poll_all("s", "t", 0) == []  # already purged for everyone else
        assert not answered(purging), "the others were served only once the purge was done"
        assert purging.read_response(WAIT_S).status == 0
        assert files(server, 0) == FRESH
