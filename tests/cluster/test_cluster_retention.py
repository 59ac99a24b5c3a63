"""Size retention (``max_topic_size``) on a cluster whose topic has a replication factor
below the node count, on real ``lurcher-server`` processes.

Three nodes, small segments (4 KiB), the message cleaner every 200 ms; a topic of three
partitions with a factor of 1, so each node holds one of them and no replica of the other
two. Each node trims the partition it holds by its share of the topic's excess, the topic's
size counting the partitions held elsewhere as their nodes report them: the topic ends
below 90% of its maximum, trimmed once (no more than a segment per partition beyond the
threshold), not left at up to three times its maximum as when each node judged the topic by
its own partition.
"""

from __future__ import annotations

from pathlib import Path

from tests.cluster.test_replicated_partitions import EXTRA, HTTP_ENV, clients, close_all, \
    topic_everywhere
from tests.support.cluster import eventually, running_cluster

SEGMENT_BYTES = 4096
MESSAGE_BYTES = 64 + 100
BATCH = 8
SEGMENT = 32 * MESSAGE_BYTES  # a segment rolls once it passes 4 KiB: after 4 batches of 8
MAX_SIZE = 10 * SEGMENT_BYTES
THRESHOLD = MAX_SIZE * 9 // 10
ENV = {**HTTP_ENV, "LURCHER_SYSTEM_SEGMENT_SIZE": str(SEGMENT_BYTES),
       "LURCHER_DATA_MAINTENANCE_MESSAGES_CLEANER_ENABLED": "true",
       "LURCHER_DATA_MAINTENANCE_MESSAGES_INTERVAL": "200 ms"}


async def test_a_topic_spread_over_nodes_is_trimmed_to_its_max_size_once(
        tmp_path: Path) -> None:
    with running_cluster(tmp_path, 3, EXTRA, ENV) as servers:
        connected = await clients(servers)
        try:
            await topic_everywhere(connected, "kept", "t", 3, factor=1, max_size=MAX_SIZE)
            for start in range(0, 900, BATCH):  # 300 messages (9 segments) a partition:
                await connected[0].send_messages(  # each one alone is over the threshold
                    "kept", "t", [b"x" * 100] * BATCH, start // BATCH % 3)

            async def trimmed() -> list[int]:
                sizes = [p.size_bytes for p in (await connected[0].get_topic("kept", "t"))
                         .partitions]
                return sizes if sum(sizes) < THRESHOLD else []
            sizes = await eventually(trimmed, "the topic trimmed below 90% of its maximum")
            assert sum(sizes) >= THRESHOLD - 3 * SEGMENT, sizes  # the excess taken once
            for client in connected:  # every node shows the topic trimmed
                async def shown(c=client) -> bool:
                    topic = await c.get_topic("kept", "t")
                    return sum(p.size_bytes for p in topic.partitions) < THRESHOLD
                await eventually(shown, "every node shows the trimmed topic")
        finally:
            await close_all(connected)

