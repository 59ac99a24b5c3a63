"""Hard limits: a poll of a partition holding a million messages returns at most the
configured number of messages and bytes, and says where to continue."""

from __future__ import annotations

import json

from lurcher.sdk import Client, build_batch
from tests.mcp.conftest import mcp_session

BATCHES = 1000
BATCH_MESSAGES = 1000


async def fill(client: Client) -> None:
    await client.create_stream("big")
    await client.create_topic("big", "flood", partitions_count=1)
    batch = build_batch([b'{"n":%d}' % i for i in range(BATCH_MESSAGES)])
    for _ in range(BATCHES):
        await client.send_messages("big", "flood", batch, 0)


async def test_poll_is_capped_in_count_and_bytes(mcp_target, sdk_client: Client) -> None:
    await fill(sdk_client)
    topic = await sdk_client.get_topic("big", "flood")
    assert topic.partitions[0].messages_count == BATCHES * BATCH_MESSAGES

    target = mcp_target(limits_max_messages="50", limits_max_response_bytes="4096",
                        limits_max_payload_bytes="1024")
    async with mcp_session(*target) as mcp:
        by_count = await mcp.session.call_tool("poll_messages", {
            "stream_id": "big", "topic_id": "flood", "partition_id": 0, "count": 1_000_000})
        text = by_count.content[0].text
        result = json.loads(text)
        assert len(text.encode()) <= 4096
        assert 0 < result["count"] == len(result["messages"]) <= 50
        assert result["truncated"] and result["count_capped_to"] == 50
        assert result["next_offset"] == result["messages"][-1]["offset"] + 1

        latest = await mcp.session.read_resource(
            "lurcher://streams/big/topics/flood/partitions/0/messages?count=1000000")
        text = latest.contents[0].text
        assert len(text.encode()) <= 4096
        offsets = [m["offset"] for m in json.loads(text)["messages"]]
        assert 0 < len(offsets) <= 50 and offsets[0] >= BATCHES * BATCH_MESSAGES - 50

    small = mcp_target(limits_max_messages="3")
    async with mcp_session(*small) as mcp:
        result = await mcp.call("poll_messages", stream_id="big", topic_id="flood",
                                partition_id=0, offset=10, count=100)
        assert [m["offset"] for m in result["messages"]] == [10, 11, 12]
        assert result["next_offset"] == 13


async def test_next_poll_cut_by_bytes_commits_only_what_it_shows(mcp_target,
                                                                 sdk_client: Client) -> None:
    """Auto-commit of a "next" poll stores the last offset shown, so messages the byte
    limit left out come with the following "next" poll instead of being skipped."""
    await sdk_client.create_stream("cut")
    await sdk_client.create_topic("cut", "t", partitions_count=1)
    await sdk_client.send_messages("cut", "t", build_batch([b"%04d" % i + b"x" * 300
                                                            for i in range(10)]), 0)
    target = mcp_target(limits_max_response_bytes="2048", limits_max_payload_bytes="1024")
    seen: list[int] = []
    async with mcp_session(*target) as mcp:
        for _ in range(10):
            result = await mcp.call("poll_messages", stream_id="cut", topic_id="t",
                                    partition_id=0, strategy="next", count=10)
            assert result["count"] < 10  # the byte limit cuts every poll
            seen += [m["offset"] for m in result["messages"]]
            if not result["truncated"]:
                break
    assert seen == list(range(10))


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


async def test_deeply_nested_json_payloads_are_shown_as_text(mcp_target,
                                                             sdk_client: Client) -> None:
    """A JSON payload nested deeper than render.MAX_JSON_DEPTH is shown as its text: one
    nested 300 deep failed every poll and resource read meeting it (the MCP SDK refused to
    serialize the answer), 1000 deep was an internal error (msgspec's RecursionError)."""
    await sdk_client.create_stream("deep")
    await sdk_client.create_topic("deep", "t", partitions_count=1)
    depths = [64, 65, 300, 1000, 5000]
    await sdk_client.send_messages("deep", "t", build_batch([nested(d) for d in depths]), 0)
    async with mcp_session(*mcp_target()) as mcp:
        polled = await mcp.call("poll_messages", stream_id="deep", topic_id="t",
                                partition_id=0, strategy="first", count=10)
        shown = [(m["payload_encoding"], m["payload"]) for m in polled["messages"]]
        assert shown[0][0] == "json"
        assert shown[1:] == [("text", nested(d).decode()) for d in depths[1:]]
        latest = await mcp.read("lurcher://streams/deep/topics/t/partitions/0/messages?count=5")
        assert [m["payload_encoding"] for m in latest["messages"]] == ["json"] + ["text"] * 4


async def test_an_answer_without_a_list_to_cut_fits_the_byte_limit(mcp_target) -> None:
    """An answer whose size is not in a list (a user's permissions for many streams) is a
    text preview within max_response_bytes: the preview was cut at max_response_bytes - 80
    characters, so its escaped quotes (and UTF-8 beyond ASCII) went past the limit."""
    permissions = {"streams": {str(i): {"read_stream": True, "topics": {
        "1": {"poll_messages": True}}} for i in range(200)}}
    target = mcp_target(limits_max_response_bytes="4096", limits_max_payload_bytes="1024")
    async with mcp_session(*target) as mcp:
        await mcp.call("create_user", username="wide-reader", password="secret-pw",
                       permissions=permissions)
        answer = await mcp.session.call_tool("get_user", {"user_id": "wide-reader"})
        text = answer.content[0].text
        assert len(text.encode()) <= 4096, len(text.encode())
        shown = json.loads(text)
        assert shown["truncated"] and shown["total_bytes"] > 4096
        assert shown["preview"].startswith('{"id":')


async def test_a_message_with_headers_above_the_byte_limit_is_shown(mcp_target,
                                                                   sdk_client: Client) -> None:
    """A message whose headers alone pass max_response_bytes (Iggy allows 100,000 bytes of
    them) is shown with the first headers that fit, and "next" polls go past it: it was
    never shown (count 0, next_offset its own offset), so every poll from it stopped there
    and auto-commit never moved."""
    await sdk_client.create_stream("hdr")
    await sdk_client.create_topic("hdr", "t", partitions_count=1)
    headers = {f"k{i:04d}": "v" * 200 for i in range(400)}  # about 85 KB
    await sdk_client.send_messages("hdr", "t", [b"first"], 0, headers=[headers])
    await sdk_client.send_messages("hdr", "t", [b"second"], 0)
    async with mcp_session(*mcp_target()) as mcp:
        shown = []
        for _ in range(2):
            polled = await mcp.call("poll_messages", stream_id="hdr", topic_id="t",
                                    partition_id=0, strategy="next", count=5)
            shown += polled["messages"]
    assert [m["payload"] for m in shown] == ["first", "second"]
    first = shown[0]
    assert first["headers_truncated"] and first["headers_count"] == 400
    assert 0 < len(first["headers"]) < 400
    assert all(first["headers"][k] == {"kind": "string", "value": "v" * 200}
               for k in first["headers"])
