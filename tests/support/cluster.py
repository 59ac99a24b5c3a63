"""A cluster of real ``lurcher-server`` processes on loopback, for the tests of tests/cluster.

Owns: each node's ``[cluster]`` configuration (node ``i`` is named ``node-i``; every node
lists the others with their TCP and replication ports), starting the nodes, and asking them
who leads. Invariant: ``start_cluster`` returns only once every node is ready; waiting for
an elected leader is bounded by ``LIVENESS_S``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from lurcher.cluster import config as cluster_config
from lurcher.core.wire.responses.cluster import NodeRole, NodeStatus
from lurcher.sdk import Client
from tests.support.server import LurcherServer, free_ports

LIVENESS_S = 30.0  # a bound on waiting for an election, not a performance figure


def node_toml(me: int, tcp: list[int], replication: list[int], extra: str = "") -> str:
    """Node ``me``'s configuration; ``extra``: more keys of the ``[cluster]`` table."""
    return cluster_config.node_toml(me, tcp, replication, "s3cret", name="test-cluster",
                                    extra=extra)


def start_cluster(root: Path, count: int, extra: str | Sequence[str] = "",
                  env: dict[str, str] | None = None) -> list[LurcherServer]:
    """``count`` running nodes, each with its data directory under ``root`` (``env``: more
    ``LURCHER_*`` settings; ``extra``: ``node_toml``'s, for every node or one per node); the
    caller closes them. When one fails to start, those already started are killed."""
    tcp, replication = free_ports(count), free_ports(count)
    extras = [extra] * count if isinstance(extra, str) else list(extra)
    servers: list[LurcherServer] = []
    try:
        for me in range(count):
            config = root / f"node-{me}.toml"
            config.write_text(node_toml(me, tcp, replication, extras[me]))
            servers.append(LurcherServer().start(
                root / f"node-{me}", {**(env or {}),
                                      "LURCHER_TCP_ADDRESS": f"127.0.0.1:{tcp[me]}"},
                args=("--with-default-root-credentials", "--config", str(config))))
    except BaseException:
        for server in servers:
            server.kill()
        raise
    return servers


@contextmanager
def running_cluster(root: Path, count: int, extra: str | Sequence[str] = "",
                    env: dict[str, str] | None = None,
                    graceful: bool = False) -> Iterator[list[LurcherServer]]:
    """``start_cluster``'s nodes for the ``with`` block. When it ends, those still running
    are killed, or with ``graceful`` stopped by SIGTERM (a node that does not exit cleanly
    fails the test); a node the test stopped itself is left as it is."""
    servers = start_cluster(root, count, extra, env)
    try:
        yield servers
    finally:
        for server in servers:
            if server.running:
                server.stop() if graceful else server.kill()


async def observer(server: LurcherServer) -> Client:
    """Our SDK logged in as root on ``server`` (it stays there: no leader redirection)."""
    client = Client.from_connection_string(f"iggy://iggy:iggy@{server.tcp_address}",
                                           heartbeat_interval_s=None)
    await client.connect()
    return client


async def leaders_seen(server: LurcherServer) -> set[int]:
    client = await observer(server)
    try:
        meta = await client.get_cluster_metadata()
    finally:
        await client.close()
    return {n.tcp_port for n in meta.nodes
            if n.role == NodeRole.LEADER and n.status == NodeStatus.HEALTHY}


async def leader_of(servers: list[LurcherServer]) -> LurcherServer:
    """The leader, once every running node names the same healthy one."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LIVENESS_S
    running = [s for s in servers if s.running]
    while True:
        seen = [await leaders_seen(server) for server in running]
        if len(seen[0]) == 1 and all(s == seen[0] for s in seen):
            port = seen[0].pop()
            return next(s for s in servers if s.tcp_port == port)
        assert loop.time() < deadline, f"no agreed leader within {LIVENESS_S}s: {seen}"
        await asyncio.sleep(0.2)


async def eventually(check, what: str, bound_s: float = LIVENESS_S):
    """``await check()`` until it returns something true (returned), at most ``bound_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound_s
    while not (value := await check()):
        assert loop.time() < deadline, f"not within {bound_s}s: {what}"
        await asyncio.sleep(0.1)
    return value
