"""What the 0.8.0 Python API cannot send, sent raw and read back with the official client.

Balanced and messages-key partitioning and messages with user headers and client ids are
written with ``tests.support.raw`` (wire layouts §4.4, §9.2, §9.3); the official client must
poll them without error and see the same payloads/ids; a raw poll must return the user
headers byte-identical.
"""

from __future__ import annotations

import struct
from collections import Counter

import xxhash
from apache_iggy import IggyClient, PollingStrategy

from tests.support import raw
from tests.support.official import connect_client
from tests.support.server import LurcherServer

PARTITIONS = 3


def setup_topic(c: raw.RawClient, stream: str = "s", topic: str = "t", partitions: int = PARTITIONS) -> None:
    c.login()
    c.create_stream(stream)
    c.create_topic(stream, topic, partitions)


async def poll_payloads(client: IggyClient, partition: int) -> list[bytes]:
    got = await client.poll_messages("s", "t", partition, PollingStrategy.Offset(0), 10_000, False)
    return [m.payload() for m in got]


async def test_balanced_partitioning_round_robins_whole_batches(server: LurcherServer) -> None:
    with raw.RawClient(server.tcp_address) as c:
        setup_topic(c)
        for b in range(6):
            msgs = [raw.message(f"bal-{b}-{i}".encode()) for i in range(10)]
            c.send("s", "t", raw.partition_balanced(), msgs)
    client = await connect_client(server)
    per_partition = {p: await poll_payloads(client, p) for p in range(PARTITIONS)}
    assert Counter(len(v) for v in per_partition.values()) == Counter({20: 3}), \
        f"balanced must spread 6 batches 2/2/2, got {[len(v) for v in per_partition.values()]}"
    seen = []
    for p, payloads in per_partition.items():
        batches = {x.split(b"-")[1] for x in payloads}
        assert len(batches) == 2, f"partition {p} got parts of {sorted(batches)}"
        for b in batches:
            assert [x for x in payloads if x.split(b"-")[1] == b] == [f"bal-{int(b)}-{i}".encode() for i in range(10)]
        seen.extend(batches)
    assert sorted(int(b) for b in seen) == list(range(6))
    # consecutive batches never land on the same partition
    owner = {int(x.split(b"-")[1]): p for p, v in per_partition.items() for x in v}
    assert all(owner[b] != owner[b + 1] for b in range(5))


async def test_messages_key_partitioning_is_xxhash32_mod_partitions(server: LurcherServer) -> None:
    keys = [b"user-42", b"k", b"\x00\xffbinary", b"x" * 255]
    with raw.RawClient(server.tcp_address) as c:
        setup_topic(c)
        for round_ in range(3):
            for key in keys:
                c.send("s", "t", raw.partition_key(key), [raw.message(key + b"#" + str(round_).encode())])
    client = await connect_client(server)
    per_partition = {p: await poll_payloads(client, p) for p in range(PARTITIONS)}
    for key in keys:
        expected = xxhash.xxh32_intdigest(key, seed=0) % PARTITIONS
        assert [x for x in per_partition[expected] if x.rpartition(b"#")[0] == key] == \
            [key + b"#" + str(r).encode() for r in range(3)], f"key {key!r} not all on partition {expected}"
    assert sum(len(v) for v in per_partition.values()) == 3 * len(keys)


def header_block(i: int) -> bytes:
    return raw.user_headers([
        (raw.HEADER_KIND_STRING, b"trace-id", raw.HEADER_KIND_STRING, f"trace-{i:04d}".encode()),
        (raw.HEADER_KIND_STRING, b"n", raw.HEADER_KIND_UINT64, struct.pack("<Q", i)),
        (raw.HEADER_KIND_RAW, b"\x01\x02", raw.HEADER_KIND_BOOL, b"\x01"),
        (raw.HEADER_KIND_STRING, b"pi", raw.HEADER_KIND_FLOAT64, struct.pack("<d", 3.14159)),
    ])


async def test_user_headers_and_client_ids_round_trip(server: LurcherServer) -> None:
    sent = [
        (f"payload-{i}".encode() * (i % 5 + 1), 0x1000_0000_0000_0000_0000_0000_0000_0000 + i,
         header_block(i) if i % 3 else b"")
        for i in range(60)
    ]
    with raw.RawClient(server.tcp_address) as c:
        setup_topic(c, partitions=1)
        for start in range(0, len(sent), 20):
            c.send("s", "t", raw.partition_id(0), [
                raw.message(p, message_id=mid, headers=h, origin_timestamp=1_700_000_000_000_000 + k)
                for k, (p, mid, h) in enumerate(sent[start:start + 20], start)])
        polled = c.poll_all("s", "t", 0)
    assert len(polled) == len(sent)
    for k, (m, (payload, mid, headers)) in enumerate(zip(polled, sent)):
        assert m.offset == k
        assert m.payload == payload
        assert m.headers == headers, f"user headers of offset {k} changed"
        assert m.headers_length == len(headers) and m.payload_length == len(payload)
        assert m.message_id == mid, "client-chosen id must be kept"
        assert m.origin_timestamp == 1_700_000_000_000_000 + k
        assert m.reserved == 0
        assert m.checksum_ok()

    client = await connect_client(server)
    got = await client.poll_messages("s", "t", 0, PollingStrategy.First(), 1000, False)
    assert [(m.payload(), m.id(), m.offset()) for m in got] == \
        [(p, mid, k) for k, (p, mid, _) in enumerate(sent)]
    assert [m.checksum() for m in got] == [m.checksum for m in polled]
