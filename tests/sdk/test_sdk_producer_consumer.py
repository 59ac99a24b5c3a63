"""Producer and Consumer against a real server: 100,000 messages over 3 partitions read by
two group members exactly once; restarts resume from the committed offset in every
auto-commit mode; background batching with back-pressure; encryption; create-if-missing."""

from __future__ import annotations

import asyncio
import collections

import pytest

from lurcher.sdk import Client, Consumer, Encryptor, ErrorCode, IggyError, Producer
from tests.sdk.conftest import messages_of, root_connstring

TOTAL = 100_000
PARTITIONS = 3


async def new_client(server) -> Client:
    client = Client.from_connection_string(root_connstring(server), heartbeat_interval_s=None)
    await client.connect()
    return client


async def drain(consumer: Consumer, sink: list, stop: asyncio.Event) -> None:
    async for message in consumer:
        sink.append(message)
        if stop.is_set():
            return


async def wait_for_count(sinks: list[list], total: int, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while sum(map(len, sinks)) < total:
        assert loop.time() < deadline, f"only {sum(map(len, sinks))} of {total} consumed"
        await asyncio.sleep(0.05)


async def test_two_group_members_read_100k_messages_exactly_once(server) -> None:
    admin = await new_client(server)
    await admin.create_stream("load")
    await admin.create_topic("load", "t", PARTITIONS)
    clients = [await new_client(server) for _ in range(2)]
    consumers = [Consumer(c, "load", "t", "workers", batch_length=1000, auto_commit="each_batch",
                          poll_interval_s=0.02) for c in clients]
    for consumer in consumers:
        await consumer.init()
    group = await admin.get_consumer_group("load", "t", "workers")
    assert group.header.members_count == 2
    sinks: list[list] = [[], []]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(drain(c, s, stop)) for c, s in zip(consumers, sinks)]

    producer = Producer(admin, "load", "t", send_mode="background", batch_length=1000,
                        linger_time_s=0.01, max_in_flight=2)
    async with producer:
        for start in range(0, TOTAL, 5000):
            await producer.send([b"msg-%06d" % i for i in range(start, start + 5000)])
    assert producer.sent_messages == TOTAL

    await wait_for_count(sinks, TOTAL, timeout_s=120)
    stop.set()
    for consumer in consumers:
        await consumer.close()
    await asyncio.wait_for(asyncio.gather(*tasks), 10)

    everything = [m for sink in sinks for m in sink]
    counts = collections.Counter(m.payload for m in everything)
    assert len(counts) == TOTAL and set(counts.values()) == {1}, "each message exactly once"
    assert all(sinks), "both members consumed"
    per_member = [{m.partition_id for m in sink} for sink in sinks]
    assert not per_member[0] & per_member[1], "a partition belongs to one member"
    for p in range(PARTITIONS):
        offsets = sorted(m.offset for m in everything if m.partition_id == p)
        assert offsets == list(range(len(offsets)))
        assert abs(len(offsets) - TOTAL / PARTITIONS) <= 1000  # balanced per batch
    # close() committed the last consumed offsets of every partition
    await admin.join_consumer_group("load", "t", "workers")
    for p in range(PARTITIONS):
        info = await admin.get_consumer_offset("workers", "load", "t", p, group=True)
        assert info.stored_offset == info.current_offset
    for c in [admin, *clients]:
        await c.close()


MODES = ["each_message", "each_batch", "interval:50ms", "polling", "disabled"]


@pytest.mark.parametrize("group", [None, "g"], ids=["plain", "group"])
@pytest.mark.parametrize("mode", MODES)
async def test_restarted_consumer_resumes_from_committed_offset(sdk_client, mode, group) -> None:
    await sdk_client.create_stream("r")
    await sdk_client.create_topic("r", "t", 1)
    await sdk_client.send_messages("r", "t", [b"%d" % i for i in range(1000)], 0)

    async def read(n: int) -> list[int]:
        consumer = Consumer(sdk_client, "r", "t", group, consumer_id="c1", batch_length=100,
                            auto_commit=mode, poll_interval_s=0.01)
        got = []
        async with consumer:
            async for message in consumer:
                got.append(message.offset)
                if len(got) == n:
                    break
            if mode.startswith("interval"):
                await asyncio.sleep(0.15)
        return got

    assert await read(250) == list(range(250))
    resumed = await read(10)
    expected_start = 0 if mode == "disabled" else 250
    assert resumed == list(range(expected_start, expected_start + 10))


async def test_plain_consumer_reads_all_partitions_from_first(sdk_client) -> None:
    await sdk_client.create_stream("a")
    await sdk_client.create_topic("a", "t", 3)
    for p in range(3):
        await sdk_client.send_messages("a", "t", [b"p%d-%d" % (p, i) for i in range(5)], p)
    got = []
    async with Consumer(sdk_client, "a", "t", strategy="first", auto_commit="disabled",
                        poll_interval_s=0.01) as consumer:
        async for m in consumer:
            got.append((m.partition_id, m.offset, m.payload))
            if len(got) == 15:
                break
    assert sorted(got) == [(p, i, b"p%d-%d" % (p, i)) for p in range(3) for i in range(5)]


async def test_background_producer_back_pressure_keeps_order(sdk_client) -> None:
    producer = Producer(sdk_client, "bp", "t", partitioning=0, send_mode="background",
                        batch_length=7, max_in_flight=1, linger_time_s=0.001,
                        create_stream_if_missing=True, create_topic_if_missing=True)
    async with producer:
        for i in range(50):
            await producer.send([b"%04d" % (i * 3 + k) for k in range(3)],
                                headers={"batch": i})
            assert producer._queue.qsize() <= 1
    polled = messages_of(await sdk_client.poll_messages("bp", "t", 0, "first", 1000))
    assert [m.payload for m in polled] == [b"%04d" % i for i in range(150)]
    assert polled[0].user_headers  # the shared header block was sent


async def test_producer_surfaces_background_errors_and_refuses_after_close(sdk_client) -> None:
    producer = Producer(sdk_client, "missing", "t", send_mode="background", batch_length=1)
    await producer.send([b"x"])
    with pytest.raises(IggyError) as err:
        await producer.flush()
    assert err.value.code in (ErrorCode.STREAM_NAME_NOT_FOUND, ErrorCode.STREAM_ID_NOT_FOUND)
    await producer.close()
    with pytest.raises(IggyError) as err:
        await producer.send([b"y"])
    assert err.value.code == ErrorCode.PRODUCER_CLOSED


async def test_direct_producer_with_ids_and_key(sdk_client) -> None:
    async with Producer(sdk_client, "d", "t", partitioning=b"user-1", batch_length=4,
                        create_stream_if_missing=True, create_topic_if_missing=True,
                        topic_partitions=2) as producer:
        await producer.send([b"a", b"b", b"c", b"d", b"e"], ids=[1, 2, 3, 4, 5])
    total = []
    for p in range(2):
        total += messages_of(await sdk_client.poll_messages("d", "t", p, "first", 10))
    assert [(m.id, m.payload) for m in total] == [(1, b"a"), (2, b"b"), (3, b"c"), (4, b"d"),
                                                  (5, b"e")]


async def test_direct_producer_failure_leaves_nothing_for_the_next_send(sdk_client) -> None:
    """A failed direct send never leaks its unsent rest into a later call, and a send whose
    headers do not match its payloads sends nothing."""
    producer = Producer(sdk_client, "df", "t", partitioning=0, batch_length=1,
                        create_stream_if_missing=True, create_topic_if_missing=True)
    with pytest.raises(ValueError):
        await producer.send([b"a", b"b"], headers=[{"k": "A"}])
    with pytest.raises(IggyError) as err:  # an unparsable raw header block fails batch 2
        await producer.send([b"c", b"d", b"e"], headers=[None, b"\xff\xff\xff", None])
    assert "1 of the 3 messages" in "".join(getattr(err.value, "__notes__", []))
    await producer.send([b"f"])
    polled = messages_of(await sdk_client.poll_messages("df", "t", 0, "first", 10))
    assert [m.payload for m in polled] == [b"c", b"f"]


async def test_encrypted_payloads_round_trip(sdk_client) -> None:
    key = Encryptor.generate_key()
    async with Producer(sdk_client, "enc", "t", partitioning=0, encryptor=Encryptor(key),
                        create_stream_if_missing=True, create_topic_if_missing=True) as producer:
        await producer.send([b"secret-%d" % i for i in range(3)])
    raw = messages_of(await sdk_client.poll_messages("enc", "t", 0, "first", 10))
    assert all(b"secret" not in m.payload for m in raw)
    got = []
    async with Consumer(sdk_client, "enc", "t", partition=0, strategy="first",
                        encryptor=Encryptor(key), auto_commit="disabled") as consumer:
        async for m in consumer:
            got.append(m.payload)
            if len(got) == 3:
                break
    assert got == [b"secret-0", b"secret-1", b"secret-2"]
    with pytest.raises(IggyError) as err:
        Encryptor(b"short")
    assert err.value.code == ErrorCode.INVALID_ENCRYPTION_KEY
    with pytest.raises(IggyError) as err:
        Encryptor(Encryptor.generate_key()).decrypt(raw[0].payload)
    assert err.value.code == ErrorCode.CANNOT_DECRYPT_DATA


async def test_group_consumer_without_create_fails_for_missing_group(sdk_client) -> None:
    await sdk_client.create_stream("ng")
    await sdk_client.create_topic("ng", "t", 1)
    consumer = Consumer(sdk_client, "ng", "t", "absent", create_group_if_missing=False)
    with pytest.raises(IggyError) as err:
        await consumer.init()
    assert err.value.code == ErrorCode.CONSUMER_GROUP_NAME_NOT_FOUND
