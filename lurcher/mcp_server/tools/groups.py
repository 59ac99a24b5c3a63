"""Consumer-group and consumer-offset tools.

Offsets belong to a consumer: by default this MCP server's configured consumer (the one
``poll_messages`` uses); ``consumer`` names another, ``group: true`` makes it a consumer group.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from lurcher.mcp_server.gate import Access
from lurcher.mcp_server.render import plain
from lurcher.mcp_server.tools.base import (
    U64,
    Args,
    ConsumerName,
    Context,
    GroupId,
    Name,
    OptionalPartition,
    StreamId,
    TopicId,
    consumer_of,
    ok,
    register,
)

IsGroup = Annotated[bool, msgspec.Meta(description="consumer is a consumer group.")]


class TopicArgs(Args):
    stream_id: StreamId
    topic_id: TopicId


class GroupArgs(Args):
    stream_id: StreamId
    topic_id: TopicId
    group_id: GroupId


class CreateGroupArgs(Args):
    stream_id: StreamId
    topic_id: TopicId
    name: Annotated[Name, msgspec.Meta(description="Name of the new consumer group (unique in "
                                                   "the topic).")]


class OffsetArgs(Args):
    stream_id: StreamId
    topic_id: TopicId
    partition_id: OptionalPartition = None
    consumer: ConsumerName = None
    group: IsGroup = False


class StoreOffsetArgs(Args):
    stream_id: StreamId
    topic_id: TopicId
    offset: Annotated[U64, msgspec.Meta(description="The offset to store (the last message "
                                                    "processed).")]
    partition_id: OptionalPartition = None
    consumer: ConsumerName = None
    group: IsGroup = False


@register("get_consumer_groups", Access.READ,
          "List the consumer groups of a topic (id, name, partitions, members).", TopicArgs)
async def get_consumer_groups(ctx: Context, a: TopicArgs) -> dict[str, Any]:
    groups = plain(await ctx.client.get_consumer_groups(a.stream_id, a.topic_id))
    return {"stream_id": a.stream_id, "topic_id": a.topic_id, "count": len(groups),
            "consumer_groups": groups}


@register("get_consumer_group", Access.READ,
          "One consumer group with its members and the partitions each member owns.",
          GroupArgs)
async def get_consumer_group(ctx: Context, a: GroupArgs) -> dict[str, Any]:
    found = await ctx.client.get_consumer_group(a.stream_id, a.topic_id, a.group_id)
    return plain(found) if found else {"found": False, "group_id": a.group_id}


@register("create_consumer_group", Access.CREATE,
          "Create a consumer group on a topic (members share its partitions).",
          CreateGroupArgs)
async def create_consumer_group(ctx: Context, a: CreateGroupArgs) -> dict[str, Any]:
    return plain(await ctx.client.create_consumer_group(a.stream_id, a.topic_id, a.name))


@register("delete_consumer_group", Access.DELETE,
          "Delete a consumer group and its stored offsets.", GroupArgs)
async def delete_consumer_group(ctx: Context, a: GroupArgs) -> dict[str, Any]:
    await ctx.client.delete_consumer_group(a.stream_id, a.topic_id, a.group_id)
    return ok("delete_consumer_group", stream_id=a.stream_id, topic_id=a.topic_id,
              group_id=a.group_id)


@register("get_consumer_offset", Access.READ,
          "The offset stored for a consumer on a partition, with the partition's current "
          "(latest) offset; stored_offset is null when nothing is stored.", OffsetArgs)
async def get_consumer_offset(ctx: Context, a: OffsetArgs) -> dict[str, Any]:
    consumer = consumer_of(ctx, a.consumer, a.group)
    info = await ctx.client.get_consumer_offset(consumer, a.stream_id, a.topic_id,
                                                a.partition_id)
    head = {"consumer": str(consumer.id), "group": a.group}
    if info is None:
        return head | {"partition_id": a.partition_id, "stored_offset": None}
    return head | plain(info)


@register("store_consumer_offset", Access.UPDATE,
          "Store a consumer's offset on a partition (where strategy \"next\" continues).",
          StoreOffsetArgs)
async def store_consumer_offset(ctx: Context, a: StoreOffsetArgs) -> dict[str, Any]:
    consumer = consumer_of(ctx, a.consumer, a.group)
    await ctx.client.store_consumer_offset(consumer, a.stream_id, a.topic_id, a.offset,
                                           a.partition_id)
    return ok("store_consumer_offset", consumer=str(consumer.id), stream_id=a.stream_id,
              topic_id=a.topic_id, partition_id=a.partition_id, offset=a.offset)


@register("delete_consumer_offset", Access.DELETE,
          "Forget a consumer's stored offset on a partition.", OffsetArgs)
async def delete_consumer_offset(ctx: Context, a: OffsetArgs) -> dict[str, Any]:
    consumer = consumer_of(ctx, a.consumer, a.group)
    await ctx.client.delete_consumer_offset(consumer, a.stream_id, a.topic_id, a.partition_id)
    return ok("delete_consumer_offset", consumer=str(consumer.id), stream_id=a.stream_id,
              topic_id=a.topic_id, partition_id=a.partition_id)
