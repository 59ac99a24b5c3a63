"""One integration scenario set, written once, run over every transport with our SDK.

Each test takes ``sdk_client`` (parametrized: tcp, tcp-tls, ws, ws-tls, quic, quic-ca, http,
http-tls) and names its resources after the transport, so the module-scoped servers can be
shared. Expected values and error codes are the same on every transport.
"""

from __future__ import annotations

import pytest

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.headers import HeaderValue, decode_headers
from lurcher.core.wire.values.permissions import GlobalPermissions, Permissions
from lurcher.sdk.client import Client
from tests.transports.conftest import make_client


def _name(transport: str, what: str) -> str:
    return f"{what}-{transport}"


async def test_streams_topics_partitions(sdk_client: Client, transport_name: str) -> None:
    stream = _name(transport_name, "orders")
    created = await sdk_client.create_stream(stream)
    assert created.header.name == stream and created.topics == []
    got = await sdk_client.get_stream(stream)
    assert got is not None and got.header.id == created.header.id
    assert stream in [s.name for s in await sdk_client.get_streams()]
    topic = await sdk_client.create_topic(stream, "t", 3)
    assert topic.header.partitions_count == 3 and len(topic.partitions) == 3
    await sdk_client.create_partitions(stream, "t", 2)
    assert (await sdk_client.get_topic(stream, "t")).header.partitions_count == 5
    await sdk_client.delete_partitions(stream, "t", 1)
    details = await sdk_client.get_topic(stream, "t")
    assert details.header.partitions_count == 4
    assert [t.name for t in await sdk_client.get_topics(stream)] == ["t"]
    await sdk_client.update_stream(stream, stream + "-x")
    assert await sdk_client.get_stream(stream) is None
    await sdk_client.delete_topic(stream + "-x", "t")
    assert await sdk_client.get_topic(stream + "-x", "t") is None
    await sdk_client.delete_stream(stream + "-x")
    assert await sdk_client.get_stream(stream + "-x") is None


async def test_send_poll_with_headers(sdk_client: Client, transport_name: str) -> None:
    stream = _name(transport_name, "msgs")
    await sdk_client.create_stream(stream)
    await sdk_client.create_topic(stream, "t", 2)
    payloads = [f"m{i}".encode() * (i + 1) for i in range(5)]
    ids = [1000 + i for i in range(5)]
    headers = {"source": "suite", "n": 7, "flag": True}
    await sdk_client.send_messages(stream, "t", payloads, 1, ids=ids, headers=headers)
    polled = await sdk_client.poll_messages(stream, "t", 1, "first", 10)
    messages = list(polled.messages())
    assert polled.partition_id == 1 and polled.messages_count == 5
    assert [m.payload for m in messages] == payloads
    assert [m.id for m in messages] == ids
    assert [m.offset for m in messages] == list(range(5))
    decoded = decode_headers(messages[0].user_headers)
    assert decoded[HeaderValue.string("source")] == HeaderValue.string("suite")
    assert len(decoded) == 3
    first = await sdk_client.poll_messages(stream, "t", 1, "next", 2, auto_commit=True,
                                           consumer=5)
    assert [m.offset for m in first.messages()] == [0, 1]
    second = await sdk_client.poll_messages(stream, "t", 1, "next", 10, auto_commit=True,
                                            consumer=5)
    assert [m.offset for m in second.messages()] == [2, 3, 4]
    empty = await sdk_client.poll_messages(stream, "t", 0, "first", 10)
    assert empty.messages_count == 0 and list(empty.messages()) == []
    await sdk_client.flush_unsaved_buffer(stream, "t", 1, True)
    assert (await sdk_client.get_topic(stream, "t")).header.messages_count == 5


async def test_consumer_offsets(sdk_client: Client, transport_name: str) -> None:
    stream = _name(transport_name, "offsets")
    await sdk_client.create_stream(stream)
    await sdk_client.create_topic(stream, "t", 1)
    await sdk_client.send_messages(stream, "t", [b"a", b"b", b"c", b"d"], 0)
    assert await sdk_client.get_consumer_offset(7, stream, "t", 0) is None
    await sdk_client.store_consumer_offset(7, stream, "t", 2, 0)
    info = await sdk_client.get_consumer_offset(7, stream, "t", 0)
    assert (info.partition_id, info.current_offset, info.stored_offset) == (0, 3, 2)
    await sdk_client.delete_consumer_offset(7, stream, "t", 0)
    assert await sdk_client.get_consumer_offset(7, stream, "t", 0) is None


async def test_consumer_groups(sdk_client: Client, transport_name: str) -> None:
    stream = _name(transport_name, "groups")
    await sdk_client.create_stream(stream)
    await sdk_client.create_topic(stream, "t", 2)
    group = await sdk_client.create_consumer_group(stream, "t", "g1")
    assert group.header.name == "g1" and group.header.partitions_count == 2
    assert [g.name for g in await sdk_client.get_consumer_groups(stream, "t")] == ["g1"]
    assert (await sdk_client.get_consumer_group(stream, "t", "g1")).header.id == group.header.id
    await sdk_client.delete_consumer_group(stream, "t", "g1")
    assert await sdk_client.get_consumer_group(stream, "t", "g1") is None


async def test_users_and_tokens(sdk_client: Client, transport_name: str,
                                transport_server, test_ca) -> None:
    username = _name(transport_name, "alice")
    perms = Permissions(GlobalPermissions(read_streams=True, read_servers=True))
    user = await sdk_client.create_user(username, "secret-1", permissions=perms)
    assert user.header.username == username and user.permissions == perms
    got = await sdk_client.get_user(username)
    assert got is not None and got.header.id == user.header.id
    assert username in [u.username for u in await sdk_client.get_users()]
    await sdk_client.change_password(username, "secret-1", "secret-2")
    other = make_client(transport_server, transport_name, test_ca,
                        username=username, password="secret-2")
    await other.connect()
    try:
        await other.get_streams()
        with pytest.raises(IggyError) as denied:
            await other.create_stream(_name(transport_name, "denied"))
        assert denied.value.code == ErrorCode.UNAUTHORIZED
        token = await other.create_personal_access_token("pat1")
        assert [p.name for p in await other.get_personal_access_tokens()] == ["pat1"]
    finally:
        await other.close()
    via_pat = make_client(transport_server, transport_name, test_ca, token=token)
    await via_pat.connect()
    try:
        assert isinstance(await via_pat.get_streams(), list)
        await via_pat.delete_personal_access_token("pat1")
    finally:
        await via_pat.close()
    await sdk_client.update_user(username, status="inactive")
    assert (await sdk_client.get_user(username)).header.status == 2
    await sdk_client.update_permissions(username, None)
    assert (await sdk_client.get_user(username)).permissions is None
    await sdk_client.delete_user(username)
    assert await sdk_client.get_user(username) is None


async def test_system_commands(sdk_client: Client, transport_name: str) -> None:
    await sdk_client.ping()
    stats = await sdk_client.get_stats()
    assert stats.iggy_server_version
    meta = await sdk_client.get_cluster_metadata()
    assert meta.nodes and meta.nodes[0].tcp_port > 0 and meta.nodes[0].http_port > 0
    assert meta.nodes[0].quic_port > 0 and meta.nodes[0].websocket_port > 0
    clients = await sdk_client.get_clients()
    assert clients


async def test_errors(sdk_client: Client, transport_name: str, transport_server, test_ca) -> None:
    stream = _name(transport_name, "errors")
    await sdk_client.create_stream(stream)
    with pytest.raises(IggyError) as dup:
        await sdk_client.create_stream(stream)
    assert dup.value.code == ErrorCode.STREAM_NAME_ALREADY_EXISTS
    with pytest.raises(IggyError) as missing:
        await sdk_client.send_messages(stream, "nope", [b"x"], 0)
    assert missing.value.code == ErrorCode.TOPIC_NAME_NOT_FOUND
    with pytest.raises(IggyError) as bad_login:
        await sdk_client.login_user("iggy", "wrong")
    assert bad_login.value.code == ErrorCode.INVALID_CREDENTIALS
    anonymous = make_client(transport_server, transport_name, test_ca)
    await anonymous.connect()
    try:
        await anonymous.ping()
        with pytest.raises(IggyError) as unauth:
            await anonymous.get_streams()
        assert unauth.value.code == ErrorCode.UNAUTHENTICATED
    finally:
        await anonymous.close()
    await sdk_client.delete_stream(stream)
