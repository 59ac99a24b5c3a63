"""Iggy's leader-redirection scenarios (bdd leader_redirection.feature, server-0.8.0) as our
own tests: real ``lurcher-server`` processes forming a cluster, the official
``apache-iggy==0.8.0`` client following the leader GetClusterMetadata names.

Where a client ended up is read on the servers: each node's client list (through our SDK,
whose observer session is left out) shows the official client's session on the node it is
connected to. A stream it creates exists on every node (metadata is replicated: see
test_replicated_metadata).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from apache_iggy import IggyClient

from tests.support.cluster import LIVENESS_S, eventually, leader_of, observer, running_cluster
from tests.support.official import ROOT_PASSWORD, ROOT_USERNAME
from tests.support.server import LurcherServer, run_server_to_exit

@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[LurcherServer]]:
    with running_cluster(tmp_path, 2, graceful=True) as servers:
        yield servers


async def leader_and_follower(servers: list[LurcherServer]) -> tuple[LurcherServer,
                                                                     LurcherServer]:
    leader = await leader_of(servers)
    return leader, next(s for s in servers if s is not leader)


async def official_sessions(server: LurcherServer) -> int:
    """Logged-in sessions on ``server`` other than the observer's own."""
    client = await observer(server)
    me = (await client.get_me()).header.client_id
    clients = await client.get_clients()
    await client.close()
    return sum(1 for c in clients if c.client_id != me and c.user_id != 0xFFFF_FFFF)


async def official_client(server: LurcherServer) -> IggyClient:
    client = IggyClient(server.tcp_address)
    await client.connect()
    await client.login_user(ROOT_USERNAME, ROOT_PASSWORD)
    return client


async def settle_sessions(server: LurcherServer, expected: int) -> int:
    """The session count once it reaches ``expected`` (or the last seen after the bound)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LIVENESS_S
    while (count := await official_sessions(server)) != expected and loop.time() < deadline:
        await asyncio.sleep(0.2)
    return count


async def has_stream(server: LurcherServer, name: str) -> bool:
    return name in await stream_names(server)


async def stream_names(server: LurcherServer) -> set[str]:
    client = await observer(server)
    streams = await client.get_streams()
    await client.close()
    return {s.name for s in streams}


async def test_a_client_of_the_follower_is_redirected_to_the_leader(
        cluster: list[LurcherServer]) -> None:
    leader, follower = await leader_and_follower(cluster)
    client = await official_client(follower)
    assert await settle_sessions(leader, 1) == 1
    assert await official_sessions(follower) == 0
    await client.create_stream("test-stream")
    assert "test-stream" in await stream_names(leader)
    await eventually(lambda: has_stream(follower, "test-stream"), "the follower has the stream")


async def test_a_client_of_the_leader_stays(cluster: list[LurcherServer]) -> None:
    leader, follower = await leader_and_follower(cluster)
    client = await official_client(leader)
    await client.create_stream("direct")
    assert await official_sessions(leader) == 1
    assert await official_sessions(follower) == 0
    assert "direct" in await stream_names(leader)


async def test_a_single_server_without_clustering_keeps_its_client(tmp_path: Path) -> None:
    with LurcherServer().start(tmp_path / "single") as server:
        client = await official_client(server)
        await client.create_stream("single-server-stream")
        assert await official_sessions(server) == 1
        assert "single-server-stream" in await stream_names(server)


async def test_two_clients_converge_on_the_same_leader(cluster: list[LurcherServer]) -> None:
    leader, follower = await leader_and_follower(cluster)
    client_a = await official_client(leader)
    client_b = await official_client(follower)
    assert await settle_sessions(leader, 2) == 2
    assert await official_sessions(follower) == 0
    await client_a.ping()
    await client_b.ping()


@pytest.mark.parametrize("section, words", [
    ('[cluster]\nenabled = true\nsecret = ""\n', "without a secret"),
    ('[cluster]\nenabled = true\nsecret = "k"\n[[cluster.node.others]]\nname = "b"\n'
     'ip = "127.0.0.1"\n', "no ports.replication"),
    ('[cluster]\nenabled = true\nsecret = "k"\n[[cluster.node.others]]\nname = "b"\n'
     'ip = "127.0.0.1"\nport = 1\n', "unknown field `port`"),
])
def test_an_unusable_cluster_section_is_refused_at_start_in_one_line(
        tmp_path: Path, section: str, words: str) -> None:
    config = tmp_path / "bad.toml"
    config.write_text(section)
    result = run_server_to_exit(["--config", str(config)], {"LURCHER_SYSTEM_PATH": "data"},
                                tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.stderr
