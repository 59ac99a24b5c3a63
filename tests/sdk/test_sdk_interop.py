"""Interop with the official apache-iggy 0.8.0 client, both ways, on one server: messages
our SDK sends are read identically by the official client (payload, id, offset, timestamp,
checksum, partition) and vice versa; an official group consumer reads our producer's
messages; the official group consumer continues where ours committed."""

from __future__ import annotations

import asyncio

from apache_iggy import AutoCommit, AutoCommitWhen, PollingStrategy, SendMessage

from lurcher.sdk import Client, Consumer, Producer
from tests.sdk.conftest import messages_of
from tests.support.official import Snap, connect_client, snapshot

PARTITIONS = 3


def our_snap(partition_id: int, m) -> Snap:
    return Snap(partition_id, m.offset, m.id, m.timestamp, m.checksum, len(m.payload), m.payload)


async def our_snaps(client: Client, stream: str, topic: str) -> list[Snap]:
    out = []
    for p in range(PARTITIONS):
        polled = await client.poll_messages(stream, topic, p, "first", 10_000)
        out += [our_snap(p, m) for m in polled.messages()]
    return out


async def official_snaps(official, stream: str, topic: str) -> list[Snap]:
    out = []
    for p in range(PARTITIONS):
        msgs = await official.poll_messages(stream, topic, p, PollingStrategy.Offset(0), 10_000,
                                            False)
        out += [snapshot(m) for m in msgs]
    return out


async def test_official_client_reads_what_our_sdk_sent(sdk_client: Client, server) -> None:
    await sdk_client.create_stream("ours")
    await sdk_client.create_topic("ours", "t", PARTITIONS)
    await sdk_client.send_messages("ours", "t", [b"with-id-%d" % i for i in range(10)], 1,
                                   ids=list(range(1000, 1010)), headers={"h": "v"})
    async with Producer(sdk_client, "ours", "t", batch_length=100) as producer:
        await producer.send([bytes([i % 256]) * (i % 50) for i in range(900)])
    ours = await our_snaps(sdk_client, "ours", "t")
    assert len(ours) == 910
    official = await connect_client(server)
    theirs = await official_snaps(official, "ours", "t")
    assert theirs == ours
    with_ids = [s for s in theirs if s.partition_id == 1][:10]
    assert [s.message_id for s in with_ids] == list(range(1000, 1010))


async def test_our_sdk_reads_what_the_official_client_sent(sdk_client: Client, server) -> None:
    official = await connect_client(server)
    await official.create_stream("theirs")
    await official.create_topic("theirs", "t", PARTITIONS)
    for p in range(PARTITIONS):
        await official.send_messages("theirs", "t", p,
                                     [SendMessage(f"p{p}-{i}") for i in range(200)])
    await official.send_messages("theirs", "t", 0, [SendMessage(b"\x00\xff binary")])
    theirs = await official_snaps(official, "theirs", "t")
    ours = await our_snaps(sdk_client, "theirs", "t")
    assert ours == theirs and len(ours) == 601
    polled = messages_of(await sdk_client.poll_messages("theirs", "t", 0, "last", 1))
    assert polled[0].payload == b"\x00\xff binary" and polled[0].origin_timestamp > 0
    got = []
    async with Consumer(sdk_client, "theirs", "t", strategy="first", auto_commit="disabled",
                        poll_interval_s=0.01) as consumer:
        async for m in consumer:
            got.append(our_snap(m.partition_id, m))
            if len(got) == len(theirs):
                break
    assert sorted(got) == sorted(theirs)


async def test_official_group_consumer_reads_our_producer(sdk_client: Client, server) -> None:
    async with Producer(sdk_client, "og", "t", create_stream_if_missing=True,
                        create_topic_if_missing=True, topic_partitions=PARTITIONS,
                        batch_length=50) as producer:
        await producer.send([b"m%04d" % i for i in range(300)])
    official = await connect_client(server)
    consumer = await official.consumer_group(
        "og-group", "og", "t", batch_length=100,
        auto_commit=AutoCommit.When(AutoCommitWhen.PollingMessages()))
    seen = []

    async def read() -> None:
        async for m in consumer.iter_messages():
            seen.append(m.payload())
            if len(seen) == 300:
                return

    await asyncio.wait_for(read(), 30)
    assert sorted(seen) == [b"m%04d" % i for i in range(300)]


async def test_official_group_consumer_continues_after_our_commits(sdk_client, server) -> None:
    await sdk_client.create_stream("cg")
    await sdk_client.create_topic("cg", "t", 1)
    await sdk_client.send_messages("cg", "t", [b"%d" % i for i in range(100)], 0)
    got = []
    async with Consumer(sdk_client, "cg", "t", "shared", batch_length=30,
                        auto_commit="each_message") as ours:
        async for m in ours:
            got.append(m.offset)
            if m.offset == 39:
                break
    assert got == list(range(40))  # close() committed 39 and left the group
    official = await connect_client(server)
    consumer = await official.consumer_group(
        "shared", "cg", "t", batch_length=25,
        auto_commit=AutoCommit.When(AutoCommitWhen.PollingMessages()))
    theirs = []

    async def read() -> None:
        async for m in consumer.iter_messages():
            theirs.append(m.offset())
            if m.offset() == 99:
                return

    await asyncio.wait_for(read(), 30)
    assert theirs == list(range(40, 100))
