"""Three cluster nodes over real loopback TCP and real journal files, in one event loop.

The replication core runs on the network: submissions commit through a quorum; killing the
primary's node moves the group to another primary and submissions go on; the node restarted
on its data directory catches up; a node with the wrong secret is refused and logged.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from lurcher.cluster.config import decode_cluster
from lurcher.cluster.host import ClusterNode
from lurcher.core.replication.sim.model import AppendLog
from tests.support.server import free_ports

NAMES = ["n0", "n1", "n2"]
LIVENESS_S = 20.0  # a bound on waiting for progress, not a performance figure


def node_config(me: int, ports: list[int], secret: str = "k") -> object:
    others = [{"name": NAMES[i], "ip": "127.0.0.1", "ports": {"replication": ports[i]}}
              for i in range(len(NAMES)) if i != me]
    return decode_cluster({
        "enabled": True, "name": "test", "secret": secret, "tick_ms": 5,
        "node": {"current": {"name": NAMES[me], "ip": "127.0.0.1", "replication_port": ports[me]},
                 "others": others}})


async def start_node(me: int, ports: list[int], root: Path, secret: str = "k") -> ClusterNode:
    node = ClusterNode(node_config(me, ports, secret), root / NAMES[me], {0: AppendLog})
    await node.start()
    return node


async def submit_all(node: ClusterNode, bodies: list[bytes]) -> list[bytes]:
    return await asyncio.wait_for(asyncio.gather(*(node.submit(0, b) for b in bodies)),
                                  LIVENESS_S)


def positions(results: list[bytes]) -> list[int]:
    return [int.from_bytes(r[:8], "little") for r in results]


async def wait_until(predicate, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LIVENESS_S
    while not predicate():
        assert loop.time() < deadline, f"not within {LIVENESS_S}s: {what}"
        await asyncio.sleep(0.02)


async def test_commits_survive_the_loss_of_the_primary_node(tmp_path: Path) -> None:
    ports = free_ports(3)
    nodes = [await start_node(i, ports, tmp_path) for i in range(3)]
    try:
        first = await submit_all(nodes[0], [f"a{i}".encode() for i in range(30)])
        first += await submit_all(nodes[2], [f"b{i}".encode() for i in range(30)])
        assert sorted(positions(first)) == list(range(1, 61))
        primary = nodes[0].status(0)["primary"]
        await nodes[primary].close()
        survivor = nodes[(primary + 1) % 3]
        after = await submit_all(survivor, [f"c{i}".encode() for i in range(30)])
        assert sorted(positions(after)) == list(range(61, 91))
        assert survivor.status(0)["primary"] != primary
        nodes[primary] = await start_node(primary, ports, tmp_path)
        restarted = nodes[primary].groups[0].replica
        await wait_until(lambda: len(restarted.service.values) >= 90,
                         "the restarted node catches up")
        values = [n.groups[0].replica.service.values[:90] for n in nodes]
        assert values[0] == values[1] == values[2]
    finally:
        for node in nodes:
            await node.close()


async def test_a_node_with_the_wrong_secret_is_refused_and_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ports = free_ports(3)
    caplog.set_level(logging.WARNING, logger="lurcher.cluster.links")
    good = [await start_node(i, ports, tmp_path) for i in (0, 1)]
    intruder = await start_node(2, ports, tmp_path, secret="wrong")
    try:
        result = await submit_all(good[0], [b"x"])
        assert positions(result) == [1]
        await wait_until(lambda: "wrong cluster secret" in caplog.text, "the refusal is logged")
        assert intruder.groups[0].replica.service.values == []
        assert intruder.links.outgoing == {}
    finally:
        for node in (*good, intruder):
            await node.close()
