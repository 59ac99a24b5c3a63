"""Metadata replicated through the metadata group, on real ``lurcher-server`` processes.

Three nodes on loopback. A change made on any node (the leader, or a follower through our
SDK, which stays where it connected) is answered once committed on a quorum, and then every
node shows it; a node killed and restarted catches up from the group; with two nodes down a
change fails with TaskTimeout (12001) within the configured ``commit_timeout_ms``. A user
deleted or deactivated, or a token deleted, on one node ends that login's sessions on every
node (disconnected, as on the node that made the change). A deletion one node cannot move
its directories aside for (its ``deleting/`` blocked) is applied there all the same: its
metadata stays the group's, the directories go, and a topic created again with the same
ids starts empty on it as everywhere.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from apache_iggy import IggyClient

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from tests.support import raw
from lurcher.core.shard.tombstones import TOMBSTONE_DIR, entity_path
from tests.cluster.test_replicated_partitions import polled, topic_everywhere
from tests.support.cluster import LIVENESS_S, eventually, leader_of, observer, running_cluster
from tests.support.official import ROOT_PASSWORD, ROOT_USERNAME
from tests.support.raw import StatusError
from tests.support.server import LurcherServer
from tests.support.users import DELETE_PAT, DELETE_USER, INACTIVE, UPDATE_USER, UserClient, \
    update_user_payload

COMMIT_TIMEOUT_MS = 2000


@pytest.fixture(params=[pytest.param(1, id="one-shard"),
                        pytest.param(2, id="two-shards", marks=pytest.mark.slow)])
def nodes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[LurcherServer]]:
    """Three nodes; each of one shard, or of two (metadata commands reach shard 0, which
    runs the cluster node, and every change reaches the other shard as it is applied)."""
    with running_cluster(tmp_path, 3, f"commit_timeout_ms = {COMMIT_TIMEOUT_MS}\n",
                         {"LURCHER_SYSTEM_SHARDING_SHARDS": str(request.param)}) as servers:
        yield servers


async def metadata_of(server: LurcherServer) -> tuple:
    """What ``server`` serves: streams with their topics (partition counts, groups), users,
    and root's tokens."""
    client = await observer(server)
    try:
        streams = []
        for stream in await client.get_streams():
            topics = []
            for topic in await client.get_topics(stream.id):
                groups = await client.get_consumer_groups(stream.id, topic.id)
                topics.append((topic.id, topic.name, topic.partitions_count,
                               sorted(g.name for g in groups)))
            streams.append((stream.id, stream.name, sorted(topics)))
        users = sorted(u.username for u in await client.get_users())
        tokens = sorted(t.name for t in await client.get_personal_access_tokens())
        return sorted(streams), users, tokens
    finally:
        await client.close()


async def same_everywhere(servers: list[LurcherServer], expected: tuple) -> None:
    for server in servers:
        async def matches(server=server) -> bool:
            return await metadata_of(server) == expected
        await eventually(matches, f"{server.tcp_address} serves {expected}")


async def test_a_stream_and_topic_created_on_the_leader_appear_on_every_node(
        nodes: list[LurcherServer]) -> None:
    leader = await leader_of(nodes)
    client = IggyClient(leader.tcp_address)
    await client.connect()
    await client.login_user(ROOT_USERNAME, ROOT_PASSWORD)
    await client.create_stream("orders")
    await client.create_topic("orders", "created", partitions_count=2)
    expected = await metadata_of(leader)
    assert expected[0] == [(0, "orders", [(0, "created", 2, [])])]
    await same_everywhere(nodes, expected)


async def test_changes_made_through_a_follower_are_answered_and_appear_everywhere(
        nodes: list[LurcherServer]) -> None:
    leader = await leader_of(nodes)
    follower = next(s for s in nodes if s is not leader)
    client = await observer(follower)
    try:
        stream = await client.create_stream("payments")
        assert (stream.header.id, stream.header.name) == (0, "payments")
        topic = await client.create_topic("payments", "incoming", partitions_count=1)
        assert (topic.header.id, len(topic.partitions)) == (0, 1)
        await client.create_partitions("payments", "incoming", 2)
        await client.create_topic("payments", "doomed")
        await client.delete_topic("payments", "doomed")
        await client.create_consumer_group("payments", "incoming", "auditors")
        await client.update_stream("payments", "payments-v2")
        await client.create_user("alice", "secret-pass")
        await client.create_personal_access_token("ci-token")
        with pytest.raises(IggyError) as refused:
            await client.create_stream("payments-v2")
        assert refused.value.code == ErrorCode.STREAM_NAME_ALREADY_EXISTS
        here = await metadata_of(follower)  # read-your-writes on the node that answered
    finally:
        await client.close()
    assert here == ([(0, "payments-v2", [(0, "incoming", 3, ["auditors"])])],
                    ["alice", "iggy"], ["ci-token"])
    await same_everywhere(nodes, here)


async def test_concurrent_changes_on_every_node_all_apply_once(
        nodes: list[LurcherServer]) -> None:
    await leader_of(nodes)
    clients = [await observer(server) for server in nodes]
    try:
        await asyncio.gather(*(client.create_stream(f"s-{i}-{j}")
                               for i, client in enumerate(clients) for j in range(4)))
    finally:
        for client in clients:
            await client.close()
    expected = await metadata_of(nodes[0])
    assert sorted(name for _, name, _ in expected[0]) == sorted(
        f"s-{i}-{j}" for i in range(3) for j in range(4))
    assert sorted(sid for sid, _, _ in expected[0]) == list(range(12))
    await same_everywhere(nodes, expected)


def partition_dirs(server: LurcherServer) -> list[str]:
    """The partition directories of stream 0's topic 0 on ``server``'s disk."""
    root = entity_path(server.data_dir, 0, 0) / "partitions"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


async def test_a_deletion_one_node_cannot_move_aside_is_applied_there_all_the_same(
        tmp_path: Path) -> None:
    """Node 2's ``deleting/`` is replaced by a file, so moving a directory aside fails
    there (CannotDelete...Directory on a single node). The group committed the deletion:
    node 2 applies it as well (on the old code it kept the partitions, then the topic, in
    its metadata for good, refused the topic created again, and served the deleted
    partition's messages as the new one's)."""
    with running_cluster(tmp_path, 3, f"commit_timeout_ms = {COMMIT_TIMEOUT_MS}\n") as nodes:
        connected = [await observer(server) for server in nodes]
        try:
            await topic_everywhere(connected, "d", "t", 3)
            for p in range(3):
                await connected[0].send_messages("d", "t", [f"old-{p}".encode()], p)
            blocked = nodes[2].data_dir / TOMBSTONE_DIR
            blocked.rmdir()
            blocked.write_text("not a directory")
            await connected[0].delete_partitions("d", "t", 2)
            await same_everywhere(nodes, await metadata_of(nodes[0]))
            assert partition_dirs(nodes[2]) == ["0"]
            await connected[0].delete_topic("d", "t")
            await same_everywhere(nodes, await metadata_of(nodes[0]))
            assert not entity_path(nodes[2].data_dir, 0, 0).exists()
            await connected[0].create_topic("d", "t", 3)
            await same_everywhere(nodes, await metadata_of(nodes[0]))
            for client in connected:
                for p in range(3):
                    assert await eventually(lambda: _polled_or_none(client, p),
                                            f"partition {p} served") == ([],)
            assert "removing in place" in nodes[2].log_tail(100_000)
        finally:
            for client in connected:
                await client.close()


async def _polled_or_none(client, partition: int) -> tuple[list] | None:
    """(the messages polled,), or None while the partition's group is still starting."""
    try:
        return (await polled(client, "d", "t", partition),)
    except IggyError:
        return None


@pytest.mark.slow
async def test_with_one_node_killed_changes_go_on_and_it_catches_up_when_restarted(
        nodes: list[LurcherServer]) -> None:
    leader = await leader_of(nodes)
    leader.kill()  # the hardest one to lose: the group must elect another primary
    survivor = next(s for s in nodes if s.running)
    client = await observer(survivor)
    try:
        await client.create_stream("while-down")
        await client.create_topic("while-down", "t", partitions_count=3)
        await client.create_user("bob", "bob-password")
    finally:
        await client.close()
    expected = await metadata_of(survivor)
    await same_everywhere([s for s in nodes if s.running], expected)
    leader.restart()
    await same_everywhere(nodes, expected)
    client = await observer(leader)  # the restarted node takes changes again
    try:
        await client.create_stream("after-restart")
    finally:
        await client.close()
    await same_everywhere(nodes, await metadata_of(leader))


@pytest.mark.slow
async def test_with_two_nodes_down_a_change_fails_with_task_timeout_in_bounded_time(
        nodes: list[LurcherServer]) -> None:
    await leader_of(nodes)
    for server in nodes[1:]:
        server.kill()
    client = await observer(nodes[0])
    try:
        started = time.monotonic()
        with pytest.raises(IggyError) as failed:
            await asyncio.wait_for(client.create_stream("no-quorum"), 30)
        elapsed = time.monotonic() - started
        assert failed.value.code == ErrorCode.TASK_TIMEOUT, failed.value
        assert elapsed < COMMIT_TIMEOUT_MS / 1000 * 3, elapsed
        assert "no-quorum" not in {s.name for s in await client.get_streams()}
    finally:
        await client.close()


def logged_in_on(server: LurcherServer, username: str, password: str = "",
                 token: str | None = None) -> UserClient:
    """A client of ``server`` logged in once the user (or token) has reached it."""
    deadline = time.monotonic() + LIVENESS_S
    while True:
        client = UserClient(server.tcp_address)
        try:
            client.login_as(username, password) if token is None else client.login_token(token)
            return client
        except StatusError:
            client.close()
            assert time.monotonic() < deadline, f"{username} cannot log in on {server}"
            time.sleep(0.1)


def test_a_removed_login_ends_its_sessions_on_every_node(nodes: list[LurcherServer]) -> None:
    """The change is made on node 0; the sessions on nodes 1 and 2 were only refused at
    their next command before (their connections, and a group membership, stayed)."""
    with UserClient(nodes[0].tcp_address) as root:
        root.login_as(ROOT_USERNAME, ROOT_PASSWORD)
        for username in ("ivan", "judy", "kim"):
            root.create_user(username, f"{username}-pw")
        with UserClient(nodes[0].tcp_address) as kim:
            kim.login_as("kim", "kim-pw")
            token = kim.create_token("kims-token")
        others = nodes[1:]
        ivans = [logged_in_on(node, "ivan", "ivan-pw") for node in others]
        judys = [logged_in_on(node, "judy", "judy-pw") for node in others]
        kims = [logged_in_on(node, "kim", token=token) for node in others]
        root.call(UPDATE_USER, update_user_payload("ivan", status=INACTIVE))
        root.call(DELETE_USER, raw.ident("judy"))
        with UserClient(nodes[0].tcp_address) as kim:
            kim.login_as("kim", "kim-pw")
            kim.call(DELETE_PAT, raw.name("kims-token"))
        for client in ivans + judys + kims:
            assert client.ended_by_server()
            client.close()
