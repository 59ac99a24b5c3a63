"""A replicated purge survives restarts, on real ``lurcher-server`` processes.

Three nodes, with checkpoints every few ops or none. A node down across a purge (it catches up by
state transfer from a checkpoint that counts the purge, or from the log) and a node killed after it (it
executes its log again) both end with exactly the messages sent after the purge: nothing
purged comes back, nothing sent after it is lost, and every replica's files are the same
bytes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.core.wire.errors import IggyError
from tests.cluster.test_replicated_partitions import alike, clients, close_all, polled, \
    topic_everywhere
from tests.support.cluster import eventually, running_cluster



@pytest.mark.slow
@pytest.mark.parametrize("every", [pytest.param(4, id="from-checkpoints"),
                                   pytest.param(0, id="whole-log-again")])
async def test_messages_sent_after_a_purge_survive_restarts_and_purged_ones_stay_gone(
        tmp_path: Path, every: int) -> None:
    """``every``: checkpoints every 4 ops (the node down across the purge adopts a
    checkpoint counting it), or none (every restart executes the purge and the sends before
    it again)."""
    extra = f"commit_timeout_ms = 5000\ncheckpoint_every_ops = {every}\n"
    with running_cluster(tmp_path, 3, extra) as nodes:
        connected = await clients(nodes)
        try:
            await topic_everywhere(connected, "p", "t", 1)
            for k in range(6):
                await connected[0].send_messages("p", "t", [f"before-{k}".encode()], 0)
            await connected[2].close()
            nodes[2].kill()  # down across the purge and the checkpoints after it
            await connected[1].purge_topic("p", "t")
            for k in range(5):
                await connected[0].send_messages("p", "t", [f"after-{k}".encode()], 0)
            nodes[2].restart()
            await close_all(connected[:2])
            nodes[0].kill()  # then killed after it: its log is executed again
            nodes[0].restart()
            connected = await clients(nodes)
            after = [f"after-{k}".encode() for k in range(5)]
            for client in connected:
                async def only_after(client=client) -> bool:
                    try:
                        got = await polled(client, "p", "t", 0)
                    except IggyError:  # a group still electing its primary after a restart
                        return False
                    return [(m[0], m[3]) for m in got] == list(enumerate(after))
                await eventually(only_after, "only the messages sent after the purge")
            await eventually(alike(nodes, 0, 0, 5), "every replica holds the same 5 messages")
        finally:
            await close_all(connected)
