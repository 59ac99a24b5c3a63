"""The official apache-iggy 0.8.0 client over TLS-TCP, HTTP and WebSocket (plain and TLS).

Same basic flow on each: create a stream and a topic, send, poll, get (and a missing stream
reads as None). HTTP needs an explicit ``login_user`` (wire §14.3). QUIC is not covered here:
the 0.8.0 Python wheel cannot create a QUIC endpoint (wire §19.1); see test_bad_input's raw
aioquic client and the SDK scenarios instead.
"""

from __future__ import annotations

import pytest
from apache_iggy import IggyClient, PollingStrategy, SendMessage

from tests.support.server import LurcherServer
from tests.transports.conftest import CaFiles


async def basic_flow(client: IggyClient, name: str) -> None:
    await client.ping()
    await client.create_stream(name)
    stream = await client.get_stream(name)
    assert stream is not None and stream.name == name and stream.topics_count == 0
    await client.create_topic(name, "t", 2)
    topic = await client.get_topic(name, "t")
    assert topic is not None and topic.partitions_count == 2
    await client.send_messages(name, "t", 1, [SendMessage(b"hello"), SendMessage("world")])
    got = await client.poll_messages(name, "t", 1, PollingStrategy.First(), 10, False)
    assert [m.payload() for m in got] == [b"hello", b"world"]
    assert [m.offset() for m in got] == [0, 1]
    nxt = await client.poll_messages(name, "t", 1, PollingStrategy.Next(), 1, True)
    assert [m.offset() for m in nxt] == [0]
    assert await client.get_stream(name + "-missing") is None
    assert (await client.get_topic(name, "t")).messages_count == 2


async def test_official_tcp_tls(tls_server: LurcherServer, test_ca: CaFiles) -> None:
    url = (f"iggy+tcp://iggy:iggy@{tls_server.endpoints['tcp']}"
           f"?tls=true&tls_domain=localhost&tls_ca_file={test_ca.ca_file}")
    client = IggyClient.from_connection_string(url)
    await client.connect()
    await basic_flow(client, "official-tls")


async def test_official_tcp_tls_rejects_unknown_ca(tls_server: LurcherServer) -> None:
    url = f"iggy+tcp://iggy:iggy@{tls_server.endpoints['tcp']}?tls=true&tls_domain=localhost"
    client = IggyClient.from_connection_string(url)
    with pytest.raises(Exception):
        await client.connect()
        await client.ping()


async def test_official_http(plain_server: LurcherServer) -> None:
    client = IggyClient.from_connection_string(f"iggy+http://iggy:iggy@{plain_server.endpoints['http']}")
    await client.connect()
    await client.login_user("iggy", "iggy")
    await basic_flow(client, "official-http")


async def test_official_websocket(plain_server: LurcherServer) -> None:
    client = IggyClient.from_connection_string(
        f"iggy+ws://iggy:iggy@{plain_server.endpoints['websocket']}")
    await client.connect()
    await basic_flow(client, "official-ws")


async def test_official_websocket_tls(tls_server: LurcherServer, test_ca: CaFiles) -> None:
    client = IggyClient.from_connection_string(
        f"iggy+ws://iggy:iggy@{tls_server.endpoints['websocket']}"
        f"?tls=true&tls_domain=localhost&tls_ca_file={test_ca.ca_file}")
    await client.connect()
    await basic_flow(client, "official-wss")
