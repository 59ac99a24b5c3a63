"""Chaos on a 3-node cluster: at least 20 faults while producers and consumers run.

Three real ``lurcher-server`` nodes on loopback, their links through relays the test
controls (``tests/support/chaos.py``). Faults are drawn from a seed, printed at the start
and in the failure message; ``CHAOS_SEED=<seed>`` replays the same plan (``CHAOS_FAULTS``
changes how many). One node at most is faulty at a time, and each heal waits for the
cluster to converge. Throughout, two producers (our SDK, with ids; the official 0.8.0
client) send with server deduplication on and resend every unacknowledged batch, and two
consumers (one per client) read every partition. Afterwards (``chaos_checks``), on every
node: every acknowledged message is present, exactly once (the official client's may repeat
as whole batches: it cannot set ids and resends by itself after a reconnection), in order
per partition; nothing a consumer received has disappeared; then, with the nodes stopped,
the replicas' segment files are byte-identical.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path

import pytest

from lurcher.sdk import Client
from tests.support.chaos import ChaosCluster, plan_faults
from tests.support.chaos_checks import (
    Findings,
    check_consumers,
    check_disk,
    check_producers,
    read_log,
)
from tests.support.chaos_traffic import (
    STREAM,
    TOPIC,
    Consumer,
    OfficialSide,
    Producer,
    SdkSide,
)

PARTITIONS = 3
REPLICATION_FACTOR = 3
DEDUPLICATION = {"LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_ENABLED": "true",
                 "LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_EXPIRY": "1 h",
                 "LURCHER_SYSTEM_MESSAGE_DEDUPLICATION_MAX_ENTRIES": "0"}
WARM_UP_S = 1.0
DRAIN_S = 30.0  # the batch under way when the faults end: bound on getting it acknowledged
SETTLE_S = 15.0  # bound on the replicas reaching the same length after the last heal


def chaos_seed() -> int:
    return int(os.environ.get("CHAOS_SEED") or random.SystemRandom().randrange(2**32))


async def create_topic(cluster: ChaosCluster) -> None:
    """The stream and topic, created on node 0 and awaited on every node."""
    async with Client.from_connection_string(
            f"iggy://iggy:iggy@{cluster.addresses[0]}", heartbeat_interval_s=None) as client:
        await client.create_stream(STREAM)
        await client.create_topic(STREAM, TOPIC, PARTITIONS,
                                  replication_factor=REPLICATION_FACTOR)
    for address in cluster.addresses:
        async with Client.from_connection_string(
                f"iggy://iggy:iggy@{address}", heartbeat_interval_s=None) as client:
            for _ in range(100):
                if await client.get_topic(STREAM, TOPIC) is not None:
                    break
                await asyncio.sleep(0.1)


async def lengths(cluster: ChaosCluster) -> list[list[int]]:
    """Each node's message count per partition."""
    out = []
    for address in cluster.addresses:
        async with Client.from_connection_string(
                f"iggy://iggy:iggy@{address}", heartbeat_interval_s=None) as client:
            topic = await client.get_topic(STREAM, TOPIC)
            out.append([p.messages_count for p in topic.partitions])
    return out


async def settle(cluster: ChaosCluster) -> list[list[int]]:
    """Wait (at most SETTLE_S) for every node to hold as many messages per partition; the
    lengths seen last (the checks report any difference)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SETTLE_S
    while True:
        seen = await lengths(cluster)
        if all(s == seen[0] for s in seen) or loop.time() > deadline:
            return seen
        await asyncio.sleep(0.5)


@pytest.mark.slow
async def test_acknowledged_messages_survive_random_faults_on_three_nodes(tmp_path: Path):
    seed = chaos_seed()
    plan = plan_faults(seed, int(os.environ.get("CHAOS_FAULTS", "20")))
    replay = f"CHAOS_SEED={seed} python -m pytest tests/cluster/test_chaos.py"
    print(f"chaos seed {seed}; replay: {replay}\n" + "\n".join(map(str, plan)))
    assert len(plan) >= 20 or "CHAOS_FAULTS" in os.environ
    cluster = ChaosCluster(tmp_path, 3, env=DEDUPLICATION)
    await cluster.start()
    try:
        await create_topic(cluster)
        producers = [Producer(SdkSide(cluster.addresses), 1, PARTITIONS),
                     Producer(OfficialSide(cluster.addresses), 2, PARTITIONS)]
        consumers = [Consumer(SdkSide(cluster.addresses), PARTITIONS),
                     Consumer(OfficialSide(cluster.addresses), PARTITIONS)]
        stop_producing, stop_consuming = asyncio.Event(), asyncio.Event()
        sending = [asyncio.create_task(p.run(stop_producing, DRAIN_S)) for p in producers]
        reading = [asyncio.create_task(c.run(stop_consuming)) for c in consumers]
        await asyncio.sleep(WARM_UP_S)
        for number, fault in enumerate(plan, 1):
            print(f"fault {number}/{len(plan)}: {fault}")
            await cluster.inject(fault)
            await asyncio.sleep(fault.hold_s)
            await cluster.heal()
            await asyncio.sleep(fault.pause_s)
        stop_producing.set()
        await asyncio.gather(*sending)
        await cluster.converge()
        final_lengths = await settle(cluster)
        await asyncio.sleep(1.0)  # the consumers catch up with the last messages
        stop_consuming.set()
        await asyncio.gather(*reading)

        findings = Findings()
        records = [p.record for p in producers]
        for node, address in enumerate(cluster.addresses):
            log = await read_log(address, PARTITIONS)
            check_producers(f"node-{node}", log, records, findings)
            check_consumers(f"node-{node}", log, [c.record for c in consumers], findings)
        for node in cluster.nodes:
            await asyncio.to_thread(node.stop)
        check_disk({f"node-{i}": cluster.partition_dirs(i) for i in range(3)}, findings)

        acked = {p.side.name: sum(map(len, p.record.acked.values())) for p in producers}
        received = {c.side.name: c.record.count for c in consumers}
        summary = (f"seed {seed} ({replay}); acked {acked}; received {received}; "
                   f"messages per partition per node {final_lengths}")
        print(summary)
        assert all(acked.values()) and all(received.values()), f"no traffic: {summary}"
        assert not findings, f"{summary}\n{findings.render()}"
    finally:
        await cluster.close()
