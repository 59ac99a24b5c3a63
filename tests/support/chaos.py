"""A 3-node cluster whose inter-node links pass through relays the test controls, and the
faults a chaos test injects into it.

Owns: ``ChaosCluster`` (real ``lurcher-server`` nodes on loopback, each with its data
directory, fixed TCP/HTTP/replication ports, and one ``TcpRelay`` per directed link: node
``i`` reaches node ``j`` at ``relays[i, j]``, which forwards to ``j``'s replication port, so
the ``[[cluster.node.others]]`` of each node name relay ports), the fault plan drawn from a
seed (``plan_faults``: the same seed gives the same faults), injecting a fault and healing
it, and waiting until the cluster has converged after a heal.

Faults: ``kill`` (SIGKILL of the node's process group, healed by a restart on the same data
directory and configuration), ``stop`` (SIGSTOP of the group, healed by SIGCONT), ``cut``
(every relay to or from the node aborts its connections and refuses new ones, healed by
letting them through again). Invariant: at most one node is faulty at a time: ``inject``
refuses a second fault before the first is healed, and a heal returns only once the node
is back (restarted, continued, or relinked) and every node reports every replication group
in normal operation in the same view (``converge``, bounded by ``LIVENESS_S``).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
from dataclasses import dataclass
from pathlib import Path

from lurcher.sdk import Client
from tests.support.cluster import LIVENESS_S, node_toml
from tests.support.server import LurcherServer, free_ports
from tests.support.tcp_relay import TcpRelay

KINDS = ("kill", "stop", "cut")
HOLD_S = (0.3, 2.0)  # how long a fault lasts: below and above the 1 s view timeout
PAUSE_S = (0.2, 1.0)  # healthy time between two faults


@dataclass(frozen=True)
class Fault:
    kind: str
    node: int
    hold_s: float
    pause_s: float

    def __str__(self) -> str:
        return f"{self.kind} node-{self.node} for {self.hold_s:.2f}s"


def plan_faults(seed: int, count: int, nodes: int = 3) -> list[Fault]:
    """``count`` faults drawn from ``seed`` alone (a replay gives the same plan)."""
    rng = random.Random(seed)
    return [Fault(rng.choice(KINDS), rng.randrange(nodes), round(rng.uniform(*HOLD_S), 2),
                  round(rng.uniform(*PAUSE_S), 2)) for _ in range(count)]


class ChaosCluster:
    """``count`` nodes behind relays; ``start`` it, ``inject``/``heal`` faults, ``close``."""

    def __init__(self, root: Path, count: int = 3, extra: str = "",
                 env: dict[str, str] | None = None) -> None:
        self.root, self.count, self.extra, self.env = root, count, extra, env or {}
        self.nodes = [LurcherServer() for _ in range(count)]
        self.relays: dict[tuple[int, int], TcpRelay] = {}
        self.faulty: Fault | None = None
        self.tcp, self.http, self.replication = (free_ports(count) for _ in range(3))

    @property
    def addresses(self) -> list[str]:
        return [f"127.0.0.1:{port}" for port in self.tcp]

    async def start(self) -> "ChaosCluster":
        for i in range(self.count):
            for j in range(self.count):
                if i != j:
                    target = ("127.0.0.1", self.replication[j])
                    self.relays[i, j] = await TcpRelay(target).start()
        await asyncio.gather(*(asyncio.to_thread(self._start_node, i)
                               for i in range(self.count)))
        await self.converge()
        return self

    def _start_node(self, me: int) -> None:
        """Node ``me``'s configuration names the relays it dials; its own port is real."""
        dialed = [self.replication[me] if j == me else self.relays[me, j].port
                  for j in range(self.count)]
        config = self.root / f"node-{me}.toml"
        config.write_text(node_toml(me, self.tcp, dialed, self.extra))
        env = {**self.env, "LURCHER_TCP_ADDRESS": self.addresses[me],
               "LURCHER_HTTP_ENABLED": "true", "LURCHER_HTTP_ADDRESS": f"127.0.0.1:{self.http[me]}"}
        self.nodes[me].start(self.root / f"node-{me}", env,
                             args=("--with-default-root-credentials", "--config", str(config)))

    def links_of(self, node: int) -> list[TcpRelay]:
        return [relay for (i, j), relay in self.relays.items() if node in (i, j)]

    # ---- faults ---------------------------------------------------------------------

    async def inject(self, fault: Fault) -> None:
        assert self.faulty is None, f"{fault} while {self.faulty} is not healed"
        self.faulty = fault
        server = self.nodes[fault.node]
        if fault.kind == "kill":
            await asyncio.to_thread(server.kill)
        elif fault.kind == "stop":
            os.killpg(server.pid, signal.SIGSTOP)
        else:
            for relay in self.links_of(fault.node):
                relay.cut()

    async def heal(self) -> None:
        """Undo the current fault, then wait for the cluster to converge."""
        fault = self.faulty
        assert fault is not None
        server = self.nodes[fault.node]
        if fault.kind == "kill":
            await asyncio.to_thread(server.restart)
        elif fault.kind == "stop":
            os.killpg(server.pid, signal.SIGCONT)
        else:
            for relay in self.links_of(fault.node):
                relay.heal()
        self.faulty = None
        await self.converge()

    # ---- observing ------------------------------------------------------------------

    async def status(self, node: int) -> dict:
        """Node ``node``'s ``GET /cluster/status`` (over its HTTP API)."""
        client = Client.from_connection_string(
            f"iggy+http://iggy:iggy@127.0.0.1:{self.http[node]}",
            heartbeat_interval_s=None, reconnection_enabled=False)
        async with client:
            return await asyncio.wait_for(client.get_cluster_status(), 5)

    async def converged(self) -> bool:
        """Every node sees every group in normal operation, in the same view."""
        views: dict[int, set[int]] = {}
        for node in range(self.count):
            try:
                status = await self.status(node)
            except Exception:  # noqa: BLE001 - a node still starting or recovering
                return False
            for group in status["groups"]:
                if group["status"] != "normal":
                    return False
                views.setdefault(group["group"], set()).add(group["view"])
        return bool(views) and all(len(seen) == 1 for seen in views.values())

    async def converge(self, bound_s: float = LIVENESS_S) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bound_s
        while not await self.converged():
            assert loop.time() < deadline, (
                f"the cluster did not converge within {bound_s}s after a heal: "
                f"{[await self._status_or_error(n) for n in range(self.count)]}")
            await asyncio.sleep(0.2)

    async def _status_or_error(self, node: int) -> object:
        try:
            return (await self.status(node))["groups"]
        except Exception as e:  # noqa: BLE001 - reported in the assertion
            return repr(e)

    def partition_dirs(self, node: int) -> Path:
        assert self.nodes[node].data_dir is not None
        return self.nodes[node].data_dir / "streams"

    async def close(self) -> None:
        """Continue a stopped node, then kill every node; close the relays."""
        if self.faulty is not None and self.faulty.kind == "stop":
            os.killpg(self.nodes[self.faulty.node].pid, signal.SIGCONT)
        for server in self.nodes:
            if server.running:
                await asyncio.to_thread(server.kill)
        for relay in self.relays.values():
            await relay.close()
