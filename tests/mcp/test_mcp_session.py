"""A real MCP client session against lurcher-mcp and a real lurcher-server, over stdio and
streamable HTTP: tools and resources listed, a stream and topic created, JSON messages sent
and polled back decoded, resources read, a consumer offset stored and read; bad arguments
(out of range, names too long, bad message ids) refused as invalid arguments."""

from __future__ import annotations

import base64

import pytest
from mcp.shared.exceptions import MCPError

from tests.mcp.conftest import mcp_session

EXPECTED_TOOLS = {
    "ping", "get_stats", "get_me", "get_client", "get_clients", "get_cluster_metadata",
    "snapshot", "get_streams", "get_stream", "create_stream", "update_stream", "delete_stream",
    "purge_stream", "get_topics", "get_topic", "create_topic", "update_topic", "delete_topic",
    "purge_topic", "create_partitions", "delete_partitions", "delete_segments",
    "send_messages", "poll_messages", "get_consumer_groups", "get_consumer_group",
    "create_consumer_group", "delete_consumer_group", "get_consumer_offset",
    "store_consumer_offset", "delete_consumer_offset", "get_users", "get_user", "create_user",
    "update_user", "delete_user", "update_permissions", "change_password",
    "get_personal_access_tokens", "create_personal_access_token",
    "delete_personal_access_token",
}
ORDERS = [{"order": i, "item": f"widget-{i}", "price": 9.5 + i} for i in range(5)]
TOPIC = {"stream_id": "mcp", "topic_id": "t"}
LONG_NAME = "é" * 200  # 200 characters (within the schema's 255), 400 bytes as UTF-8
TOO_LONG = "9" * 400 + "s"


def typed_header(kind: str, value: object) -> dict[str, object]:
    """A message whose one header is of ``kind`` with ``value``."""
    return {"payload": "x", "headers": {"k": {"kind": kind, "value": value}}}


# (tool, arguments, text the error must contain): all refused before anything is sent
BAD_ARGUMENTS = [
    ("get_stream", {"stream_id": -1}, ">= 0"),
    ("get_stream", {"stream_id": 2**32}, "<= 4294967295"),
    ("get_stream", {"stream_id": 10**30}, "<= 4294967295"),
    ("send_messages", {**TOPIC, "partition_id": -1, "messages": [{"payload": "x"}]},
     "partition_id"),
    ("poll_messages", {**TOPIC, "partition_id": -1}, "partition_id"),
    ("poll_messages", {**TOPIC, "offset": 2**64}, "offset"),
    ("poll_messages", {**TOPIC, "strategy": "timestamp", "timestamp": 2**64}, "timestamp"),
    ("poll_messages", {**TOPIC, "consumer": -1}, "consumer"),
    ("poll_messages", {**TOPIC, "consumer": 2**40}, "consumer"),
    ("store_consumer_offset", {**TOPIC, "partition_id": 0, "offset": 2**64}, "offset"),
    ("get_client", {"client_id": 2**40}, "client_id"),
    ("get_user", {"user_id": 2**33}, "user_id"),
    ("create_topic", {"stream_id": "mcp", "name": "t", "message_expiry": 10**30},
     "message_expiry"),
    ("create_topic", {"stream_id": "mcp", "name": "t", "message_expiry": -5}, "message_expiry"),
    ("create_topic", {"stream_id": "mcp", "name": "t", "message_expiry": TOO_LONG}, "too long"),
    ("create_personal_access_token", {"name": "p", "expiry": -1}, "expiry"),
    ("create_personal_access_token", {"name": "p", "expiry": TOO_LONG}, "too long"),
    ("create_stream", {"name": LONG_NAME}, "at most 255 bytes"),
    ("get_stream", {"stream_id": LONG_NAME}, "at most 255 bytes"),
    ("create_user", {"username": "u", "password": LONG_NAME}, "at most 255 bytes"),
    ("send_messages", {**TOPIC, "messages": [{"payload": "x", "id": "9" * 5000}]},
     "outside 0..2^128-1"),
    ("send_messages", {**TOPIC, "messages": [{"payload": "x", "id": "²"}]}, "neither"),
    ("send_messages", {**TOPIC, "messages": [{"payload": "x", "id": "١"}]}, "neither"),
    ("send_messages", {**TOPIC, "messages": [typed_header("string", 5)]}, "must be text"),
    ("send_messages", {**TOPIC, "messages": [typed_header("string", None)]}, "must be text"),
    ("send_messages", {**TOPIC, "messages": [typed_header("raw", 1234)]}, "base64 text"),
    ("send_messages", {**TOPIC, "messages": [typed_header("uint128", 1.9)]}, "an integer"),
    ("send_messages", {**TOPIC, "messages": [typed_header("uint128", "7")]}, "an integer"),
    ("send_messages", {**TOPIC, "messages": [typed_header("int64", True)]}, "an integer"),
    ("send_messages", {**TOPIC, "messages": [typed_header("bool", 1)]}, "a bool"),
    ("update_permissions", {"user_id": 0, "permissions": {"streams": {"99999999999": {}}}},
     "<= 4294967295"),
    ("update_permissions", {"user_id": 0, "permissions": {"streams": {"-1": {}}}}, ">= 0"),
    ("create_user", {"username": "u", "password": "p", "permissions": {"streams": {
        "1": {"topics": {"4294967296": {}}}}}}, "<= 4294967295"),
]
BAD_RESOURCES = [
    ("lurcher://streams/mcp/topics/t/partitions/99999999999/messages", "outside 0..4294967295"),
    ("lurcher://streams/mcp/topics/t/partitions/0/messages?count=%D9%A1", "count"),
    ("lurcher://streams/" + "%C3%A9" * 200, "at most 255 bytes"),
    ("lurcher://streams/%FF", "not UTF-8"),  # read stream "\ufffd" (another name)
    ("lurcher://streams/mcp/topics/t%C3", "not UTF-8"),
]


async def test_session_end_to_end(mcp_target) -> None:
    async with mcp_session(*mcp_target()) as mcp:
        tools = (await mcp.session.list_tools()).tools
        assert {t.name for t in tools} == EXPECTED_TOOLS
        assert all(t.description and t.input_schema["type"] == "object" for t in tools)
        templates = (await mcp.session.list_resource_templates()).resource_templates
        assert len(templates) == 3

        await mcp.call("ping")
        stream = await mcp.call("create_stream", name="shop")
        assert stream["name"] == "shop"
        topic = await mcp.call("create_topic", stream_id="shop", name="orders",
                               partitions_count=2, message_expiry="7d")
        assert [p["id"] for p in topic["partitions"]] == [0, 1]

        sent = await mcp.call("send_messages", stream_id="shop", topic_id="orders",
                              partition_id=0, messages=[
                                  {"payload": o, "headers": {"source": "test", "n": o["order"]}}
                                  for o in ORDERS])
        assert sent["messages_count"] == len(ORDERS)
        await mcp.call("send_messages", stream_id="shop", topic_id="orders", partition_id=0,
                       messages=[{"payload": "plain words"},
                                 {"payload": base64.b64encode(b"\xff\x00\x01").decode(),
                                  "encoding": "base64"}])

        polled = await mcp.call("poll_messages", stream_id="shop", topic_id="orders",
                                partition_id=0, strategy="first", count=10)
        msgs = polled["messages"]
        assert [m["offset"] for m in msgs] == list(range(7))
        assert [m["payload"] for m in msgs[:5]] == ORDERS
        assert {m["payload_encoding"] for m in msgs[:5]} == {"json"}
        assert msgs[0]["headers"] == {"source": {"kind": "string", "value": "test"},
                                      "n": {"kind": "int64", "value": 0}}
        assert (msgs[5]["payload_encoding"], msgs[5]["payload"]) == ("text", "plain words")
        assert msgs[6]["payload_encoding"] == "base64"
        assert base64.b64decode(msgs[6]["payload"]) == b"\xff\x00\x01"
        assert polled["next_offset"] == 7 and not polled["truncated"]

        listed = (await mcp.session.list_resources()).resources
        assert {str(r.uri) for r in listed} >= {"lurcher://streams",
                                                "lurcher://streams/0/topics/0"}
        tree = await mcp.read("lurcher://streams")
        assert tree["streams"][0]["name"] == "shop"
        assert tree["streams"][0]["topics"][0]["name"] == "orders"
        details = await mcp.read("lurcher://streams/shop/topics/orders")
        assert details["partitions"][0]["messages_count"] == 7
        latest = await mcp.read(
            "lurcher://streams/shop/topics/orders/partitions/0/messages?count=2")
        assert [m["offset"] for m in latest["messages"]] == [5, 6]

        assert (await mcp.call("get_consumer_offset", stream_id="shop", topic_id="orders",
                               partition_id=0))["stored_offset"] is None
        await mcp.call("store_consumer_offset", stream_id="shop", topic_id="orders",
                       partition_id=0, offset=4)
        offset = await mcp.call("get_consumer_offset", stream_id="shop", topic_id="orders",
                                partition_id=0)
        assert (offset["stored_offset"], offset["current_offset"]) == (4, 6)
        following = await mcp.call("poll_messages", stream_id="shop", topic_id="orders",
                                   partition_id=0, strategy="next", count=1)
        assert [m["offset"] for m in following["messages"]] == [5]


async def test_errors_are_tool_errors(mcp_target) -> None:
    async with mcp_session(*mcp_target()) as mcp:
        message, data = await mcp.call_error("delete_stream", stream_id="missing")
        assert data["kind"] == "iggy_error"
        assert data["name"] == "StreamNameNotFound" and "StreamNameNotFound" in message
        message, data = await mcp.call_error("create_stream", nme="typo")
        assert data["kind"] == "invalid_arguments" and "nme" in message
        message, data = await mcp.call_error("no_such_tool")
        assert data["kind"] == "unknown_tool"
        await mcp.call("ping")  # still serving


async def test_out_of_range_and_unsendable_arguments_are_invalid(mcp_target) -> None:
    """Numbers outside their wire type, names over 255 UTF-8 bytes, durations too long,
    message ids that are not ASCII digits within u128 (or a UUID) and typed header values
    of another JSON type than their kind takes (they were an internal error, or turned into
    another value: raw 1234 read as base64, uint128 1.9 sent as 1) are invalid arguments,
    and such resource parameters invalid parameters, as are percent-escapes that are not
    UTF-8 (they read as U+FFFD: "%FF" was the stream named "\ufffd"); nothing reaches the
    wire encoder."""
    async with mcp_session(*mcp_target()) as mcp:
        await mcp.call("create_stream", name="mcp")
        await mcp.call("create_topic", stream_id="mcp", name="t")
        await mcp.call("create_stream", name="\ufffd")
        for tool, arguments, expected in BAD_ARGUMENTS:
            message, data = await mcp.call_error(tool, **arguments)
            assert data["kind"] == "invalid_arguments", (tool, arguments, message)
            assert expected in message, (tool, message)
        for uri, expected in BAD_RESOURCES:
            with pytest.raises(MCPError) as caught:
                await mcp.read(uri)
            assert caught.value.code == -32602 and expected in caught.value.error.message, uri
        polled = await mcp.call("poll_messages", **TOPIC, partition_id=0, strategy="first")
        assert polled["count"] == 0  # the refused sends sent nothing
