"""DeleteSegments on a cluster, on real ``lurcher-server`` processes.

Three nodes with small segments (a few messages each). DeleteSegments through the
partition's primary or through a backup deletes the same oldest segments on every replica:
every node then serves the partition from the same first offset, the replicas' files stay
the same bytes, and after the primary is killed the new primary does not serve the
deleted messages. A replica down across the deletion, which adopts a checkpoint counting
messages its peers no longer hold, starts its log at their first offset and catches up
(the old code asked them for the deleted messages for ever and held the group's later ops).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.core.wire.errors import IggyError
from lurcher.sdk import Client
from tests.cluster.test_replicated_partitions import HTTP_ENV, clients, close_all, \
    partition_files, topic_everywhere
from tests.cluster.test_replicated_purge import PRIMARY_STAYS, primary_seen_by
from tests.support.cluster import eventually, observer
from tests.support.cluster import running_cluster
from tests.cluster.test_replicated_partitions import LAYOUT
from tests.support.server import LurcherServer

SMALL_SEGMENTS = {**HTTP_ENV, "LURCHER_SYSTEM_SEGMENT_SIZE": "1 KiB"}
PAYLOAD = 300  # bytes: a few messages fill a segment
SENT = 20


async def first_offset(client: Client) -> int | None:
    """The first offset ``client``'s node serves of partition 0 of ``p``/``t`` (None: the
    group is still electing its primary, or nothing is served)."""
    try:
        got = await client.poll_messages("p", "t", 0, "first", 1)
    except IggyError:
        return None
    messages = list(got.messages())
    return messages[0].offset if messages else None


def same_files(servers: list[LurcherServer], stream: int):
    """A check: partition 0's files are the same names and bytes on every server."""
    async def check() -> bool:
        files = [partition_files(server, stream, 0, 0) for server in servers]
        return all(f == files[0] for f in files)
    return check


async def served_from_everywhere(connected: list[Client]) -> int:
    """The first offset every node serves, once they all agree (bounded wait)."""
    async def agreed() -> list[int]:  # [the first offset] once agreed (0 is one)
        firsts = {await first_offset(client) for client in connected}
        return [firsts.pop()] if len(firsts) == 1 and None not in firsts else []
    return (await eventually(agreed, "every node serves from the same first offset"))[0]


@pytest.mark.slow
@pytest.mark.parametrize("via", ["primary", "backup"])
async def test_deleted_segments_are_deleted_on_every_replica_and_stay_deleted(
        tmp_path: Path, via: str) -> None:
    with running_cluster(tmp_path, 3, PRIMARY_STAYS, SMALL_SEGMENTS) as nodes:
        connected = await clients(nodes)
        try:
            await topic_everywhere(connected, "p", "t", 1)
            for k in range(SENT):
                await connected[0].send_messages("p", "t", [bytes([65 + k]) * PAYLOAD], 0)
            stream = (await connected[0].get_stream("p")).header.id
            await eventually(same_files(nodes, stream), "every replica holds the messages")
            segments = len([n for n in partition_files(nodes[0], stream, 0, 0)
                            if n.endswith(".log")])
            assert segments > 3
            primary = await primary_seen_by(nodes[0], LAYOUT.group_of(stream, 0, 0, 3))
            index = int(primary.removeprefix("node-"))
            through = index if via == "primary" else (index + 1) % 3
            await connected[through].delete_segments("p", "t", 0, 2)
            first = await served_from_everywhere(connected)
            assert 0 < first < SENT
            await eventually(same_files(nodes, stream), "the replicas' files stay alike")
            assert len([n for n in partition_files(nodes[0], stream, 0, 0)
                        if n.endswith(".log")]) == segments - 2
            await connected[index].close()
            nodes[index].kill()
            survivors = [c for i, c in enumerate(connected) if i != index]
            connected = survivors
            assert await served_from_everywhere(survivors) == first
            nodes[index].restart()
            connected = [*survivors, await observer(nodes[index])]
            assert await served_from_everywhere(connected) == first
        finally:
            await close_all(connected)


async def sent(client: Client, tag: int, count: int) -> None:
    for k in range(count):
        await client.send_messages("p", "t", [bytes([tag + k]) * PAYLOAD], 0)


@pytest.mark.slow
async def test_a_replica_down_across_a_deletion_starts_at_the_first_offset_kept_and_catches_up(
        tmp_path: Path) -> None:
    with running_cluster(tmp_path, 3, PRIMARY_STAYS, SMALL_SEGMENTS) as nodes:
        connected = await clients(nodes)
        try:
            await topic_everywhere(connected, "p", "t", 1)
            stream = (await connected[0].get_stream("p")).header.id
            primary = await primary_seen_by(nodes[0], LAYOUT.group_of(stream, 0, 0, 3))
            index = int(primary.removeprefix("node-"))
            lagging = (index + 1) % 3
            await connected[lagging].close()
            nodes[lagging].kill()
            await sent(connected[index], 65, SENT)  # across checkpoints (every 4 ops)
            await connected[index].delete_segments("p", "t", 0, 2)
            await sent(connected[index], 97, 5)
            up = [c for i, c in enumerate(connected) if i != lagging]
            first = await served_from_everywhere(up)
            assert first > 0
            nodes[lagging].restart()
            connected = [*up, await observer(nodes[lagging])]
            await eventually(same_files(nodes, stream), "the restarted replica caught up")
            await sent(connected[0], 110, 3)  # the group's later ops run on it too
            await eventually(same_files(nodes, stream), "it executes the later sends")
            assert "peers deleted" in nodes[lagging].log_tail(100_000)
        finally:
            await close_all(connected)
