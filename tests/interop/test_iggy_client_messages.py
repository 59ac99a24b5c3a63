"""The official apache-iggy 0.8.0 client sends 10,000 messages and polls them back.

One module-scoped server holds the data (sent through the official API, by partition id);
each test polls with one strategy and checks payloads, offsets, order and metadata.
Next/auto-commit uses the client's fixed consumer (id 0) on one partition only.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from apache_iggy import PollingStrategy, SendMessage

from tests.support import raw
from tests.support.official import Snap, connect_client, snapshot
from tests.support.server import LurcherServer

STREAM = "interop-stream"
TOPIC = "interop-topic"
PARTITIONS = 3
TOTAL_MESSAGES = 10_000
BATCH_MESSAGES = 250
POLL_CHUNK = 1000
NEXT_PARTITION = 2


@dataclass
class Loaded:
    server: LurcherServer
    payloads: dict[int, list[bytes]]
    sent_from_us: int
    sent_until_us: int


def make_payload(rng: random.Random, partition: int, seq: int) -> bytes:
    """Unique, variable-length (1..~330 bytes), partly binary."""
    return f"p{partition}-n{seq:05d}|".encode() + rng.randbytes(rng.randrange(0, 300))


def plan_batches(seed: int) -> list[tuple[int, list[bytes]]]:
    """(partition, payloads) per batch; partitions rotate batch by batch."""
    rng = random.Random(seed)
    seqs = [0] * PARTITIONS
    batches = []
    for b in range(TOTAL_MESSAGES // BATCH_MESSAGES):
        p = b % PARTITIONS
        batch = [make_payload(rng, p, seqs[p] + i) for i in range(BATCH_MESSAGES)]
        seqs[p] += BATCH_MESSAGES
        batches.append((p, batch))
    return batches


async def populate(server: LurcherServer, seed: int) -> dict[int, list[bytes]]:
    client = await connect_client(server)
    await client.create_stream(STREAM)
    await client.create_topic(STREAM, TOPIC, PARTITIONS)
    payloads: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    for partition, batch in plan_batches(seed):
        await client.send_messages(STREAM, TOPIC, partition, [SendMessage(x) for x in batch])
        payloads[partition].extend(batch)
    return payloads


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    server = LurcherServer().start(Path(tmp_path_factory.mktemp("interop-data")))
    try:
        before = time.time_ns() // 1000
        payloads = asyncio.run(populate(server, seed=20240801))
        after = time.time_ns() // 1000
        yield Loaded(server, payloads, before, after)
    except BaseException:
        server.kill()
        raise
    server.stop()


async def poll(client, partition: int, strategy, count: int, auto_commit: bool = False) -> list[Snap]:
    msgs = await client.poll_messages(STREAM, TOPIC, partition, strategy, count, auto_commit)
    return [snapshot(m) for m in msgs]


async def poll_everything(client, partition: int) -> list[Snap]:
    out: list[Snap] = []
    while True:
        got = await poll(client, partition, PollingStrategy.Offset(len(out)), POLL_CHUNK)
        if not got:
            return out
        out.extend(got)


async def test_offset_polls_return_every_message_in_order(loaded: Loaded) -> None:
    client = await connect_client(loaded.server)
    for partition in range(PARTITIONS):
        snaps = await poll_everything(client, partition)
        expected = loaded.payloads[partition]
        assert [s.payload for s in snaps] == expected
        assert [s.offset for s in snaps] == list(range(len(expected)))
        assert {s.partition_id for s in snaps} == {partition}
        assert [s.length for s in snaps] == [len(p) for p in expected]
        ids = [s.message_id for s in snaps]
        assert 0 not in ids and len(set(ids)) == len(ids), "server must assign unique non-zero ids"
        stamps = [s.timestamp for s in snaps]
        assert stamps == sorted(stamps), "timestamps must not go backwards"
        assert loaded.sent_from_us - 1_000_000 <= stamps[0] <= stamps[-1] <= loaded.sent_until_us + 1_000_000
        for i in range(0, len(snaps), BATCH_MESSAGES):
            batch = stamps[i:i + BATCH_MESSAGES]
            assert len(set(batch)) == 1, f"one timestamp per batch (batch at offset {i})"


async def test_total_is_ten_thousand(loaded: Loaded) -> None:
    client = await connect_client(loaded.server)
    assert sum(len(v) for v in loaded.payloads.values()) == TOTAL_MESSAGES
    topic = await client.get_topic(STREAM, TOPIC)
    assert topic is not None
    assert topic.partitions_count == PARTITIONS
    assert topic.messages_count == TOTAL_MESSAGES
    stream = await client.get_stream(STREAM)
    assert stream is not None and stream.messages_count == TOTAL_MESSAGES


async def test_one_big_poll_returns_the_whole_partition(loaded: Loaded) -> None:
    client = await connect_client(loaded.server)
    expected = loaded.payloads[0]
    snaps = await poll(client, 0, PollingStrategy.Offset(0), TOTAL_MESSAGES)
    assert [s.payload for s in snaps] == expected


async def test_offset_in_the_middle_and_past_the_end(loaded: Loaded) -> None:
    client = await connect_client(loaded.server)
    expected = loaded.payloads[1]
    snaps = await poll(client, 1, PollingStrategy.Offset(1234), 10)
    assert [s.offset for s in snaps] == list(range(1234, 1244))
    assert [s.payload for s in snaps] == expected[1234:1244]
    tail = await poll(client, 1, PollingStrategy.Offset(len(expected) - 3), 10)
    assert [s.payload for s in tail] == expected[-3:]
    assert await poll(client, 1, PollingStrategy.Offset(len(expected) + 5), 10) == []


async def test_first(loaded: Loaded) -> None:
    client = await connect_client(loaded.server)
    snaps = await poll(client, 0, PollingStrategy.First(), 7)
    assert [s.offset for s in snaps] == list(range(7))
    assert [s.payload for s in snaps] == loaded.payloads[0][:7]


async def test_last(loaded: Loaded) -> None:
    client = await connect_client(loaded.server)
    expected = loaded.payloads[1]
    n = len(expected)
    snaps = await poll(client, 1, PollingStrategy.Last(), 7)
    assert [s.offset for s in snaps] == list(range(n - 7, n))
    assert [s.payload for s in snaps] == expected[-7:]
    everything = await poll(client, 1, PollingStrategy.Last(), n + 100)
    assert [s.payload for s in everything] == expected


async def test_timestamp(loaded: Loaded) -> None:
    client = await connect_client(loaded.server)
    snaps = await poll_everything(client, 0)
    pivot = snaps[1000].timestamp
    first_at_or_after = next(s.offset for s in snaps if s.timestamp >= pivot)
    got = await poll(client, 0, PollingStrategy.Timestamp(pivot), 10)
    assert got, "timestamp poll returned nothing"
    assert got[0].offset == first_at_or_after
    assert [s.payload for s in got] == [s.payload for s in snaps[first_at_or_after:first_at_or_after + 10]]
    assert all(s.timestamp >= pivot for s in got)
    from_zero = await poll(client, 0, PollingStrategy.Timestamp(0), 3)
    assert [s.offset for s in from_zero] == [0, 1, 2]
    assert await poll(client, 0, PollingStrategy.Timestamp(snaps[-1].timestamp + 1), 10) == []


async def test_next_with_and_without_auto_commit(loaded: Loaded) -> None:
    client = await connect_client(loaded.server)
    expected = loaded.payloads[NEXT_PARTITION]
    p = NEXT_PARTITION

    async def next_offsets(count: int, commit: bool) -> list[int]:
        snaps = await poll(client, p, PollingStrategy.Next(), count, commit)
        assert [s.payload for s in snaps] == [expected[s.offset] for s in snaps]
        return [s.offset for s in snaps]

    assert await next_offsets(100, False) == list(range(0, 100))
    assert await next_offsets(100, False) == list(range(0, 100)), "no commit: Next must not move"
    assert await next_offsets(100, True) == list(range(0, 100))
    assert await next_offsets(100, True) == list(range(100, 200)), "auto-commit: Next continues"
    assert await next_offsets(50, False) == list(range(200, 250))
    assert await next_offsets(50, True) == list(range(200, 250))
    assert await next_offsets(1, True) == [250]
    seen = 251
    while True:
        got = await next_offsets(POLL_CHUNK, True)
        if not got:
            break
        assert got == list(range(seen, seen + len(got)))
        seen += len(got)
    assert seen == len(expected)
    assert await next_offsets(10, True) == []
    other = await poll(client, 0, PollingStrategy.Next(), 5, False)
    assert [s.offset for s in other] == list(range(5)), "stored offsets are per partition"


async def test_restart_returns_identical_messages(loaded: Loaded) -> None:
    """Restarts the module's server in place (non-destructive: later tests reconnect)."""
    client = await connect_client(loaded.server)
    before = {p: await poll_everything(client, p) for p in range(PARTITIONS)}
    with raw.RawClient(loaded.server.tcp_address) as c:
        c.login()
        before_raw = {p: [m.raw for m in c.poll_all(STREAM, TOPIC, p)] for p in range(PARTITIONS)}
    loaded.server.restart()
    client = await connect_client(loaded.server)
    for p in range(PARTITIONS):
        assert await poll_everything(client, p) == before[p], f"partition {p} differs after restart"
    with raw.RawClient(loaded.server.tcp_address) as c:
        c.login()
        for p in range(PARTITIONS):
            after_raw = [m.raw for m in c.poll_all(STREAM, TOPIC, p)]
            assert after_raw == before_raw[p], f"partition {p}: raw bytes differ after restart"
