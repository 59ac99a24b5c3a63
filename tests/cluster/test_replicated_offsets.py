"""Stored consumer offsets on a replica that catches up from a checkpoint, on real
``lurcher-server`` processes.

A backup down while offsets are stored, replaced and deleted, and while enough ops pass
that its peers no longer keep them in their logs, catches up by adopting a checkpoint: it
never executes those offset ops, so the checkpoint carries the stored offsets. Once that
node is the group's primary it answers every offset as the group stored it (the old code
answered None for an offset stored while it was down, and kept one deleted meanwhile).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lurcher.cluster.partition_groups import GroupLayout
from tests.cluster.test_replicated_partitions import HTTP_ENV, alike, clients, close_all
from tests.cluster.test_replicated_purge import PRIMARY_STAYS, primary_seen_by, \
    serving_as_primary, six_sent
from tests.support.cluster import eventually, running_cluster


@pytest.mark.slow
async def test_a_replica_that_adopts_a_checkpoint_serves_the_offsets_the_group_stored(
        tmp_path: Path) -> None:
    with running_cluster(tmp_path, 3, PRIMARY_STAYS, HTTP_ENV) as nodes:
        connected = await clients(nodes)
        try:
            await six_sent(connected)
            await connected[0].store_consumer_offset(8, "p", "t", 2, partition_id=0)
            await connected[0].store_consumer_offset(9, "p", "t", 1, partition_id=0)
            stream = (await connected[0].get_stream("p")).header.id
            group = GroupLayout(3).group_of(stream, 0, 0, 3)
            primary = await primary_seen_by(nodes[0], group)
            down = next(i for i in range(3) if f"node-{i}" != primary)
            healthy = connected[(down + 1) % 3]
            await eventually(alike(nodes, stream, 0, 6), "every replica holds the 6")
            await connected[down].close()
            nodes[down].kill()
            await healthy.store_consumer_offset(7, "p", "t", 3, partition_id=0)
            await healthy.delete_consumer_offset(8, "p", "t", partition_id=0)
            await healthy.store_consumer_offset(9, "p", "t", 4, partition_id=0)
            for k in range(10):  # past the ops the others keep in their logs
                await healthy.send_messages("p", "t", [f"after-{k}".encode()], 0)
            nodes[down].restart()
            await eventually(alike(nodes, stream, 0, 16), "the restarted node caught up")
            await close_all(connected)
            connected = []
            connected, _ = await serving_as_primary(nodes, group, down)
            assert await _offsets(connected[down]) == [3, None, 4]
        finally:
            await close_all(connected)


async def _offsets(client) -> list[int | None]:
    """The stored offsets of consumers 7, 8 and 9 on partition 0 of ``p``/``t``."""
    infos = [await client.get_consumer_offset(consumer, "p", "t", 0) for consumer in (7, 8, 9)]
    return [None if info is None else info.stored_offset for info in infos]
