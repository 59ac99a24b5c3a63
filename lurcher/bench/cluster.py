"""A local lurcher cluster for the benchmark: ``nodes`` ``lurcher-server`` processes on
loopback, each with its data directory, TCP and replication ports, under one supervisor.

``start_lurcher_cluster`` writes one ``[cluster]`` configuration per node (``node-0`` ...,
every node listing the others with their TCP and replication ports, a fresh secret), starts
``python -m lurcher.bench.cluster`` (the supervisor) over them and returns a
``ManagedServer`` whose pid is the supervisor's (so the bench's monitor sums the CPU and
memory of every node, its children) and whose address lists the nodes' addresses of the
benchmark's transport, comma-separated; actors spread over them (``node_address``).

Invariants: ``start_lurcher_cluster`` returns only once every node wrote its endpoints and
node 0 reports a healthy leader and every node healthy; the supervisor stops every node
when it gets SIGTERM (and the bench's ``stop`` kills the whole process group after a
timeout), so no node outlives the run.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lurcher.bench.servers import (
    LURCHER_LISTENERS,
    START_TIMEOUT_S,
    ManagedServer,
    ServerStartError,
    _spawn,
    _wait,
    free_port,
    lurcher_env,
)
from lurcher.cluster.config import node_toml

NODES = 3


def node_address(addresses: str, actor_id: int) -> str:
    """The node an actor talks to: the cluster's addresses taken in turn."""
    nodes = addresses.split(",")
    return nodes[actor_id % len(nodes)]


def start_lurcher_cluster(enforce_fsync: bool = False, transport: str = "tcp",
                          nodes: int = NODES) -> ManagedServer:
    """``nodes`` lurcher nodes (root iggy/iggy) under a supervisor. Raises ServerStartError."""
    root = Path(tempfile.mkdtemp(prefix="lurcher-cluster-bench-"))
    tcp, replication = [free_port() for _ in range(nodes)], [free_port() for _ in range(nodes)]
    secret = secrets.token_hex(16)
    configs = []
    for me in range(nodes):
        data_dir = root / f"node-{me}"
        data_dir.mkdir()
        config = root / f"node-{me}.toml"
        config.write_text(node_toml(me, tcp, replication, secret, name="bench-cluster",
                                     data_dir=str(data_dir)))
        configs.append(str(config))
    env = lurcher_env(root, enforce_fsync, transport)
    for key in ("LURCHER_SYSTEM_PATH", "LURCHER_TCP_ADDRESS"):  # per node, in its file
        env.pop(key)
    proc = _spawn("lurcher-cluster", [sys.executable, "-m", "lurcher.bench.cluster", *configs],
                  root, env)
    server = ManagedServer("lurcher-cluster", proc, "", root)
    key = LURCHER_LISTENERS[transport][1]
    endpoints = [root / f"node-{me}" / "runtime" / "endpoints.json" for me in range(nodes)]

    def ready() -> bool:
        try:
            found = [json.loads(path.read_text())[key] for path in endpoints]
        except (OSError, ValueError, KeyError):
            return False
        server.address = ",".join(found)
        return True
    _wait(server, ready)
    try:
        _wait_for_leader(f"127.0.0.1:{tcp[0]}", nodes)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_for_leader(address: str, nodes: int) -> None:
    """Until node 0 sees a leader and every node healthy (from a thread without a running
    event loop). Raises ServerStartError."""
    from lurcher.core.wire.errors import IggyError
    from lurcher.core.wire.responses.cluster import NodeRole, NodeStatus
    from lurcher.sdk import Client

    async def agreed() -> bool:
        client = Client.from_connection_string(f"iggy://iggy:iggy@{address}",
                                               heartbeat_interval_s=None)
        try:
            async with client:
                meta = await client.get_cluster_metadata()
        except (OSError, IggyError):  # node 0 still starting
            return False
        healthy = [n for n in meta.nodes if n.status == NodeStatus.HEALTHY]
        return len(healthy) == nodes and any(n.role == NodeRole.LEADER for n in healthy)

    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if asyncio.run(agreed()):
            return
        time.sleep(0.1)
    raise ServerStartError(f"the bench cluster elected no leader within {START_TIMEOUT_S}s")


def supervise(configs: list[str]) -> int:
    """Run one node per configuration file until SIGTERM or until one exits, then stop them
    all; the worst exit status."""
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.append(signum))
    nodes = [subprocess.Popen([sys.executable, "-m", "lurcher.server",
                               "--with-default-root-credentials", "--config", config],
                              stdin=subprocess.DEVNULL) for config in configs]
    while not stopping and all(node.poll() is None for node in nodes):
        time.sleep(0.2)
    for node in nodes:
        if node.poll() is None:
            node.terminate()
    return max(abs(node.wait()) for node in nodes)


if __name__ == "__main__":
    sys.exit(supervise(sys.argv[1:]))
