"""Partitions replicated through their partition groups, on real ``lurcher-server`` processes.

Three nodes on loopback, our SDK connected to a chosen node (it stays there). Sends made
through any node are stored alike, byte for byte, on every replica; the partitions of a
topic have their primaries on different nodes; consumer offsets stored through one node
(and deleted) are what every node answers; a factor of 1 still serves every node
(forwarded to the one replica) and a factor above the node count is refused; every node
shows the counters of partitions it holds no replica of (the last seen once their node is
lost). Slow: with one node killed the cluster keeps acknowledging sends, every
acknowledged message is readable through both survivors, and with two killed a send fails
with TaskTimeout (12001) instead of hanging; a killed primary's groups move to another
node, and once restarted and caught up the node takes them back. A purge through any
node empties the partitions on every replica, and later sends start again at offset 0
everywhere.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from lurcher.cluster.partition_groups import GroupLayout
from lurcher.core.wire.batch import INDEX_ENTRY_BYTES
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk import Client
from tests.support.cluster import eventually, observer, running_cluster
from tests.support.server import LurcherServer

COMMIT_TIMEOUT_MS = 2000
HTTP_ENV = {"LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"}
# checkpoints every 4 ops: the tests' few sends go through checkpoints and trimmed logs
EXTRA = (f"commit_timeout_ms = {COMMIT_TIMEOUT_MS}\nrebalance_after_ticks = 50\n"
         f"checkpoint_every_ops = 4\n")
LAYOUT = GroupLayout(3)


@pytest.fixture(scope="module", params=[pytest.param(1, id="one-shard"),
                                        pytest.param(2, id="two-shards")])
def nodes(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[LurcherServer]]:
    """Three nodes shared by the module's tests (each uses its own stream); of one shard,
    or of two (shard 0 runs the groups and owns every partition; shard 1 forwards)."""
    env = {**HTTP_ENV, "LURCHER_SYSTEM_SHARDING_SHARDS": str(request.param)}
    with running_cluster(tmp_path_factory.mktemp("cluster"), 3, EXTRA, env) as servers:
        yield servers


async def clients(servers: list[LurcherServer]) -> list[Client]:
    return [await observer(server) for server in servers]


async def close_all(connected: list[Client]) -> None:
    for client in connected:
        await client.close()


async def topic_everywhere(connected: list[Client], stream: str, topic: str,
                           partitions: int, factor: int = 0, max_size: int = 0) -> None:
    """Create ``stream``/``topic`` through node 0 and wait until every node knows it."""
    await connected[0].create_stream(stream)
    await connected[0].create_topic(stream, topic, partitions, replication_factor=factor,
                                    max_topic_size_bytes=max_size)

    async def known(client: Client) -> bool:
        try:
            return await client.get_topic(stream, topic) is not None
        except IggyError:  # the stream is not there yet
            return False
    for client in connected:
        await eventually(lambda c=client: known(c), f"{stream}/{topic} on every node")


async def polled(client: Client, stream: str, topic: str, partition: int) -> list[tuple]:
    got = await client.poll_messages(stream, topic, partition, "first", 1000)
    return [(m.offset, m.id, m.timestamp, m.payload) for m in got.messages()]


def partition_files(server: LurcherServer, stream: int, topic: int, partition: int) -> dict:
    """Name -> bytes of the partition's segment and index files on ``server``'s disk."""
    root = server.data_dir / "streams" / str(stream) / "topics" / str(topic) / \
        "partitions" / str(partition)
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


def alike(servers: list[LurcherServer], stream: int, partition: int, messages: int):
    """A check: every server's partition files hold ``messages`` messages, the same bytes."""
    async def check() -> bool:
        files = [partition_files(server, stream, 0, partition) for server in servers]
        index = [v for name, v in files[0].items() if name.endswith(".index")]
        return len(index) == 1 and len(index[0]) == messages * INDEX_ENTRY_BYTES and \
            all(f == files[0] for f in files)
    return check


async def test_sends_through_any_node_are_stored_alike_on_every_replica(nodes) -> None:
    connected = await clients(nodes)
    try:
        await topic_everywhere(connected, "alike", "t", 3)
        details = await connected[1].get_topic("alike", "t")
        assert details.header.replication_factor == 3
        for i, client in enumerate(connected):
            for p in range(3):
                await client.send_messages("alike", "t", [f"{i}-{p}-{k}" for k in range(3)], p)
        for p in range(3):
            expected = await polled(connected[0], "alike", "t", p)
            assert sorted(m[3] for m in expected) == sorted(
                f"{i}-{p}-{k}".encode() for i in range(3) for k in range(3))
            assert [m[0] for m in expected] == list(range(9))
            assert all(m[1] != 0 for m in expected)  # ids assigned once, for every replica
            for client in connected[1:]:
                assert await polled(client, "alike", "t", p) == expected
            await eventually(alike(nodes, 0, p, 9), f"partition {p} byte-identical on every node")
    finally:
        await close_all(connected)


async def test_the_partitions_of_a_topic_have_primaries_on_different_nodes(nodes) -> None:
    connected = await clients(nodes)
    try:
        await topic_everywhere(connected, "spread", "t", 3)
        stream = (await connected[0].get_stream("spread")).header.id
        groups = {LAYOUT.group_of(stream, 0, p, 3) for p in range(3)}

        async def primaries() -> set[str] | None:
            status = await connected[0].get_cluster_status()
            found = {g["primary"] for g in status["groups"] if g["group"] in groups}
            return found if len(found) == 3 else None
        assert await eventually(primaries, "three partition primaries on three nodes") == {
            "node-0", "node-1", "node-2"}
    finally:
        await close_all(connected)


async def test_a_consumer_offset_stored_through_one_node_is_read_through_every_node(
        nodes) -> None:
    connected = await clients(nodes)
    try:
        await topic_everywhere(connected, "offsets", "t", 1)
        await connected[0].send_messages("offsets", "t", [b"m0", b"m1", b"m2", b"m3"], 0)
        await connected[0].store_consumer_offset(5, "offsets", "t", 1, partition_id=0)
        for client in connected:
            info = await client.get_consumer_offset(5, "offsets", "t", 0)
            assert info is not None and info.stored_offset == 1
        # a consumer moving to another node resumes where it was
        first = await connected[1].poll_messages("offsets", "t", 0, "next", 1, True,
                                                 consumer=5)
        assert [m.payload for m in first.messages()] == [b"m2"]
        then = await connected[2].poll_messages("offsets", "t", 0, "next", 1, True,
                                                consumer=5)
        assert [m.payload for m in then.messages()] == [b"m3"]
        await connected[2].delete_consumer_offset(5, "offsets", "t", 0)
        for client in connected:
            assert await client.get_consumer_offset(5, "offsets", "t", 0) is None
        with pytest.raises(IggyError) as missing:
            await connected[1].delete_consumer_offset(5, "offsets", "t", 0)
        assert missing.value.status == ErrorCode.CONSUMER_OFFSET_NOT_FOUND
    finally:
        await close_all(connected)


async def test_a_factor_of_one_serves_every_node_and_above_the_node_count_is_refused(
        nodes) -> None:
    connected = await clients(nodes)
    try:
        with pytest.raises(IggyError) as refused:
            await connected[0].create_topic(await stream_named(connected[0], "factors"),
                                            "too-many", 1, replication_factor=4)
        assert refused.value.status == ErrorCode.INVALID_REPLICATION_FACTOR
        await topic_everywhere(connected, "single", "t", 2, factor=1)
        for i, client in enumerate(connected):
            await client.send_messages("single", "t", [f"from-{i}"], i % 2)
        for client in connected:
            assert [m[3] for m in await polled(client, "single", "t", 0)] == [
                b"from-0", b"from-2"]
            assert [m[3] for m in await polled(client, "single", "t", 1)] == [b"from-1"]
    finally:
        await close_all(connected)


async def test_every_node_shows_the_counters_of_partitions_it_holds_no_replica_of(
        nodes) -> None:
    """With a factor of 1 each partition lives on one node; GetTopic, GetStream, GetStreams
    and GetStats through any node show the counters of all of them (asked of the nodes that
    hold them), not zeros for the partitions held elsewhere."""
    connected = await clients(nodes)
    try:
        await topic_everywhere(connected, "counted", "t", 3, factor=1)
        for p in range(3):
            await connected[0].send_messages("counted", "t",
                                             [f"m-{p}-{k}" for k in range(p + 1)], p)
        seen = []
        for client in connected:
            topic = await client.get_topic("counted", "t")
            assert [x.messages_count for x in topic.partitions] == [1, 2, 3]
            assert [x.current_offset for x in topic.partitions] == [0, 1, 2]
            assert all(x.size_bytes > 0 and x.segments_count == 1 for x in topic.partitions)
            stream = await client.get_stream("counted")
            assert stream.header.messages_count == 6
            streams = await client.get_streams()
            stats = await client.get_stats()
            assert stats.messages_count == sum(s.messages_count for s in streams)
            details = [await client.get_stream(s.id) for s in streams]
            assert stats.partitions_count == sum(t.partitions_count for d in details
                                                 for t in d.topics)
            seen.append(([(x.messages_count, x.size_bytes) for x in topic.partitions],
                         stream.header.size_bytes))
        assert seen[0] == seen[1] == seen[2]
    finally:
        await close_all(connected)


async def stream_named(client: Client, name: str) -> str:
    await client.create_stream(name)
    return name


# ---- faults ------------------------------------------------------------------------------

@pytest.fixture
def own_nodes(tmp_path: Path) -> Iterator[list[LurcherServer]]:
    with running_cluster(tmp_path, 3, EXTRA, HTTP_ENV) as servers:
        yield servers


async def send_all(client: Client, stream: str, tag: str, count: int) -> list[bytes]:
    """``count`` sends of one message to each of 3 partitions; the payloads acknowledged."""
    acknowledged = []
    for k in range(count):
        for p in range(3):
            payload = f"{tag}-{p}-{k}".encode()
            await client.send_messages(stream, "t", [payload], p)
            acknowledged.append(payload)
    return acknowledged


@pytest.mark.slow
async def test_one_node_down_sends_go_on_and_two_down_they_are_refused(own_nodes) -> None:
    connected = await clients(own_nodes)
    try:
        await topic_everywhere(connected, "faults", "t", 3)
        acknowledged = await send_all(connected[1], "faults", "before", 3)
        await connected[0].close()
        own_nodes[0].kill()  # SIGKILL: primary of one of the three partitions' groups
        acknowledged += await send_all(connected[1], "faults", "one-down", 3)
        acknowledged += await send_all(connected[2], "faults", "one-down-b", 3)
        for client in connected[1:]:
            stored = [m[3] for p in range(3) for m in await polled(client, "faults", "t", p)]
            assert sorted(stored) == sorted(acknowledged)
        await connected[1].close()
        own_nodes[1].kill()
        with pytest.raises(IggyError) as refused:
            # a hang fails here: the refusal must come within commit_timeout_ms
            await asyncio.wait_for(connected[2].send_messages("faults", "t", [b"x"], 1),
                                   3 * COMMIT_TIMEOUT_MS / 1000)
        assert refused.value.status == ErrorCode.TASK_TIMEOUT
    finally:
        await close_all(connected[2:])


@pytest.mark.slow
async def test_counters_of_a_lost_node_s_partitions_are_its_last_known_not_a_hang(
        own_nodes) -> None:
    """A factor of 1 and the node holding a partition killed: GetTopic through another node
    is still answered (the bound below only catches a hang; the node waits at most
    ``peer_stats.STATS_WAIT_S`` per group) with the lost partition's last known counters,
    and the node logs that they are."""
    connected = await clients(own_nodes)
    try:
        await topic_everywhere(connected, "lost", "t", 3, factor=1)
        for p in range(3):
            await connected[0].send_messages("lost", "t", [b"x"] * (p + 1), p)
        topic = await connected[0].get_topic("lost", "t")
        assert [x.messages_count for x in topic.partitions] == [1, 2, 3]
        stream = await connected[0].get_stream("lost")
        holder = {pid: LAYOUT.members()[LAYOUT.group_of(stream.header.id, topic.header.id,
                                                        pid, 1)][0] for pid in range(3)}
        lost = next(pid for pid in range(3) if holder[pid] != 0)
        await connected[holder[lost]].close()
        own_nodes[holder[lost]].kill()
        again = await asyncio.wait_for(connected[0].get_topic("lost", "t"),
                                       5 * COMMIT_TIMEOUT_MS / 1000)
        assert [x.messages_count for x in again.partitions] == [1, 2, 3]
        log = own_nodes[0].output_path.read_text()
        assert "did not report its partitions' counters" in log
    finally:
        await close_all([c for i, c in enumerate(connected) if own_nodes[i].running])


@pytest.mark.slow
async def test_a_killed_primary_s_groups_move_and_come_back_after_its_restart(
        own_nodes) -> None:
    connected = await clients(own_nodes)
    try:
        await topic_everywhere(connected, "failover", "t", 3)
        preferred = {gid for gid, members in LAYOUT.members().items() if members[0] == 0}

        async def primaries(client: Client) -> dict[int, str] | None:
            status = await client.get_cluster_status()
            found = {g["group"]: g["primary"] for g in status["groups"]
                     if g["group"] in preferred and len(g["replicas"]) == 3}
            return found if all(found.values()) else None

        def all_on(node: str):
            async def check() -> bool:
                found = await primaries(connected[1])
                return bool(found) and all(p == node for p in found.values())
            return check
        await eventually(all_on("node-0"), "node-0 primary of its groups")
        await send_all(connected[1], "failover", "before", 1)
        await connected[0].close()
        own_nodes[0].kill()

        async def moved() -> bool:
            found = await primaries(connected[1])
            return bool(found) and "node-0" not in found.values()
        await eventually(moved, "node-0's groups have new primaries")
        # more ops than the survivors keep below their checkpoints: node-0 gets a checkpoint
        # and copies the messages it lacks from them
        await send_all(connected[1], "failover", "while-down", 10)
        own_nodes[0].restart()
        connected[0] = await observer(own_nodes[0])
        await eventually(all_on("node-0"), "node-0 takes its groups back after its restart")
        # what it stored before (not stored twice as its log is re-executed) and what it
        # missed, read from its own log now that it is primary again; replicas identical
        assert [m[3] for m in await polled(connected[0], "failover", "t", 0)] == [
            b"before-0-0", *(f"while-down-0-{k}".encode() for k in range(10))]
        for p in range(3):
            await eventually(alike(own_nodes, 0, p, 11), f"partition {p} alike after healing")
    finally:
        await close_all(connected)


async def test_a_purge_through_one_node_empties_the_partitions_on_every_replica(
        nodes) -> None:
    connected = await clients(nodes)
    try:
        await topic_everywhere(connected, "purged", "t", 2)
        await connected[0].create_topic("purged", "u", 1)
        stream = (await connected[0].get_stream("purged")).header.id
        for p in range(2):
            await connected[0].send_messages("purged", "t", [b"gone-1", b"gone-2"], p)
        await connected[0].send_messages("purged", "u", [b"kept"], 0)
        await connected[1].purge_topic("purged", "t")  # through a node that leads neither
        for client in connected:
            for p in range(2):
                assert await polled(client, "purged", "t", p) == []
        await connected[2].send_messages("purged", "t", [b"after"], 0)
        for client in connected:
            assert [(m[0], m[3]) for m in await polled(client, "purged", "t", 0)] == [
                (0, b"after")]
            assert [m[3] for m in await polled(client, "purged", "u", 0)] == [b"kept"]
        await eventually(alike(nodes, stream, 0, 1), "the purged partition alike everywhere")
        await connected[2].purge_stream("purged")  # every topic of the stream
        for client in connected:
            assert await polled(client, "purged", "t", 0) == []
            assert await polled(client, "purged", "u", 0) == []
    finally:
        await close_all(connected)


async def replace_stream(connected: list[Client], old: str, new: str, purged: bool) -> int:
    """Stream ``old`` (topic ``t``, 3 partitions, 2 messages in each, after one purged if
    ``purged``) deleted, then ``new`` created with its ids and sent ``new-<node>`` through
    each node to each partition; the stream id."""
    await topic_everywhere(connected, old, "t", 3)
    stream = (await connected[0].get_stream(old)).header.id
    if purged:
        for p in range(3):
            await connected[0].send_messages(old, "t", [b"gone"], p)
        await connected[0].purge_stream(old)
    for p in range(3):
        await connected[0].send_messages(old, "t", [b"old-1", b"old-2"], p)
    await connected[1].delete_stream(old)
    await topic_everywhere(connected, new, "t", 3)
    assert (await connected[0].get_stream(new)).header.id == stream
    for i, client in enumerate(connected):
        for p in range(3):
            await client.send_messages(new, "t", [f"new-{i}"], p)
    return stream


async def assert_everywhere(connected: list[Client], servers: list[LurcherServer],
                            stream: int, name: str, expected: list[tuple]) -> None:
    """Every node polls ``expected`` (offset, payload) from each partition of ``name``/t,
    and every node's partition files hold the same bytes."""
    for p in range(3):
        for client in connected:
            assert [(m[0], m[3]) for m in await polled(client, name, "t", p)] == expected
        await eventually(alike(servers, stream, p, len(expected)),
                         f"partition {p} alike everywhere")


async def test_a_stream_created_with_a_deleted_one_s_ids_starts_its_partitions_empty(
        nodes) -> None:
    """The deleted stream's partitions had messages: the new stream gets its ids, and the
    groups count its partitions from offset 0, not from the old ones' ends."""
    connected = await clients(nodes)
    try:
        stream = await replace_stream(connected, "reused-old", "reused-new", purged=False)
        await assert_everywhere(connected, nodes, stream, "reused-new",
                                [(0, b"new-0"), (1, b"new-1"), (2, b"new-2")])
    finally:
        await close_all(connected)


async def in_normal_operation(connected: list[Client]) -> bool:
    """Every node sees every group in normal operation, in the same view."""
    views: dict[int, set[int]] = {}
    for client in connected:
        for group in (await client.get_cluster_status())["groups"]:
            if group["status"] != "normal":
                return False
            views.setdefault(group["group"], set()).add(group["view"])
    return all(len(seen) == 1 for seen in views.values())


@pytest.mark.slow
async def test_a_purged_and_deleted_stream_s_counts_neither_purge_nor_wedge_its_successor(
        own_nodes) -> None:
    """The deleted stream's partitions went through a purge; the stream created after it
    with its ids keeps every acknowledged message across a restart of every node (each
    restores a checkpoint counting the old partitions) and goes on at the next offset."""
    connected = await clients(own_nodes)
    try:
        stream = await replace_stream(connected, "purged-old", "purged-new", purged=True)
        await close_all(connected)
        for server in own_nodes:
            server.kill()
        for server in own_nodes:
            server.restart()
        connected = await clients(own_nodes)
        await eventually(lambda: in_normal_operation(connected), "every group elected again")
        for p in range(3):
            await connected[p].send_messages("purged-new", "t", [b"after"], p)
        await assert_everywhere(connected, own_nodes, stream, "purged-new", [
            (0, b"new-0"), (1, b"new-1"), (2, b"new-2"), (3, b"after")])
    finally:
        await close_all(connected)
