"""Data written by the official client survives a clean restart and a crash, bit for bit.

Compared before/after: everything the Python API exposes (payload, id, offset, timestamp,
checksum, length, partition) and the raw message bytes of a raw-socket poll (which also
checks the stored checksum is XXH3-64 of the message). The committed consumer offset
(Next + auto-commit) must survive too.
"""

from __future__ import annotations

import random

from apache_iggy import IggyClient, PollingStrategy, SendMessage

from tests.support import raw
from tests.support.official import Snap, connect_client, snapshot
from tests.support.server import LurcherServer

STREAM = "durable"
TOPIC = "events"
PARTITIONS = 3
BATCHES = 24
BATCH_MESSAGES = 125


async def send_data(client: IggyClient) -> None:
    rng = random.Random(7)
    await client.create_stream(STREAM)
    await client.create_topic(STREAM, TOPIC, PARTITIONS)
    for b in range(BATCHES):
        batch = [SendMessage(f"b{b}-m{i}:".encode() + rng.randbytes(rng.randrange(1, 2000)))
                 for i in range(BATCH_MESSAGES)]
        await client.send_messages(STREAM, TOPIC, b % PARTITIONS, batch)


async def official_view(client: IggyClient) -> dict[int, list[Snap]]:
    out: dict[int, list[Snap]] = {}
    for p in range(PARTITIONS):
        snaps: list[Snap] = []
        while True:
            got = await client.poll_messages(STREAM, TOPIC, p, PollingStrategy.Offset(len(snaps)), 500, False)
            if not got:
                break
            snaps.extend(snapshot(m) for m in got)
        out[p] = snaps
    return out


def raw_view(server: LurcherServer) -> dict[int, list[bytes]]:
    with raw.RawClient(server.tcp_address) as c:
        c.login()
        out = {}
        for p in range(PARTITIONS):
            msgs = c.poll_all(STREAM, TOPIC, p)
            for m in msgs:
                assert m.checksum_ok(), f"partition {p} offset {m.offset}: checksum is not XXH3-64"
                assert m.reserved == 0
            out[p] = [m.raw for m in msgs]
        return out


async def test_restart_and_crash_keep_everything(server: LurcherServer) -> None:
    client = await connect_client(server)
    await send_data(client)
    committed = await client.poll_messages(STREAM, TOPIC, 0, PollingStrategy.Next(), 100, True)
    assert [m.offset() for m in committed] == list(range(100))
    before = await official_view(client)
    before_raw = raw_view(server)
    assert sum(len(v) for v in before.values()) == BATCHES * BATCH_MESSAGES
    for p in range(PARTITIONS):
        assert [s.payload for s in before[p]] == [r[64:] for r in before_raw[p]]

    for crash in (False, True):
        server.restart(crash=crash)
        client = await connect_client(server)
        after = await official_view(client)
        for p in range(PARTITIONS):
            assert after[p] == before[p], f"partition {p} differs after {'crash' if crash else 'restart'}"
        assert raw_view(server) == before_raw
        topic = await client.get_topic(STREAM, TOPIC)
        assert topic is not None and topic.messages_count == BATCHES * BATCH_MESSAGES
        stream = await client.get_stream(STREAM)
        assert stream is not None and stream.topics_count == 1

    resumed = await client.poll_messages(STREAM, TOPIC, 0, PollingStrategy.Next(), 10, True)
    assert [m.offset() for m in resumed] == list(range(100, 110)), "stored offset lost on restart"

    await client.send_messages(STREAM, TOPIC, 1, [SendMessage(b"after-restart")])
    last = await client.poll_messages(STREAM, TOPIC, 1, PollingStrategy.Last(), 1, False)
    assert [(m.offset(), m.payload()) for m in last] == [(len(before[1]), b"after-restart")]
