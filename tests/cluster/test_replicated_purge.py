"""A replicated purge survives restarts and a replica's failing files, on real
``lurcher-server`` processes.

Three nodes, with checkpoints every few ops or none. A node down across a purge (it catches up by
state transfer from a checkpoint that counts the purge, or from the log) and a node killed after it (it
executes its log again) both end with exactly the messages sent after the purge: nothing
purged comes back, nothing sent after it is lost, and every replica's files are the same
bytes. A replica whose files refuse the purge (``TEST_LURCHER_IO_FAULT`` on that node only)
purges its partition again before it executes any later op of it, so once it is the
group's primary it serves what the others do. A replica killed anywhere in its purge (after
recording the count it is purging to, in the middle of emptying the partition, after
emptying it, after recording the count) finishes the purge at its restart: it rejoins with
the messages its peers hold, none of the purged ones, and serves them as the primary. A
replicated purge completes a consumer group's hand-over of the partition at once, as a single
node's does (members on one node; the purge through another node, or through a node that
holds no replica of some partitions).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.core.faults import CRASH_AT_ENV
from lurcher.core.log.faulty_io import IO_FAULT_ENV
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.requests.consumer_groups.join_consumer_group import JoinConsumerGroup
from lurcher.core.wire.requests.consumer_groups.leave_consumer_group import LeaveConsumerGroup
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from lurcher.cluster.partition_groups import GroupLayout
from tests.cluster.test_replicated_partitions import HTTP_ENV, alike, clients, close_all, \
    polled, topic_everywhere
from tests.support import raw
from tests.support.cluster import LIVENESS_S, eventually, observer, running_cluster
from tests.integration.test_groups import G, S, T, assignment, call, group_poll, setup
from tests.integration.test_groups import client as raw_client
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


async def serving_as_primary(nodes: list[LurcherServer], group: int,
                             wanted: int) -> tuple[list, list[tuple]]:
    """Make node ``wanted`` the primary of ``group`` (``make_primary``), connect to every
    node and wait until that node serves partition 0 of ``p``/``t``: (the clients, what
    it polled there)."""
    await make_primary(nodes, group, wanted)
    connected = await clients(nodes)
    got = await eventually(lambda: _polled_or_none(connected[wanted]),
                           f"node-{wanted} serves the partition as its group's primary")
    return connected, got


PRIMARY_STAYS = ("commit_timeout_ms = 5000\ncheckpoint_every_ops = 4\n"
                 "rebalance_after_ticks = 1000000\n")  # a primary moves only when killed


async def six_sent(connected: list) -> None:
    """Topic ``p``/``t`` of one partition, with 6 messages sent through node 0."""
    await topic_everywhere(connected, "p", "t", 1)
    for k in range(6):
        await connected[0].send_messages("p", "t", [f"before-{k}".encode()], 0)


async def restart_a_backup_with(nodes: list[LurcherServer], connected: list,
                                env: str, value: str) -> tuple[int, int, int]:
    """Restart a backup of the group of partition 0 of ``p``/``t`` (6 messages sent) with
    ``env`` set to ``value`` (a fault for that node only) and wait until it caught up:
    (stream id, group, the backup's index). Its client is closed."""
    stream = (await connected[0].get_stream("p")).header.id
    group = GroupLayout(3).group_of(stream, 0, 0, 3)
    primary = await primary_seen_by(nodes[0], group)
    backup = next(i for i in range(3) if f"node-{i}" != primary)
    await connected[backup].close()
    nodes[backup].kill()
    nodes[backup].env[env] = value
    nodes[backup].restart()
    await eventually(alike(nodes, stream, 0, 6), "the restarted node caught up")
    return stream, group, backup


async def _primary_is_not(server: LurcherServer, group: int, name: str) -> bool:
    return await primary_seen_by(server, group) not in (None, name)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["rename-eio@1", "remove-eio@1"])
async def test_a_replica_whose_files_refuse_a_purge_serves_only_what_the_group_stored(
        tmp_path: Path, fault: str) -> None:
    """``rename-eio``: its segment file cannot be set aside; ``remove-eio``: its stored
    consumer offset file cannot be removed. Either refuses the purge on that node alone
    (CannotDeleteFile) while the group executed it."""
    with running_cluster(tmp_path, 3, PRIMARY_STAYS, HTTP_ENV) as nodes:
        connected = await clients(nodes)
        try:
            await six_sent(connected)
            if fault.startswith("remove-"):  # an offset file for the purge to remove; with
                # rename-eio its write, replayed by the restarted node when no checkpoint
                # covered it yet, would take the fault instead of the purge
                await connected[0].store_consumer_offset(7, "p", "t", 3, partition_id=0)
                # executed on every node before the restart: a node killed before it
                # catches up from a checkpoint whose purge needs no removal of it
                stream = (await connected[0].get_stream("p")).header.id
                await eventually(_offset_file_everywhere(nodes, stream, 7),
                                 "the offset file on every node")
            stream, group, faulty = await restart_a_backup_with(
                nodes, connected, IO_FAULT_ENV, fault)
            healthy = connected[(faulty + 1) % 3]
            await healthy.purge_topic("p", "t")  # the faulty node keeps the messages
            after = [f"after-{k}".encode() for k in range(8)]  # past the purged end
            for payload in after:
                await healthy.send_messages("p", "t", [payload], 0)
            await close_all(connected)
            connected = []
            connected, got = await serving_as_primary(nodes, group, faulty)
            assert [(m[0], m[3]) for m in got] == list(enumerate(after))
            assert await connected[faulty].get_consumer_offset(7, "p", "t", 0) is None
            await eventually(alike(nodes, stream, 0, 8), "every replica holds the same 8")
            assert "purged as the group did" in nodes[faulty].log_tail(100_000)
        finally:
            await close_all(connected)


def _offset_file_everywhere(nodes: list[LurcherServer], stream: int, consumer: int):
    """A check: every node has a stored offset file of ``consumer`` on partition 0 of
    topic 0 of ``stream``."""
    async def check() -> bool:
        return all((node.data_dir / "streams" / str(stream) / "topics" / "0" / "partitions" /
                    "0" / "offsets" / "consumers" / str(consumer)).is_file() for node in nodes)
    return check


async def _polled_or_none(client) -> list[tuple] | None:
    try:
        return await polled(client, "p", "t", 0)
    except IggyError:  # a group still electing its primary after a restart
        return None


@pytest.mark.slow
@pytest.mark.parametrize("env, kill_at", [
    (CRASH_AT_ENV, "cluster-purge:pending"),    # its count recorded as pending, nothing emptied
    (IO_FAULT_ENV, "rename-kill@1"),            # setting its first segment file aside
    (CRASH_AT_ENV, "cluster-purge:emptied"),    # emptied, its count not recorded
    (CRASH_AT_ENV, "cluster-purge:counted")])   # counted, the pending count still there
async def test_a_replica_killed_in_its_purge_finishes_it_at_its_restart(
        tmp_path: Path, env: str, kill_at: str) -> None:
    """Checkpoints every 4 ops, so the restarted replica's last checkpoint counts 4 of the
    6 messages and no purge: the old code came back with the partition empty and its old
    purge count, asked its peers for those 4 messages (they refuse: they purged) and held
    every later op of the group."""
    with running_cluster(tmp_path, 3, PRIMARY_STAYS, HTTP_ENV) as nodes:
        connected = await clients(nodes)
        try:
            await six_sent(connected)
            stream, group, killed = await restart_a_backup_with(nodes, connected, env, kill_at)
            healthy = connected[(killed + 1) % 3]
            await healthy.purge_topic("p", "t")
            nodes[killed].proc.wait(LIVENESS_S)  # killed in its purge
            after = [f"after-{k}".encode() for k in range(8)]
            for payload in after:
                await healthy.send_messages("p", "t", [payload], 0)
            await close_all(connected)
            connected = []
            del nodes[killed].env[env]
            nodes[killed].restart()
            await eventually(alike(nodes, stream, 0, 8), "every replica holds the same 8")
            connected, got = await serving_as_primary(nodes, group, killed)
            assert [(m[0], m[3]) for m in got] == list(enumerate(after))
        finally:
            await close_all(connected)


@pytest.mark.parametrize("factor, purge_via", [
    (3, 1),   # every node a replica: the members' node executes the purge, another got it
    (1, 0)])  # one replica each: the members' node got the purge, and holds 1 of the 3
async def test_a_replicated_purge_hands_a_partition_over_at_once(
        tmp_path: Path, factor: int, purge_via: int) -> None:
    """Members on node 0, rebalancing_timeout 1 h: a hand-over waiting for a commit of what
    was delivered completes at the purge, and one asked for by a member joining after
    another purge completes at once (the old code kept [[0, 1, 2], []] on a cluster)."""
    extra = f"commit_timeout_ms = 5000\nreplication_factor = {factor}\n"
    env = {"LURCHER_CONSUMER_GROUP_REBALANCING_TIMEOUT": "1 h"}
    with running_cluster(tmp_path, 3, extra, env) as nodes:
        a, purger = setup(nodes[0]), raw_client(nodes[purge_via])
        call(a, JoinConsumerGroup(S, T, G))
        assert {group_poll(a, auto_commit=False).partition_id for _ in range(3)} == {0, 1, 2}
        b = raw_client(nodes[0])
        call(b, JoinConsumerGroup(S, T, G))
        assert assignment(a) == [[0, 1, 2], []]  # partition 2 waits for a's commit
        call(purger, PurgeTopic(S, T))
        await eventually(handed_over(a), "partition 2 moves to b at the purge")
        call(b, LeaveConsumerGroup(S, T, G))
        for p in range(3):
            a.send("s", "t", raw.partition_id(p), [raw.message(b"again")])
        assert [group_poll(a).count for _ in range(3)] == [1, 1, 1]
        call(purger, PurgeTopic(S, T))
        c = raw_client(nodes[0])
        call(c, JoinConsumerGroup(S, T, G))
        await eventually(handed_over(a), "partition 2 moves to a member joining after it")


def handed_over(member: raw.RawClient):
    """A check: the second member of ``member``'s group holds partition 2."""
    async def check() -> bool:
        return assignment(member) == [[0, 1], [2]]
    return check
