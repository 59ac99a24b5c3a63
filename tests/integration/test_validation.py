"""Start-up with metadata an older version stored out of range (issue 14, point 7).

A server is started and stopped; then events breaking the field rules (a 300-character
stream name, a topic with expiry -5, replication factor 300 and a 300-character name, a
300-character group name) are appended to its metadata log with the real ``MetaStore``, as
an old version did. On restart (1 and 2 shards) the server loads them, logs a warning, and
every list answers on TCP for every user: the values show cut to 255 bytes or as the server
default; a rename repairs a name. Before the fix the encoder raised and the TCP connection
was dropped on GetStreams/GetTopics.

Point 8: a message with a non-zero reserved field or undecodable user headers is refused at
send (4101, 4040), so the official client keeps polling the partition (before the fix the
message was stored and every poll over it raised InvalidReservedField).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from apache_iggy import PollingStrategy

from lurcher.core.meta import events as ev
from lurcher.core.meta.store import MetaStore
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.sdk.client import Client
from tests.support import raw
from tests.support.official import connect_client
from tests.support.raw import RawClient
from tests.support.server import ServerFactory

U64_MAX = 2 ** 64 - 1
NOW_US = 1_700_000_000_000_000


def plant_legacy_metadata(data_dir: Path) -> None:
    store = MetaStore(data_dir / "state" / "log")
    sid = store.state.stream_ids.peek()
    store.record(ev.StreamCreated(sid, "s" * 300, NOW_US))
    store.record(ev.TopicCreated(sid, 0, "t" * 300, NOW_US, 2, 1, -5, U64_MAX, 300))
    store.record(ev.TopicCreated(sid, 1, "plain", NOW_US, 1, 1, 0, -1, 1))
    store.record(ev.ConsumerGroupCreated(sid, 0, 0, "g" * 300))
    store.close()


async def lists_answer(address: str) -> None:
    async with Client(address, username="iggy", password="iggy",
                      reconnection_enabled=False, heartbeat_interval_s=None) as client:
        streams = await client.get_streams()
        assert [s.name for s in streams] == ["s" * 255]
        sid = streams[0].id
        topics = await client.get_topics(sid)
        assert [(t.name, t.message_expiry_us, t.max_topic_size_bytes, t.replication_factor)
                for t in topics] == [("t" * 255, U64_MAX, U64_MAX, 1),
                                     ("plain", 0, U64_MAX, 1)]
        details = await client.get_stream(sid)
        assert details is not None and len(details.topics) == 2
        groups = await client.get_consumer_groups(sid, 0)
        assert [g.name for g in groups] == ["g" * 255]
        await client.update_stream(sid, "repaired")
        assert [s.name for s in await client.get_streams()] == ["repaired"]
        await client.ping()


@pytest.mark.parametrize("shards", [1, 2])
def test_legacy_out_of_range_metadata_loads_and_lists_answer(
        server_factory: ServerFactory, tmp_path: Path, shards: int) -> None:
    data_dir = tmp_path / "data"
    env = {"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)}
    server = server_factory(env, data_dir=data_dir)
    server.stop()
    plant_legacy_metadata(data_dir)
    server.start(data_dir, env)
    asyncio.run(lists_answer(server.endpoints["tcp"]))
    assert "stored metadata out of range" in server.log_tail(20_000)


# -- point 8: a bad message is refused, so the official client keeps polling ----------------
@pytest.mark.parametrize("shards", [1, 2])
def test_reserved_and_bad_headers_refused_official_client_polls(
        server_factory: ServerFactory, shards: int) -> None:
    server = server_factory({"LURCHER_SYSTEM_SHARDING_SHARDS": str(shards)})
    with RawClient(server.endpoints["tcp"]) as c:
        c.login()
        c.create_stream("s")
        c.create_topic("s", "t", 2)
        good = raw.message(b"good", headers=raw.user_headers([(2, b"k", 2, b"v")]))
        cases = [([good, raw.message(b"bad", reserved=9)], ErrorCode.INVALID_RESERVED_FIELD),
                 ([raw.message(b"bad", headers=raw.user_headers([(2, b"k", 77, b"v")]))],
                  ErrorCode.INVALID_HEADER_KIND)]
        for partition in (0, 1):  # with 2 shards, partitions spread over both
            for messages, code in cases:
                c.send_frame(raw.SEND_MESSAGES, raw.send_messages_payload(
                    "s", "t", raw.partition_id(partition), messages))
                assert c.read_response().status == code
            c.send_frame(raw.SEND_MESSAGES, raw.send_messages_payload(
                "s", "t", raw.partition_id(partition), [good]))
            assert c.read_response().status == 0

    async def poll() -> list[list[bytes]]:
        client = await connect_client(server)
        return [[m.payload() for m in await client.poll_messages(
            "s", "t", partition, PollingStrategy.First(), 10, False)] for partition in (0, 1)]

    assert asyncio.run(poll()) == [[b"good"], [b"good"]]
