"""A replicated purge survives restarts and a replica's failing files, on real
``lurcher-server`` processes.

Three nodes, with checkpoints every few ops or none. A node down across a purge (it catches up by
state transfer from a checkpoint that counts the purge, or from the log) and a node killed after it (it
executes its log again) both end with exactly the messages sent after the purge: nothing
purged comes back, nothing sent after it is lost, and every replica's files are the same
bytes. A replica whose files refuse the purge (``TEST_LURCHER_IO_FAULT`` on that node only)
purges its partition again before it executes any later op of it, so once it is the
group's primary it serves what the others do.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.core.wire.errors import IggyError
from lurcher.cluster.partition_groups import GroupLayout
from tests.cluster.test_replicated_partitions import HTTP_ENV, alike, clients, close_all, \
    polled, topic_everywhere
from tests.support.cluster import eventually, observer, running_cluster
from tests.support.server import LurcherServer


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


async def primary_seen_by(server: LurcherServer, group: int) -> str | None:
    """The name of ``group``'s primary as ``server`` sees it (None: electing)."""
    client = await observer(server)
    try:
        status = await client.get_cluster_status()
    finally:
        await client.close()
    return next(g["primary"] for g in status["groups"] if g["group"] == group)


async def make_primary(nodes: list[LurcherServer], group: int, wanted: int) -> None:
    """Kill ``group``'s primary (restarting it once another took over) until node
    ``wanted`` is the primary: each kill moves the group to its next view."""
    for _ in range(len(nodes)):
        primary = await eventually(lambda: primary_seen_by(nodes[wanted], group),
                                   f"a primary of group {group}")
        if primary == f"node-{wanted}":
            return
        killed = nodes[int(primary.removeprefix("node-"))]
        killed.kill()
        await eventually(lambda: _primary_is_not(nodes[wanted], group, primary),
                         f"group {group} moves off {primary}")
        killed.restart()
    raise AssertionError(f"node-{wanted} never became the primary of group {group}")


async def _primary_is_not(server: LurcherServer, group: int, name: str) -> bool:
    return await primary_seen_by(server, group) not in (None, name)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["rename-eio@1", "remove-eio@1"])
async def test_a_replica_whose_files_refuse_a_purge_serves_only_what_the_group_stored(
        tmp_path: Path, fault: str) -> None:
    """``rename-eio``: its segment file cannot be set aside; ``remove-eio``: its stored
    consumer offset file cannot be removed. Either refuses the purge on that node alone
    (CannotDeleteFile) while the group executed it."""
    extra = ("commit_timeout_ms = 5000\ncheckpoint_every_ops = 4\n"
             "rebalance_after_ticks = 1000000\n")  # a primary moves only when killed
    with running_cluster(tmp_path, 3, extra, HTTP_ENV) as nodes:
        connected = await clients(nodes)
        try:
            await topic_everywhere(connected, "p", "t", 1)
            for k in range(6):
                await connected[0].send_messages("p", "t", [f"before-{k}".encode()], 0)
            if fault.startswith("remove-"):  # an offset file for the purge to remove; with
                # rename-eio its write, replayed by the restarted node when no checkpoint
                # covered it yet, would take the fault instead of the purge
                await connected[0].store_consumer_offset(7, "p", "t", 3, partition_id=0)
            stream = (await connected[0].get_stream("p")).header.id
            group = GroupLayout(3).group_of(stream, 0, 0, 3)
            primary = await primary_seen_by(nodes[0], group)
            faulty = next(i for i in range(3) if f"node-{i}" != primary)
            healthy = connected[(faulty + 1) % 3]
            await connected[faulty].close()
            nodes[faulty].kill()
            nodes[faulty].env["TEST_LURCHER_IO_FAULT"] = fault  # this node only
            nodes[faulty].restart()
            await eventually(alike(nodes, stream, 0, 6), "the restarted node caught up")
            await healthy.purge_topic("p", "t")  # the faulty node keeps the messages
            after = [f"after-{k}".encode() for k in range(8)]  # past the purged end
            for payload in after:
                await healthy.send_messages("p", "t", [payload], 0)
            await close_all(connected)
            connected = []
            await make_primary(nodes, group, faulty)
            connected = await clients(nodes)
            got = await eventually(lambda: _polled_or_none(connected[faulty]),
                                   "the faulty node serves the partition")
            assert [(m[0], m[3]) for m in got] == list(enumerate(after))
            assert await connected[faulty].get_consumer_offset(7, "p", "t", 0) is None
            await eventually(alike(nodes, stream, 0, 8), "every replica holds the same 8")
            assert "purged as the group did" in nodes[faulty].log_tail(100_000)
        finally:
            await close_all(connected)


async def _polled_or_none(client) -> list[tuple] | None:
    try:
        return await polled(client, "p", "t", 0)
    except IggyError:  # a group still electing its primary after a restart
        return None
