"""Iggy's leader-redirection scenarios (bdd leader_redirection.feature, server-0.8.0) as our
own tests: real ``lurcher-server`` processes forming a cluster, the official
``apache-iggy==0.8.0`` client following the leader GetClusterMetadata names.

Where a client ended up is read on the servers: each node's client list (through our SDK,
whose observer session is left out) shows the official client's session on the node it is
connected to, and a stream it created exists on that node (metadata is not replicated yet,
so it exists nowhere else).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from apache_iggy import IggyClient

from lurcher.core.wire.responses.cluster import NodeRole, NodeStatus
from lurcher.sdk import Client
from tests.support.official import ROOT_PASSWORD, ROOT_USERNAME
from tests.support.server import LurcherServer, free_ports, run_server_to_exit

NAMES = ("node-0", "node-1")
LIVENESS_S = 30.0  # a bound on waiting for an election, not a performance figure


def node_toml(me: int, tcp: list[int], replication: list[int]) -> str:
    others = "".join(
        f'\n[[cluster.node.others]]\nname = "{NAMES[i]}"\nip = "127.0.0.1"\n'
        f'ports = {{ tcp = {tcp[i]}, replication = {replication[i]} }}\n'
        for i in range(len(NAMES)) if i != me)
    return (f'[tcp]\naddress = "127.0.0.1:{tcp[me]}"\n\n'
            f'[cluster]\nenabled = true\nname = "redirect-test"\nsecret = "s3cret"\n\n'
            f'[cluster.node.current]\nname = "{NAMES[me]}"\nip = "127.0.0.1"\n'
            f'replication_port = {replication[me]}\n{others}')


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[list[LurcherServer]]:
    tcp, replication = free_ports(2), free_ports(2)
    servers = []
    try:
        for me in range(2):
            config = tmp_path / f"{NAMES[me]}.toml"
            config.write_text(node_toml(me, tcp, replication))
            servers.append(LurcherServer().start(
                tmp_path / NAMES[me], {"LURCHER_TCP_ADDRESS": f"127.0.0.1:{tcp[me]}"},
                args=("--with-default-root-credentials", "--config", str(config))))
        yield servers
    finally:
        for server in servers:
            server.close()


async def observer(server: LurcherServer) -> Client:
    client = Client.from_connection_string(f"iggy://iggy:iggy@{server.tcp_address}",
                                           heartbeat_interval_s=None)
    await client.connect()
    return client


async def leader_of(servers: list[LurcherServer]) -> tuple[LurcherServer, LurcherServer]:
    """(leader, follower) once both nodes name the same healthy leader."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LIVENESS_S
    while True:
        seen = []
        for server in servers:
            client = await observer(server)
            meta = await client.get_cluster_metadata()
            await client.close()
            seen.append({n.tcp_port for n in meta.nodes
                         if n.role == NodeRole.LEADER and n.status == NodeStatus.HEALTHY})
        if len(seen[0]) == 1 and seen[0] == seen[1]:
            port = seen[0].pop()
            leader = next(s for s in servers if s.tcp_port == port)
            return leader, next(s for s in servers if s is not leader)
        assert loop.time() < deadline, f"no agreed leader within {LIVENESS_S}s: {seen}"
        await asyncio.sleep(0.2)


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


async def stream_names(server: LurcherServer) -> set[str]:
    client = await observer(server)
    streams = await client.get_streams()
    await client.close()
    return {s.name for s in streams}


async def test_a_client_of_the_follower_is_redirected_to_the_leader(
        cluster: list[LurcherServer]) -> None:
    leader, follower = await leader_of(cluster)
    client = await official_client(follower)
    assert await settle_sessions(leader, 1) == 1
    assert await official_sessions(follower) == 0
    await client.create_stream("test-stream")
    assert "test-stream" in await stream_names(leader)
    assert "test-stream" not in await stream_names(follower)


async def test_a_client_of_the_leader_stays(cluster: list[LurcherServer]) -> None:
    leader, follower = await leader_of(cluster)
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
    leader, follower = await leader_of(cluster)
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
