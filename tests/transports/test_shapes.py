"""JSON shapes (no sockets): exact field names, size strings, and value -> JSON -> value."""

from __future__ import annotations

import msgspec
import pytest

from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.headers import HeaderValue, encode_headers
from lurcher.core.wire.responses.messages import Message, PolledMessages
from lurcher.core.wire.responses.streams import StreamDetails, StreamHeader
from lurcher.core.wire.responses.topics import PartitionInfo, TopicDetails, TopicHeader
from lurcher.core.wire.responses.users import UserDetails, UserHeader
from lurcher.core.wire.values.permissions import (
    GlobalPermissions, Permissions, StreamPermissions, TopicPermissions,
)
from lurcher.core.wire import json_shapes as s


@pytest.mark.parametrize("n,text", [(0, "0 B"), (999, "999 B"), (1234, "1.234 KB"),
                                    (1_234_567, "1.234567 MB"), (2_000_000_000, "2 GB")])
def test_size_text_round_trip(n: int, text: str) -> None:
    assert s.size_text(n) == text
    assert s.parse_size(text) == n


def test_parse_size_rejects_garbage() -> None:
    with pytest.raises(IggyError):
        s.parse_size("lots")


def roundtrip(value: object, kind: type) -> object:
    data = msgspec.json.decode(msgspec.json.encode(s.to_json(value)))
    return s.from_json(kind, data)


def test_stream_topic_round_trip() -> None:
    topic = TopicHeader(1, 10, 1, 0, 2, 2**64 - 1, 1, 1234, 3, "t")
    stream = StreamDetails(StreamHeader(4, 5, 1, 1234, 3, "s"), [topic])
    assert roundtrip(stream, StreamDetails) == stream
    details = TopicDetails(topic, [PartitionInfo(0, 10, 1, 2, 1234, 3)])
    data = s.to_json(details)
    assert set(data) == {"id", "created_at", "name", "size", "message_expiry",
                         "compression_algorithm", "max_topic_size", "replication_factor",
                         "messages_count", "partitions_count", "partitions"}
    assert data["compression_algorithm"] == "gzip" and data["size"] == "1.234 KB"
    assert roundtrip(details, TopicDetails) == details


def test_permissions_and_user_round_trip() -> None:
    perms = Permissions(GlobalPermissions(read_streams=True), {
        3: StreamPermissions(read_stream=True, topics={7: TopicPermissions(poll_messages=True)})})
    user = UserDetails(UserHeader(2, 99, 1, "bob"), perms)
    data = s.to_json(user)
    assert data["status"] == "active"
    assert data["permissions"]["streams"]["3"]["topics"]["7"]["poll_messages"] is True
    assert roundtrip(user, UserDetails) == user
    assert s.permissions_json(Permissions())["streams"] is None


def test_polled_messages_with_headers_round_trip() -> None:
    block = encode_headers({"k": HeaderValue.string("v")})
    polled = PolledMessages.of(1, 5, [Message(7, 2**100, 4, 11, 12, b"hi", block)])
    data = s.to_json(polled)
    message = data["messages"][0]
    assert message["payload"] == "aGk=" and message["header"]["id"] == 2**100
    assert message["user_headers"] == [{"key": {"kind": "string", "value": "aw=="},
                                        "value": {"kind": "string", "value": "dg=="}}]
    assert roundtrip(polled, PolledMessages) == polled


def test_message_ids_and_errors() -> None:
    assert s.message_id("123") == 123
    assert s.message_id("0000000000000000000000000000002a") == 42
    with pytest.raises(IggyError):
        s.message_id("not-an-id")
    assert s.http_status(1009) == 404 and s.http_status(40) == 401 and s.http_status(41) == 403
    assert s.error_json(1012)["code"] == "stream_name_already_exists"
