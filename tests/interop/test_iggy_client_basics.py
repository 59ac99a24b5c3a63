"""The official apache-iggy 0.8.0 client: connect, ping, login, streams, topics, errors.

Error assertions match the Rust variant names the Python client puts in its RuntimeError
text (wire reference §13); either the Id or the Name variant of a not-found is accepted.
"""

from __future__ import annotations

import pytest
from apache_iggy import IggyClient, PollingStrategy, SendMessage

from tests.support.official import connect_client
from tests.support.server import LurcherServer

STREAM_NOT_FOUND = r"Stream(Id|Name)NotFound"
TOPIC_NOT_FOUND = r"Topic(Id|Name)NotFound"


async def test_plain_connect_then_ping(server: LurcherServer) -> None:
    client = IggyClient(server.tcp_address)
    await client.connect()
    await client.ping()
    await client.ping()


async def test_login(server: LurcherServer) -> None:
    client = await connect_client(server, login=False)
    await client.login_user("iggy", "iggy")
    await client.ping()


async def test_wrong_password_is_invalid_credentials(server: LurcherServer) -> None:
    client = await connect_client(server, login=False)
    with pytest.raises(RuntimeError, match="InvalidCredentials"):
        await client.login_user("iggy", "not-the-password")


async def test_create_and_get_stream(client: IggyClient) -> None:
    await client.create_stream("alpha")
    await client.create_stream("beta")
    by_name = await client.get_stream("beta")
    assert by_name is not None
    assert (by_name.id, by_name.name, by_name.topics_count, by_name.messages_count) == (1, "beta", 0, 0)
    by_id = await client.get_stream(0)
    assert by_id is not None and by_id.name == "alpha" and by_id.id == 0
    assert await client.get_stream("missing") is None
    assert await client.get_stream(77) is None


async def test_create_and_get_topic_with_partitions(client: IggyClient) -> None:
    await client.create_stream("s")
    await client.create_topic("s", "t0", 1)
    await client.create_topic("s", "t1", 5)
    topic = await client.get_topic("s", "t1")
    assert topic is not None
    assert (topic.id, topic.name, topic.partitions_count, topic.messages_count) == (1, "t1", 5, 0)
    by_ids = await client.get_topic(0, 1)
    assert by_ids is not None and by_ids.name == "t1"
    stream = await client.get_stream("s")
    assert stream is not None and stream.topics_count == 2
    assert await client.get_topic("s", "missing") is None


async def test_duplicate_stream_name(client: IggyClient) -> None:
    await client.create_stream("dup")
    with pytest.raises(RuntimeError, match="StreamNameAlreadyExists"):
        await client.create_stream("dup")
    await client.ping()


async def test_duplicate_topic_name(client: IggyClient) -> None:
    await client.create_stream("s")
    await client.create_topic("s", "t", 1)
    with pytest.raises(RuntimeError, match="TopicNameAlreadyExists"):
        await client.create_topic("s", "t", 2)


async def test_unknown_stream_errors(client: IggyClient) -> None:
    with pytest.raises(RuntimeError, match=STREAM_NOT_FOUND):
        await client.create_topic("nope", "t", 1)
    with pytest.raises(RuntimeError, match=STREAM_NOT_FOUND):
        await client.send_messages("nope", "t", 0, [SendMessage(b"x")])
    with pytest.raises(RuntimeError, match=STREAM_NOT_FOUND):
        await client.poll_messages("nope", "t", 0, PollingStrategy.First(), 1, False)
    with pytest.raises(RuntimeError, match=STREAM_NOT_FOUND):
        await client.create_topic(42, "t", 1)


async def test_unknown_topic_and_partition_errors(client: IggyClient) -> None:
    await client.create_stream("s")
    await client.create_topic("s", "t", 2)
    with pytest.raises(RuntimeError, match=TOPIC_NOT_FOUND):
        await client.send_messages("s", "nope", 0, [SendMessage(b"x")])
    with pytest.raises(RuntimeError, match=TOPIC_NOT_FOUND):
        await client.poll_messages("s", "nope", 0, PollingStrategy.First(), 1, False)
    with pytest.raises(RuntimeError, match="PartitionNotFound"):
        await client.send_messages("s", "t", 2, [SendMessage(b"x")])
    await client.send_messages("s", "t", 1, [SendMessage(b"ok")])
    got = await client.poll_messages("s", "t", 1, PollingStrategy.First(), 10, False)
    assert [m.payload() for m in got] == [b"ok"]


async def test_empty_partition_polls_empty(client: IggyClient) -> None:
    await client.create_stream("s")
    await client.create_topic("s", "t", 1)
    for strategy in (PollingStrategy.First(), PollingStrategy.Last(), PollingStrategy.Next(),
                     PollingStrategy.Offset(0), PollingStrategy.Timestamp(0)):
        assert await client.poll_messages("s", "t", 0, strategy, 10, False) == []


async def test_a_batch_above_the_send_limit_is_invalid_command(server: LurcherServer) -> None:
    """70 MB in one SendMessages (``limits.max_send_payload_bytes`` is 64 MiB): the client
    gets InvalidCommand. It got TcpError before: the server closed while the client was
    still writing the frame, and the reset discarded the answer."""
    client = await connect_client(server)
    await client.create_stream("s")
    await client.create_topic("s", "t", 1)
    with pytest.raises(RuntimeError, match="InvalidCommand"):
        await client.send_messages("s", "t", 0,
                                   [SendMessage(bytes(10_000_000)) for _ in range(7)])
    other = await connect_client(server)
    await other.send_messages("s", "t", 0, [SendMessage(b"after")])
    polled = await other.poll_messages("s", "t", 0, PollingStrategy.Offset(0), 10, False)
    assert [m.payload() for m in polled] == [b"after"]
