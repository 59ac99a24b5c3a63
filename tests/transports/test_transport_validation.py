"""Field validation on every front end (issue 14, point 7) against the real servers of the
transport suite.

Bad fields sent as JSON are refused with 400 and the Iggy code of their rule (422
INVALID_FORMAT for a number outside its field's type, as Iggy 0.8's serde), and nothing
is stored; afterwards GetStreams/GetTopics/GetConsumerGroups keep working over every
transport (before the fix one stored 300-character name broke every list, and a TCP
connection was dropped by the encoder). Binary decode applies the same rules.

Point 8: a message whose reserved field is not 0, or whose user headers the official client
could not decode, is refused at send over every transport with the 0.8 code; polls of the
partition keep answering only clean messages.
"""

from __future__ import annotations

import itertools
import ssl
import struct
from typing import Any

import httpx
import pytest

from lurcher.core.wire.batch import RESERVED_AT, MessageBatch, write_u64_at
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.client import Client
from tests.support.raw import RawClient, ident, name
from tests.support.server import LurcherServer
from tests.transports.conftest import TRANSPORTS, CaFiles

_ids = itertools.count()
LONG = "x" * 300


def http_client(server: LurcherServer, tls: bool, ca: CaFiles) -> httpx.AsyncClient:
    scheme = "https" if tls else "http"
    return httpx.AsyncClient(base_url=f"{scheme}://{server.endpoints['http']}",
                             verify=ssl.create_default_context(cafile=str(ca.ca_file))
                             if tls else False, timeout=30.0)


async def bearer(http: httpx.AsyncClient) -> dict[str, str]:
    r = await http.post("/users/login", json={"username": "iggy", "password": "iggy"})
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['access_token']['token']}"}


def bad_requests(stream: str, topic: str) -> list[tuple[str, str, Any, int, int]]:
    """(method, path, JSON body, expected status, expected Iggy code) of every field rule
    reachable by JSON. A number outside its field's Rust type does not deserialize in Iggy
    0.8 (axum's ``Json``): 422 INVALID_FORMAT; a rule of ``validate()``: 400 and its code."""
    t = f"/streams/{stream}/topics"
    settings = {"compression_algorithm": "none", "message_expiry": 0, "max_topic_size": 0}
    topic_fields = {"name": "nt", "partitions_count": 1, **settings}
    not_its_type = (422, ErrorCode.INVALID_FORMAT)
    return [
        ("POST", "/streams", {"name": LONG}, 400, ErrorCode.INVALID_STREAM_NAME),
        ("POST", "/streams", {"name": ""}, 400, ErrorCode.INVALID_STREAM_NAME),
        ("PUT", f"/streams/{stream}", {"name": LONG}, 400, ErrorCode.INVALID_STREAM_NAME),
        ("POST", t, {**topic_fields, "name": LONG}, 400, ErrorCode.INVALID_TOPIC_NAME),
        ("POST", t, {**topic_fields, "message_expiry": -5}, *not_its_type),
        ("POST", t, {**topic_fields, "message_expiry": 2 ** 64}, *not_its_type),
        ("POST", t, {**topic_fields, "replication_factor": 300}, *not_its_type),
        ("POST", t, {**topic_fields, "replication_factor": -1}, *not_its_type),
        ("POST", t, {**topic_fields, "replication_factor": 0},
         400, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("POST", t, {**topic_fields, "partitions_count": -1}, *not_its_type),
        ("POST", t, {**topic_fields, "partitions_count": 1001}, 400, ErrorCode.TOO_MANY_PARTITIONS),
        ("PUT", f"{t}/{topic}", {**settings, "name": LONG}, 400, ErrorCode.INVALID_TOPIC_NAME),
        ("PUT", f"{t}/{topic}", {**settings, "name": topic, "message_expiry": -5}, *not_its_type),
        ("POST", f"{t}/{topic}/consumer-groups", {"name": LONG},
         400, ErrorCode.INVALID_CONSUMER_GROUP_NAME),
        ("PUT", f"{t}/{topic}/consumer-offsets", {"consumer_id": 1, "partition_id": 0,
                                                  "offset": -1}, *not_its_type),
        ("POST", "/users", {"username": "u" * 300, "password": "secret", "status": "active"},
         400, ErrorCode.INVALID_USERNAME),
        ("POST", "/personal-access-tokens", {"name": "p" * 300, "expiry": 0},
         400, ErrorCode.INVALID_PERSONAL_ACCESS_TOKEN_NAME),
    ]


async def refuse_everything(http: httpx.AsyncClient, stream: str, topic: str) -> None:
    auth = await bearer(http)
    r = await http.post("/streams", json={"name": stream}, headers=auth)
    assert r.status_code == 200, r.text
    r = await http.post(f"/streams/{stream}/topics", headers=auth, json={
        "name": topic, "partitions_count": 1, "compression_algorithm": "none",
        "message_expiry": 0, "max_topic_size": 0})
    assert r.status_code == 200, r.text
    for method, path, body, status, code in bad_requests(stream, topic):
        r = await http.request(method, path, json=body, headers=auth)
        assert (r.status_code, r.json()["id"]) == (status, code), (method, path, body, r.text)
    r = await http.post("/streams", content=b'{"name": "\xff\xfe"}',
                        headers={**auth, "content-type": "application/json"})
    assert (r.status_code, r.json()["id"]) == (400, ErrorCode.INVALID_UTF8), r.text
    r = await http.get(f"/streams/{stream}/topics/{topic}/messages", headers=auth,
                       params={"count": -1, "partition_id": 0})
    assert (r.status_code, r.json()["id"]) == (400, ErrorCode.INVALID_FORMAT), r.text


async def test_bad_fields_are_refused_and_lists_keep_working(
        sdk_client: Client, transport_server: LurcherServer, transport_name: str,
        test_ca: CaFiles) -> None:
    stream, topic = f"valid-{next(_ids)}-{transport_name}", "t"
    tls = TRANSPORTS[transport_name][0] == "tls_server"
    async with http_client(transport_server, tls, test_ca) as http:
        await refuse_everything(http, stream, topic)
    streams = await sdk_client.get_streams()
    assert all(len(s.name.encode()) <= 255 for s in streams)
    assert stream in {s.name for s in streams} and "" not in {s.name for s in streams}
    topics = await sdk_client.get_topics(stream)
    assert [(t.name, t.replication_factor) for t in topics] == [(topic, 1)]
    assert await sdk_client.get_consumer_groups(stream, topic) == []
    details = await sdk_client.get_stream(stream)
    assert details is not None and details.header.name == stream


def test_binary_decode_path_refuses_the_same_fields(plain_server: LurcherServer) -> None:
    """Raw TCP: a name with invalid UTF-8, compression 3 and 0; the connection stays."""
    with RawClient(plain_server.endpoints["tcp"]) as c:
        c.login()
        stream = f"raw-{next(_ids)}"
        c.create_stream(stream)
        assert c.request(202, b"\x02\xff\xfe").status == ErrorCode.INVALID_UTF8
        for compression in (0, 3):
            payload = ident(stream) + struct.pack("<IBQQB", 1, compression, 0, 0, 0) + name("t")
            assert c.request(302, payload).status == ErrorCode.INVALID_COMMAND
        c.ping()
        assert c.request(201).status == 0



# -- point 8: reserved field and user headers at send ---------------------------------------
def tlv(kind: int, value: bytes, length: int | None = None) -> bytes:
    return struct.pack("<BI", kind, len(value) if length is None else length) + value


GOOD_BLOCK = tlv(2, b"k") + tlv(11, struct.pack("<I", 7))
BAD_BLOCKS = [  # (block, code the official client's decoder would also refuse)
    (tlv(2, b"k") + tlv(99, b"v"), ErrorCode.INVALID_HEADER_KIND),
    (tlv(2, b"k") + tlv(11, b"\x01\x02"), ErrorCode.INVALID_HEADER_VALUE),
    (tlv(12, b"\x01") + tlv(2, b"v"), ErrorCode.INVALID_HEADER_KEY),
    (tlv(2, b"k"), ErrorCode.INVALID_FORMAT),
    (tlv(0, b"k") + tlv(2, b"v"), ErrorCode.INVALID_FORMAT),
    (tlv(2, b"k") + tlv(2, b"", 0), ErrorCode.INVALID_FORMAT),
    (tlv(2, b"k") + tlv(2, b"v", 9), ErrorCode.INVALID_COMMAND),
]


def batch_with(headers: list[bytes], reserved_at: int | None = None) -> MessageBatch:
    batch = MessageBatch.build([b"p%d" % i for i in range(len(headers))],
                               user_headers=headers).writable()
    if reserved_at is not None:
        write_u64_at(batch.blob, batch.starts()[reserved_at:reserved_at + 1], RESERVED_AT, 7)
    return batch


async def test_bad_messages_are_refused_at_send_and_polls_stay_clean(
        sdk_client: Client, transport_name: str) -> None:
    stream = f"msgs-{next(_ids)}-{transport_name}"
    await sdk_client.create_stream(stream)
    await sdk_client.create_topic(stream, "t", 1)
    for block, code in BAD_BLOCKS:
        with pytest.raises(IggyError) as info:
            await sdk_client.send_messages(stream, "t", batch_with([GOOD_BLOCK, b"", block]), 0)
        assert info.value.code == code, block
    reserved = batch_with([b"", GOOD_BLOCK, b""], reserved_at=1)
    if TRANSPORTS[transport_name][2] == "http":  # JSON has no reserved field: stored as 0
        await sdk_client.send_messages(stream, "t", reserved, 0)
        expected = 4
    else:
        with pytest.raises(IggyError) as info:
            await sdk_client.send_messages(stream, "t", reserved, 0)
        assert info.value.code == ErrorCode.INVALID_RESERVED_FIELD
        expected = 1
    await sdk_client.send_messages(stream, "t", batch_with([GOOD_BLOCK]), 0)
    polled = list((await sdk_client.poll_messages(stream, "t", 0, "first", 100)).messages())
    assert len(polled) == expected
    assert all(m.reserved == 0 for m in polled)
    assert polled[-1].user_headers == GOOD_BLOCK
