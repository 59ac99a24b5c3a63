"""The handshaking pools of a node's link listener with a member whose ``ip`` is a host
name: connections from that name's addresses count in the members' pool, so strangers
filling theirs cannot lock that member out (real sockets, one ``Links`` in process)."""

from __future__ import annotations

import asyncio

from lurcher.cluster.links import Links
from lurcher.core.replication.link import HELLO_FIXED
from tests.support.server import free_ports


async def hello_or_dropped(port: int, source: str) -> asyncio.StreamWriter | None:
    """A connection from ``source`` once the node's hello came, None when it was dropped."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    got = await asyncio.wait_for(reader.read(HELLO_FIXED.size), 10)
    if got:
        return writer
    writer.close()
    return None


async def test_a_member_named_by_host_name_is_in_the_members_pool() -> None:
    [nobody] = free_ports(1)  # node 1 listens nowhere: only its name matters here
    node = Links("c", b"s", 0, {1: ("localhost", nobody)}, lambda *m: None, 1 << 20,
                 max_handshaking=2)
    await node.start("127.0.0.1", 0)
    held = []
    try:
        held += [await hello_or_dropped(node.port, "127.0.0.2") for _ in range(2)]
        assert all(held)
        assert await hello_or_dropped(node.port, "127.0.0.2") is None  # strangers: full
        member = await hello_or_dropped(node.port, "127.0.0.1")  # localhost: node 1's host
        assert member is not None, "the member named 'localhost' was counted as a stranger"
        held.append(member)
    finally:
        for writer in held:
            if writer is not None:
                writer.close()
        await node.close()


async def test_a_member_host_name_that_is_not_a_name_is_logged(caplog) -> None:
    """A label over 63 characters fails IDNA encoding (UnicodeError, not OSError): the links
    still start, with one warning naming it."""
    [nobody] = free_ports(1)
    bad = "x" * 64 + ".example"
    node = Links("c", b"s", 0, {1: (bad, nobody)}, lambda *m: None, 1 << 20)
    await node.start("127.0.0.1", 0)
    try:
        assert f"cluster member host {bad!r} does not resolve" in caplog.text
        await asyncio.sleep(0.5)  # the dialer of that member tries (and fails) meanwhile
        assert all(not task.done() for task in node.tasks), "a link task ended"
    finally:
        await node.close()
