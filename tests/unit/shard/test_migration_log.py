"""Which shard logs a socket migration, and when (``lurcher.core.shard.migration``).

The shard a connection left logged ``client N migrated to shard M`` after its handoff was
sent, while the receiving shard was already serving the connection: a client (or a test
reading the log after its reply) could see the new shard's answer before the line was
written, whenever the old shard's process was not scheduled in between (a loaded
machine). The receiving shard now logs it before it serves the connection. Driven here
with real handoff sockets in one process: a handoff is sent to shard 1's ``Migration``
and the log is read at the moment shard 1 starts serving the connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket

from lurcher.core.shard.migration import Handoff, Migration, Migrator

CLIENT_ID = 4242


class AdoptingShard:
    """Shard 1 as ``Migration`` sees it: what had been logged when it began serving."""

    shard_id = 1

    def __init__(self, caplog) -> None:
        self.caplog = caplog
        self.adopted = asyncio.get_running_loop().create_future()

    async def adopt_connection(self, sock: socket.socket, handoff: Handoff) -> None:
        sock.close()
        self.adopted.set_result(self.caplog.text)


async def test_the_receiving_shard_logs_the_move_before_serving_it(caplog) -> None:
    namespace = f"lurcher-test-migration-{os.getpid()}"
    shard = AdoptingShard(caplog)
    receiving = Migration(shard, namespace, enabled=True)
    sending = Migrator(namespace, 0, lambda sock, handoff: None)
    left, right = socket.socketpair()
    try:
        receiving.start(asyncio.get_running_loop())
        with caplog.at_level(logging.INFO, logger="lurcher.core.shard.migration"):
            sending.send(1, left.fileno(), Handoff(CLIENT_ID, 1, "127.0.0.1:5555", 1, 0,
                                                    None, b""))
            logged = await asyncio.wait_for(shard.adopted, 10)
    finally:
        asyncio.get_running_loop().remove_reader(receiving.migrator.sock.fileno())
        for closing in (receiving, sending, left, right):
            closing.close()
    assert f"client {CLIENT_ID} migrated to shard 1" in logged, logged
