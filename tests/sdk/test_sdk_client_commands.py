"""Every ``Client`` command over TCP against a real server (users and PATs: test_sdk_users.py)."""

from __future__ import annotations

import time

import pytest

from lurcher.sdk import Client, ErrorCode, IggyError, MessageBatch, Partitioning, PollingStrategy
from lurcher.sdk.api.streams import NEVER_EXPIRE, UNLIMITED_SIZE
from lurcher.sdk.messages import encode_header_block
from tests.sdk.conftest import messages_of


async def test_system_commands(sdk_client: Client) -> None:
    await sdk_client.ping()
    me = await sdk_client.get_me()
    assert me.header.user_id == 0 and me.header.transport == 1
    clients = await sdk_client.get_clients()
    assert me.header.client_id in {c.client_id for c in clients}
    details = await sdk_client.get_client(me.header.client_id)
    assert details is not None and details.header.address == me.header.address
    assert await sdk_client.get_client(999_999) is None
    stats = await sdk_client.get_stats()
    assert stats.iggy_server_version and stats.clients_count >= 1
    cluster = await sdk_client.get_cluster_metadata()
    assert len(cluster.nodes) == 1 and cluster.nodes[0].tcp_port == int(
        sdk_client.config.address.rpartition(":")[2])


async def test_snapshot_answers_zip_or_unavailable(sdk_client: Client) -> None:
    try:
        data = await sdk_client.get_snapshot()
    except IggyError as e:
        assert e.code in (ErrorCode.FEATURE_UNAVAILABLE, ErrorCode.INVALID_COMMAND)
    else:
        assert data[:2] == b"PK"


async def test_stream_crud_and_purge(sdk_client: Client) -> None:
    created = await sdk_client.create_stream("s-crud")
    sid = created.header.id
    assert created.header.name == "s-crud" and created.topics == []
    assert (await sdk_client.get_stream("s-crud")).header.id == sid
    assert (await sdk_client.get_stream(sid)).header.name == "s-crud"
    assert await sdk_client.get_stream("missing") is None
    with pytest.raises(IggyError) as err:
        await sdk_client.create_stream("s-crud")
    assert err.value.code == ErrorCode.STREAM_NAME_ALREADY_EXISTS
    await sdk_client.update_stream(sid, "s-renamed")
    assert [s.name for s in await sdk_client.get_streams()] == ["s-renamed"]
    await sdk_client.create_topic(sid, "t", 1)
    await sdk_client.send_messages(sid, "t", [b"x"] * 5, 0)
    await sdk_client.purge_stream(sid)
    assert (await sdk_client.get_topic(sid, "t")).header.messages_count == 0
    await sdk_client.delete_stream("s-renamed")
    assert await sdk_client.get_stream(sid) is None
    with pytest.raises(IggyError) as err:
        await sdk_client.delete_stream(sid)
    assert err.value.code in (ErrorCode.STREAM_ID_NOT_FOUND, ErrorCode.STREAM_NAME_NOT_FOUND)


async def test_topic_partition_segment_commands(sdk_client: Client) -> None:
    await sdk_client.create_stream("s")
    topic = await sdk_client.create_topic("s", "t", 2, compression="gzip",
                                          message_expiry_us=60_000_000)
    assert topic.header.partitions_count == 2 and len(topic.partitions) == 2
    assert topic.header.compression == 2 and topic.header.message_expiry_us == 60_000_000
    assert [t.name for t in await sdk_client.get_topics("s")] == ["t"]
    await sdk_client.update_topic("s", "t", "t2", message_expiry_us=NEVER_EXPIRE,
                                  max_topic_size_bytes=UNLIMITED_SIZE)
    got = await sdk_client.get_topic("s", "t2")
    assert got.header.name == "t2" and got.header.message_expiry_us == NEVER_EXPIRE
    assert await sdk_client.get_topic("s", "t") is None
    await sdk_client.create_partitions("s", "t2", 3)
    assert (await sdk_client.get_topic("s", "t2")).header.partitions_count == 5
    await sdk_client.delete_partitions("s", "t2", 2)
    assert [p.id for p in (await sdk_client.get_topic("s", "t2")).partitions] == [0, 1, 2]
    await sdk_client.send_messages("s", "t2", [b"a", b"b"], 1)
    await sdk_client.delete_segments("s", "t2", 1, 1)  # only closed segments go; none here
    await sdk_client.purge_topic("s", "t2")
    assert (await sdk_client.get_topic("s", "t2")).header.messages_count == 0
    await sdk_client.delete_topic("s", "t2")
    assert await sdk_client.get_topics("s") == []


async def test_send_poll_flush_with_ids_headers_and_partitionings(sdk_client: Client) -> None:
    await sdk_client.create_stream("m")
    await sdk_client.create_topic("m", "t", 3)
    before = time.time_ns() // 1000
    await sdk_client.send_messages("m", "t", ["hello", b"\x00\x01"], Partitioning.partition(2),
                                   ids=[7, (1 << 127) + 5],
                                   headers=[{"k": "v", "n": 5, "f": 1.5, "b": True}, None])
    polled = await sdk_client.poll_messages("m", "t", 2, PollingStrategy.first(), 10)
    assert (polled.partition_id, polled.current_offset, polled.messages_count) == (2, 1, 2)
    first, second = messages_of(polled)
    assert (first.payload, first.id, first.offset) == (b"hello", 7, 0)
    assert (second.payload, second.id, second.offset, second.user_headers) == (
        b"\x00\x01", (1 << 127) + 5, 1, b"")
    assert before <= first.origin_timestamp <= first.timestamp
    from lurcher.sdk import ReceivedMessage
    received = ReceivedMessage.of(2, first)
    assert received.header_values() == {"k": "v", "n": 5, "f": 1.5, "b": True}
    # balanced: three sends land on three different partitions
    for i in range(3):
        await sdk_client.send_messages("m", "t", [f"bal{i}"])
    # messages key: same key -> same partition
    await sdk_client.send_messages("m", "t", [b"k1"], b"key")
    await sdk_client.send_messages("m", "t", [b"k2"], "key")
    seen = {}
    for p in range(3):
        for m in messages_of(await sdk_client.poll_messages("m", "t", p, "first", 100)):
            seen[m.payload] = p
    assert len({seen[b"bal0"], seen[b"bal1"], seen[b"bal2"]}) == 3
    assert seen[b"k1"] == seen[b"k2"]
    # a prebuilt batch, offset/last/timestamp strategies
    batch = MessageBatch.build([b"p%d" % i for i in range(10)])
    await sdk_client.send_messages("m", "t", batch, 0)
    p0 = messages_of(await sdk_client.poll_messages("m", "t", 0, "first", 1000))
    tail = [m.payload for m in p0][-10:]
    assert tail == [b"p%d" % i for i in range(10)]
    off = p0[-4].offset
    assert [m.offset for m in messages_of(
        await sdk_client.poll_messages("m", "t", 0, off, 100))] == [off, off + 1, off + 2, off + 3]
    assert [m.payload for m in messages_of(
        await sdk_client.poll_messages("m", "t", 0, "last", 2))] == [b"p8", b"p9"]
    ts = p0[-1].timestamp
    assert messages_of(await sdk_client.poll_messages(
        "m", "t", 0, PollingStrategy.timestamp(ts), 100))[-1].payload == b"p9"
    await sdk_client.flush_unsaved_buffer("m", "t", 0, fsync=True)
    with pytest.raises(IggyError) as err:
        await sdk_client.send_messages("m", "t", [b"x"], 9)
    assert err.value.code == ErrorCode.PARTITION_NOT_FOUND


async def test_poll_next_with_auto_commit_and_consumer_offsets(sdk_client: Client) -> None:
    await sdk_client.create_stream("o")
    await sdk_client.create_topic("o", "t", 1)
    await sdk_client.send_messages("o", "t", [b"%d" % i for i in range(10)], 0)
    assert await sdk_client.get_consumer_offset(5, "o", "t", 0) is None
    got = messages_of(await sdk_client.poll_messages("o", "t", 0, "next", 4, True, consumer=5))
    assert [m.offset for m in got] == [0, 1, 2, 3]
    info = await sdk_client.get_consumer_offset(5, "o", "t", 0)
    assert (info.partition_id, info.current_offset, info.stored_offset) == (0, 9, 3)
    await sdk_client.store_consumer_offset("named", "o", "t", 7, 0)
    got = messages_of(await sdk_client.poll_messages("o", "t", 0, "next", 10, consumer="named"))
    assert [m.offset for m in got] == [8, 9]
    await sdk_client.delete_consumer_offset("named", "o", "t", 0)
    assert await sdk_client.get_consumer_offset("named", "o", "t", 0) is None


async def test_consumer_group_commands(sdk_client: Client) -> None:
    await sdk_client.create_stream("g")
    await sdk_client.create_topic("g", "t", 3)
    created = await sdk_client.create_consumer_group("g", "t", "grp")
    assert created.header.name == "grp" and created.header.members_count == 0
    assert [g.name for g in await sdk_client.get_consumer_groups("g", "t")] == ["grp"]
    assert await sdk_client.get_consumer_group("g", "t", "nope") is None
    await sdk_client.join_consumer_group("g", "t", "grp")
    group = await sdk_client.get_consumer_group("g", "t", "grp")
    assert group.header.members_count == 1
    assert sorted(group.members[0].partitions) == [0, 1, 2]
    me = await sdk_client.get_me()
    assert len(me.consumer_groups) == 1
    await sdk_client.send_messages("g", "t", [b"a"], 1)
    polled = await sdk_client.poll_messages("g", "t", 1, "next", 10, consumer="grp", group=True)
    assert [m.payload for m in messages_of(polled)] == [b"a"]
    await sdk_client.store_consumer_offset("grp", "g", "t", 0, 1, group=True)
    info = await sdk_client.get_consumer_offset("grp", "g", "t", 1, group=True)
    assert info.stored_offset == 0
    await sdk_client.leave_consumer_group("g", "t", "grp")
    assert (await sdk_client.get_consumer_group("g", "t", "grp")).header.members_count == 0
    await sdk_client.delete_consumer_group("g", "t", "grp")
    assert await sdk_client.get_consumer_groups("g", "t") == []
    with pytest.raises(IggyError) as err:
        await sdk_client.join_consumer_group("g", "t", "grp")
    assert err.value.code in (ErrorCode.CONSUMER_GROUP_ID_NOT_FOUND,
                              ErrorCode.CONSUMER_GROUP_NAME_NOT_FOUND)


async def test_errors_carry_codes_and_unauthenticated_client(server) -> None:
    client = Client(server.tcp_address, heartbeat_interval_s=None)
    await client.connect()
    await client.ping()  # allowed before login
    with pytest.raises(IggyError) as err:
        await client.get_streams()
    assert err.value.code == ErrorCode.UNAUTHENTICATED
    with pytest.raises(IggyError) as err:
        await client.login_user("iggy", "wrong-password")
    assert err.value.code == ErrorCode.INVALID_CREDENTIALS
    identity = await client.login_user("iggy", "iggy")
    assert identity.user_id == 0
    assert await client.get_streams() == []
    await client.logout_user()
    with pytest.raises(IggyError) as err:
        await client.get_streams()
    assert err.value.code == ErrorCode.UNAUTHENTICATED
    await client.close()
    with pytest.raises(IggyError) as err:
        await client.ping()
    assert err.value.code == ErrorCode.NOT_CONNECTED


async def test_concurrent_requests_share_one_connection(server) -> None:
    """Many tasks and a fast heartbeat on one client: responses never mix, no reconnects."""
    import asyncio

    client = Client(server.tcp_address, username="iggy", password="iggy",
                    heartbeat_interval_s=0.005)
    await client.connect()
    await client.create_stream("cc")
    await client.create_topic("cc", "t", 4)
    first_address = (await client.get_me()).header.address

    async def worker(p: int) -> None:
        for i in range(40):
            await client.send_messages("cc", "t", [b"%d-%d" % (p, i)], p)
            polled = await client.poll_messages("cc", "t", p, i, 1)
            assert [m.payload for m in polled.messages()] == [b"%d-%d" % (p, i)]
            assert (await client.get_stream("cc")).header.name == "cc"

    await asyncio.gather(*(worker(p) for p in range(4)))
    assert (await client.get_me()).header.address == first_address
    await client.close()


@pytest.mark.parametrize("headers,code", [
    ({"k": ""}, ErrorCode.INVALID_HEADER_VALUE), ({"k": b"x" * 256}, ErrorCode.INVALID_HEADER_VALUE),
    ({"": "v"}, ErrorCode.INVALID_HEADER_KEY), ({"k" * 256: "v"}, ErrorCode.INVALID_HEADER_KEY),
])
def test_a_header_key_or_value_outside_1_to_255_bytes_names_itself(headers, code) -> None:
    """Such a header was built and its block refused with INVALID_FORMAT (4), which named
    neither the header nor the problem; Iggy's SDK refuses it as InvalidHeaderKey or
    InvalidHeaderValue."""
    with pytest.raises(IggyError) as err:
        encode_header_block(headers)
    assert err.value.code == code


async def test_a_command_with_no_http_route_names_itself_and_keeps_the_connection(
        server_factory) -> None:
    """Over HTTP a command with no route (GetMe, joining a group, the snapshot) answered a
    bare FeatureUnavailable (5) naming neither the command nor the transport."""
    server = server_factory({"LURCHER_HTTP_ENABLED": "true",
                             "LURCHER_HTTP_ADDRESS": "127.0.0.1:0"})
    async with Client.from_connection_string(
            f"iggy+http://iggy:iggy@{server.endpoints['http']}?heartbeat_interval=1h") as client:
        connection = client._conn
        for call, command in ((client.get_me(), "get_me"),
                              (client.get_snapshot(), "get_snapshot_file"),
                              (client.join_consumer_group("s", "t", "g"), "join_consumer_group")):
            with pytest.raises(IggyError) as err:
                await call
            assert err.value.code == ErrorCode.FEATURE_UNAVAILABLE
            assert f"{command} is not available over http" in str(err.value)
        assert client._conn is connection and connection.connected
        await client.ping()
