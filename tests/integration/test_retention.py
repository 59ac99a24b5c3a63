"""Retention on a real server: the message cleaner deletes expired segments and trims topics
over their maximum size (the whole topic's, with several shards); polls of deleted offsets
start at the first offset left; topic details and GetStats reflect the deletions; the open
segment always stays.

Small segments (4 KiB: 32 messages of 100-byte payloads sent 8 per batch) and a 200 ms
cleaner interval.
"""

from __future__ import annotations

import time

from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.system.get_stats import GetStats
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.core.wire.requests.topics.get_topic import GetTopic
from lurcher.core.wire.responses.stats import Stats
from lurcher.core.wire.responses.topics import TopicDetails
from tests.support import raw

SEGMENT_BYTES = 4096
MESSAGE_BYTES = 64 + 100
BATCH = 8
PER_SEGMENT = 32  # a segment rolls once it reaches 4 KiB: after 4 batches of 8
ENV = {"LURCHER_SYSTEM_SEGMENT_SIZE": str(SEGMENT_BYTES),
       "LURCHER_DATA_MAINTENANCE_MESSAGES_CLEANER_ENABLED": "true",
       "LURCHER_DATA_MAINTENANCE_MESSAGES_INTERVAL": "200 ms"}
S, T = Identifier.parse("s"), Identifier.parse("t")


def call(client: raw.RawClient, request) -> bytes:
    return client.call(type(request).CODE, request.encode())


def topic(client: raw.RawClient) -> TopicDetails:
    return TopicDetails.decode_exact(call(client, GetTopic(S, T)))


def stats(client: raw.RawClient) -> Stats:
    return Stats.decode_exact(call(client, GetStats()))


def setup(client: raw.RawClient, expiry_us: int = 0, max_size: int = 0) -> None:
    client.login()
    client.create_stream("s")
    call(client, CreateTopic(S, 1, 1, expiry_us, max_size, 0, "t"))


def send(client: raw.RawClient, n: int, first: int) -> None:
    """``n`` messages with payload = their sequence number, one per batch of 8."""
    for start in range(first, first + n, BATCH):
        batch = [raw.message(f"{i:0100d}".encode()) for i in range(start, min(start + BATCH, first + n))]
        client.send("s", "t", raw.partition_id(0), batch)


def wait_until(predicate, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_expired_segments_are_deleted(server_factory):
    server = server_factory(ENV)
    with raw.RawClient(server.tcp_address) as c:
        setup(c, expiry_us=1_500_000)
        send(c, 100, 0)                              # old: will expire
        old = topic(c).partitions[0]
        assert old.segments_count == 4 and old.messages_count == 100
        time.sleep(1.6)
        send(c, 10, 100)                             # fresh, in the open segment
        # every sealed segment gone: each expires with its own newest message, so a cleaner
        # run may come between two of them and leave the third for the next run
        wait_until(lambda: topic(c).partitions[0].segments_count == 1)
        part = topic(c).partitions[0]
        first = c.poll("s", "t", 0, raw.STRATEGY_OFFSET, 0, 1000)
        kept = [m.offset for m in first.messages]
        assert kept == list(range(kept[0], 110)) and kept[0] > 0 and kept[0] % PER_SEGMENT == 0
        assert part.messages_count == len(kept) and part.current_offset == 109
        assert [int(m.payload) for m in first.messages] == kept
        st = stats(c)
        assert (st.messages_count, st.segments_count) == (len(kept), part.segments_count)
        assert st.messages_size_bytes == part.size_bytes == len(kept) * MESSAGE_BYTES
        time.sleep(0.5)                              # fresh messages are not expired yet
        assert topic(c).partitions[0].messages_count == len(kept)


def test_open_segment_is_never_deleted(server_factory):
    server = server_factory(ENV)
    with raw.RawClient(server.tcp_address) as c:
        setup(c, expiry_us=200_000)
        send(c, 10, 0)
        time.sleep(1.0)
        part = topic(c).partitions[0]
        assert (part.segments_count, part.messages_count) == (1, 10)


def test_topic_is_trimmed_to_its_max_size(server_factory):
    server = server_factory(ENV)
    max_size = 3 * SEGMENT_BYTES
    with raw.RawClient(server.tcp_address) as c:
        setup(c, max_size=max_size)
        send(c, 300, 0)
        wait_until(lambda: topic(c).header.size_bytes < max_size * 9 // 10)
        part = topic(c).partitions[0]
        first = c.poll("s", "t", 0, raw.STRATEGY_FIRST, 0, 1000).messages
        assert first[0].offset == 300 - part.messages_count and first[-1].offset == 299
        assert part.current_offset == 299
        send(c, 1, 300)
        assert c.poll("s", "t", 0, raw.STRATEGY_LAST, 0, 1).messages[0].offset == 300


def test_a_topic_spread_over_shards_is_trimmed_to_its_max_size_once(server_factory):
    """With two shards each partition of a 2-partition topic is on its own shard: the whole
    topic is trimmed below 90% of its max size, and each shard deletes only its share (at
    most a segment more), not the topic's excess over again."""
    server = server_factory({**ENV, "LURCHER_SYSTEM_SHARDING_SHARDS": "2"})
    max_size = 10 * SEGMENT_BYTES
    threshold = max_size * 9 // 10
    segment = PER_SEGMENT * MESSAGE_BYTES
    with raw.RawClient(server.tcp_address) as c:
        c.login()
        c.create_stream("s")
        call(c, CreateTopic(S, 2, 1, 0, max_size, 0, "t"))
        for start in range(0, 600, BATCH):
            c.send("s", "t", raw.partition_id(start // BATCH % 2),
                   [raw.message(b"x" * 100) for _ in range(BATCH)])
        wait_until(lambda: topic(c).header.size_bytes < threshold)
        parts = topic(c).partitions
        assert sum(p.size_bytes for p in parts) >= threshold - 2 * segment
        assert all(p.segments_count > 1 for p in parts)


def test_cleaner_disabled_by_default(server_factory):
    server = server_factory({"LURCHER_SYSTEM_SEGMENT_SIZE": str(SEGMENT_BYTES)})
    with raw.RawClient(server.tcp_address) as c:
        setup(c, expiry_us=100_000)
        send(c, 100, 0)
        time.sleep(0.6)
        assert topic(c).partitions[0].messages_count == 100
