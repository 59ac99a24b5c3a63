"""Requests a client sends while an earlier reply is still awaited, on a real server over
TCP: the connection no longer stops reading for every awaited reply (``ServerConnection``
pauses only once input is pending behind one), so the bytes of a pipelined request are
read while the first waits. Here the first send waits for its fsync (``enforce_fsync``, the
fsync slowed by ``TEST_LURCHER_IO_FAULT``); a second send and a ping are sent meanwhile.
All three are answered in order, and both sends are stored exactly as sent.
(tests/unit/test_connection_core.py shows, without sockets, that the awaited frame's bytes
are left alone by what is read meanwhile.)
"""

from __future__ import annotations

from tests.integration.test_flush_off_loop import wait_until_fsync_started
from tests.integration.test_purge_faults import connect
from tests.integration.test_purge_off_loop import WAIT_S, answered
from tests.support import raw
from tests.support.server import ServerFactory

FIRST, SECOND = b"first", b"second " * 200


def test_requests_behind_an_awaited_send_are_answered_in_order_and_stored_intact(
        server_factory: ServerFactory) -> None:
    server = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": "1",
                             "LURCHER_SYSTEM_PARTITION_ENFORCE_FSYNC": "true",
                             "TEST_LURCHER_IO_FAULT": "fsync-slow@1"})
    with connect(server) as c:
        c.create_stream("s")
        c.create_topic("s", "t", 1)
        for payload in (FIRST, SECOND):
            c.send_frame(raw.SEND_MESSAGES, raw.send_messages_payload(
                "s", "t", raw.partition_id(0), [raw.message(payload)]))
            if payload == FIRST:
                wait_until_fsync_started(server)
        c.send_frame(raw.PING)
        assert not answered(c), "the first send waits for its slowed fsync"
        assert [c.read_response(WAIT_S).status for _ in range(3)] == [0, 0, 0]
        stored = c.poll_all("s", "t", 0)
        assert [m.payload for m in stored] == [FIRST, SECOND]
        assert all(m.checksum_ok() for m in stored)
