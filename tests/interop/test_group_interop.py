"""Consumer groups through the official apache-iggy 0.8.0 consumer API.

3 partitions x 10,000 messages (payload ``"<partition>:<seq>"``, so a message names its own
offset). Two members, two connections, the client's defaults (Next, auto-commit when polling):

* both joined from the start: every message consumed exactly once, each member sees its
  partitions' offsets in increasing order;
* one member in a child process starts first, a second joins later (cooperative hand-over
  of a partition), then the child stores the offsets it consumed and exits abruptly: the
  survivor takes its partitions over from the stored offsets, nothing lost, nothing twice;
* after a purge (one and two shards), a member joining gets its partition at once.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from apache_iggy import IggyClient, ReceiveMessage, SendMessage

from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.consumer_groups.get_consumer_group import GetConsumerGroup
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from lurcher.core.wire.responses.consumer_groups import GroupDetails
from tests.support import raw
from tests.support.official import connect_client
from tests.support.server import REPO_ROOT, LurcherServer

STREAM = "group-stream"
TOPIC = "group-topic"
GROUP = "group-g"
PARTITIONS = 3
PER_PARTITION = 10_000
TOTAL = PARTITIONS * PER_PARTITION
SEND_BATCH = 1000
CONSUME_BATCH = 100
DEADLINE_S = 90.0

Seen = list[tuple[int, int]]  # (partition, offset) in consumption order


async def populate(client: IggyClient) -> None:
    await client.create_stream(STREAM)
    await client.create_topic(STREAM, TOPIC, PARTITIONS)
    for start in range(0, PER_PARTITION, SEND_BATCH):
        for p in range(PARTITIONS):
            batch = [SendMessage(f"{p}:{i}") for i in range(start, start + SEND_BATCH)]
            await client.send_messages(STREAM, TOPIC, p, batch)


def record(seen: Seen, message: ReceiveMessage) -> None:
    partition, offset = message.partition_id(), message.offset()
    assert message.payload().decode() == f"{partition}:{offset}"
    seen.append((partition, offset))


def check_exactly_once(*members: Seen) -> None:
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for seen in members:
        for key in seen:
            counts[key] += 1
        for p in range(PARTITIONS):
            offsets = [o for q, o in seen if q == p]
            assert offsets == sorted(offsets), f"partition {p} out of order"
    twice = [k for k, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} messages consumed twice, e.g. {twice[:5]}"
    assert len(counts) == TOTAL, f"{TOTAL - len(counts)} messages never consumed"


async def consume(consumer, seen: Seen, done, stop: asyncio.Event,
                  pace_s=lambda: 0.0) -> None:
    """Consume into ``seen`` until ``stop`` is set (this member sets it once ``done()``)."""

    async def take(message: ReceiveMessage) -> None:
        record(seen, message)
        if done():
            stop.set()
        delay = pace_s()
        if delay:
            await asyncio.sleep(delay)

    await consumer.consume_messages(take, stop)


async def drain(consumers: list, seens: list[Seen], extra_s: float = 0.5) -> None:
    """Keep every member polling ``extra_s`` longer: a stray (duplicate) would show up."""
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(extra_s, stop.set)

    def taker(seen: Seen):
        async def take(message: ReceiveMessage) -> None:
            record(seen, message)
        return take

    await asyncio.gather(*(c.consume_messages(taker(s), stop) for c, s in zip(consumers, seens)))


async def join(server: LurcherServer) -> tuple[IggyClient, object]:
    client = await connect_client(server)
    consumer = await client.consumer_group(GROUP, STREAM, TOPIC, batch_length=CONSUME_BATCH)
    return client, consumer


async def test_two_members_consume_every_message_once(server: LurcherServer) -> None:
    await populate(await connect_client(server))
    (_c1, first), (_c2, second) = await join(server), await join(server)
    a: Seen = []
    b: Seen = []
    done = lambda: len(a) + len(b) >= TOTAL  # noqa: E731
    stop = asyncio.Event()
    await asyncio.wait_for(asyncio.gather(consume(first, a, done, stop),
                                          consume(second, b, done, stop)), DEADLINE_S)
    await drain([first, second], [a, b])
    assert a and b, "both members must have received partitions"
    assert {p for p, _ in a}.isdisjoint({p for p, _ in b})
    check_exactly_once(a, b)


MEMBER_SCRIPT = r"""
import asyncio, json, os, sys
from apache_iggy import IggyClient
address, out, started, quota = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

async def main():
    client = IggyClient(address)
    await client.connect()
    await client.login_user("iggy", "iggy")
    consumer = await client.consumer_group(%(group)r, %(stream)r, %(topic)r, batch_length=%(batch)d)
    seen = []
    async for message in consumer.iter_messages():
        p, o = message.partition_id(), message.offset()
        assert message.payload().decode() == f"{p}:{o}"
        seen.append((p, o))
        if len(seen) == 1:
            open(started, "w").close()
        if len(seen) >= quota:
            break
        await asyncio.sleep(0.0005)
    for p in range(%(partitions)d):
        last = consumer.get_last_consumed_offset(p)
        if last is not None:
            try:
                await consumer.store_offset(last, p)
            except Exception:
                pass  # the partition was handed over: its offset is the new owner's
    with open(out + ".tmp", "w") as f:
        json.dump(seen, f)
    os.replace(out + ".tmp", out)
    os._exit(0)

asyncio.run(main())
""" % {"group": GROUP, "stream": STREAM, "topic": TOPIC, "batch": CONSUME_BATCH,
       "partitions": PARTITIONS}


async def wait_for_file(path: Path, proc: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None or path.exists(), f"member exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"no {path.name} within {timeout_s}s"
        await asyncio.sleep(0.02)


async def test_disconnected_member_is_taken_over_from_committed_offsets(
        server: LurcherServer, tmp_path: Path) -> None:
    await populate(await connect_client(server))
    out, started = tmp_path / "member.json", tmp_path / "member.started"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", MEMBER_SCRIPT, server.tcp_address, str(out),
                             str(started), str(TOTAL // 4)], env=env)
    try:
        await wait_for_file(started, proc, 20.0)
        _client, survivor = await join(server)
        mine: Seen = []
        theirs: list[Seen] = []

        def done() -> bool:
            if not theirs and out.exists():
                theirs.append([tuple(x) for x in json.loads(out.read_text())])
            return bool(theirs) and len(mine) + len(theirs[0]) >= TOTAL

        pace = lambda: 0.001 if not theirs else 0.0  # noqa: E731  (slow while both run)
        stop = asyncio.Event()
        await asyncio.wait_for(consume(survivor, mine, done, stop, pace), DEADLINE_S)
        await drain([survivor], [mine])
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    member = theirs[0]
    assert len(member) == TOTAL // 4
    early = {p for p, _ in mine[:CONSUME_BATCH]}
    assert len(early) == 1, "the late joiner is handed one partition while the other runs"
    assert {p for p, _ in mine} == set(range(PARTITIONS)), "survivor took every partition over"
    check_exactly_once(member, mine)


@pytest.mark.parametrize("shards", [1, 2])
async def test_a_member_joining_after_a_purge_gets_its_partition_at_once(
        server_factory, shards: int) -> None:
    """The first member consumed (and auto-committed) every message; the topic is purged,
    which drops the group's offsets: the second member's partition is handed over as it
    joins, not after the rebalancing timeout (1 h here; the old code waited for it), and it
    consumes what is sent there after the purge."""
    server = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards),
                             "LURCHER_CONSUMER_GROUP_REBALANCING_TIMEOUT": "1 h"})
    admin = await connect_client(server)
    await admin.create_stream(STREAM)
    await admin.create_topic(STREAM, TOPIC, 2)
    for p in range(2):
        await admin.send_messages(STREAM, TOPIC, p, [SendMessage(f"{p}:{i}") for i in range(5)])
    _c1, first = await join(server)
    before: Seen = []
    stop = asyncio.Event()
    await asyncio.wait_for(consume(first, before, lambda: len(before) == 10, stop), DEADLINE_S)
    with raw.RawClient(server.tcp_address) as frames:
        frames.login()
        frames.call(PurgeTopic.CODE, PurgeTopic(Identifier.parse(STREAM),
                                                Identifier.parse(TOPIC)).encode())
        _c2, second = await join(server)
        group = GetConsumerGroup(Identifier.parse(STREAM), Identifier.parse(TOPIC),
                                 Identifier.parse(GROUP))
        members = GroupDetails.decode_exact(frames.call(group.CODE, group.encode())).members
    assert [(m.id, m.partitions) for m in members] == [(0, [0]), (1, [1])]
    await admin.send_messages(STREAM, TOPIC, 1, [SendMessage(f"1:{i}") for i in range(3)])
    after: Seen = []
    stop = asyncio.Event()
    await asyncio.wait_for(consume(second, after, lambda: len(after) == 3, stop), DEADLINE_S)
    assert after == [(1, 0), (1, 1), (1, 2)]
