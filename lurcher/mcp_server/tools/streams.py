"""Stream, topic, partition and segment tools."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from lurcher.mcp_server.gate import Access
from lurcher.mcp_server.render import plain
from lurcher.mcp_server.tools.base import (
    Args,
    Context,
    Expiry,
    Name,
    PartitionId,
    Size,
    StreamId,
    TopicId,
    expiry_us,
    ok,
    register,
    size_bytes,
)

Compression = Annotated[Literal["none", "gzip"], msgspec.Meta(
    description="Compression of stored messages.")]
ReplicationFactor = Annotated[Annotated[int, msgspec.Meta(ge=0, le=255)] | None, msgspec.Meta(
    description="Replication factor; leave out for the server default.")]
Count = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]


class StreamArgs(Args):
    stream_id: StreamId


class CreateStreamArgs(Args):
    name: Annotated[Name, msgspec.Meta(description="Name of the new stream (unique).")]


class UpdateStreamArgs(Args):
    stream_id: StreamId
    name: Annotated[Name, msgspec.Meta(description="The stream's new name (unique).")]


class TopicArgs(Args):
    stream_id: StreamId
    topic_id: TopicId


class CreateTopicArgs(Args):
    stream_id: StreamId
    name: Annotated[Name, msgspec.Meta(description="Name of the new topic (unique in the "
                                                   "stream).")]
    partitions_count: Annotated[int, msgspec.Meta(ge=0, le=1000, description=(
        "How many partitions to create (ids 0..n-1)."))] = 1
    compression_algorithm: Compression = "none"
    replication_factor: ReplicationFactor = None
    message_expiry: Expiry = None
    max_size: Size = None


class UpdateTopicArgs(Args):
    stream_id: StreamId
    topic_id: TopicId
    name: Annotated[Name, msgspec.Meta(description="The topic's name (give the current name "
                                                   "to keep it).")]
    compression_algorithm: Compression = "none"
    replication_factor: ReplicationFactor = None
    message_expiry: Expiry = None
    max_size: Size = None


class PartitionsArgs(Args):
    stream_id: StreamId
    topic_id: TopicId
    partitions_count: Annotated[Count, msgspec.Meta(description="How many partitions.")]


class DeleteSegmentsArgs(Args):
    stream_id: StreamId
    topic_id: TopicId
    partition_id: PartitionId
    segments_count: Annotated[Count, msgspec.Meta(description="How many of the oldest closed "
                                                              "segments to delete.")]


@register("get_streams", Access.READ,
          "List every stream: id, name, number of topics, messages and bytes stored.", Args)
async def get_streams(ctx: Context, a: Args) -> dict[str, Any]:
    streams = plain(await ctx.client.get_streams())
    return {"count": len(streams), "streams": streams}


@register("get_stream", Access.READ,
          "One stream with its topics (ids, names, partitions, messages, sizes, expiry).",
          StreamArgs)
async def get_stream(ctx: Context, a: StreamArgs) -> dict[str, Any]:
    found = await ctx.client.get_stream(a.stream_id)
    return plain(found) if found else {"found": False, "stream_id": a.stream_id}


@register("create_stream", Access.CREATE,
          "Create a stream (the top-level container of topics). Returns the new stream.",
          CreateStreamArgs)
async def create_stream(ctx: Context, a: CreateStreamArgs) -> dict[str, Any]:
    return plain(await ctx.client.create_stream(a.name))


@register("update_stream", Access.UPDATE, "Rename a stream.", UpdateStreamArgs)
async def update_stream(ctx: Context, a: UpdateStreamArgs) -> dict[str, Any]:
    await ctx.client.update_stream(a.stream_id, a.name)
    return ok("update_stream", stream_id=a.stream_id, name=a.name)


@register("delete_stream", Access.DELETE,
          "Delete a stream with all its topics and messages. Cannot be undone.", StreamArgs)
async def delete_stream(ctx: Context, a: StreamArgs) -> dict[str, Any]:
    await ctx.client.delete_stream(a.stream_id)
    return ok("delete_stream", stream_id=a.stream_id)


@register("purge_stream", Access.DELETE,
          "Delete every message of every topic in a stream, keeping the stream and topics.",
          StreamArgs)
async def purge_stream(ctx: Context, a: StreamArgs) -> dict[str, Any]:
    await ctx.client.purge_stream(a.stream_id)
    return ok("purge_stream", stream_id=a.stream_id)


@register("get_topics", Access.READ,
          "List the topics of a stream: id, name, partitions, messages, size, expiry.",
          StreamArgs)
async def get_topics(ctx: Context, a: StreamArgs) -> dict[str, Any]:
    topics = plain(await ctx.client.get_topics(a.stream_id))
    return {"stream_id": a.stream_id, "count": len(topics), "topics": topics}


@register("get_topic", Access.READ,
          "One topic with its partitions (id, current offset, messages, segments, size).",
          TopicArgs)
async def get_topic(ctx: Context, a: TopicArgs) -> dict[str, Any]:
    found = await ctx.client.get_topic(a.stream_id, a.topic_id)
    if found is None:
        return {"found": False, "stream_id": a.stream_id, "topic_id": a.topic_id}
    return plain(found)


@register("create_topic", Access.CREATE,
          "Create a topic in a stream with a number of partitions and optional compression, "
          "message expiry and maximum size. Returns the new topic.", CreateTopicArgs)
async def create_topic(ctx: Context, a: CreateTopicArgs) -> dict[str, Any]:
    return plain(await ctx.client.create_topic(
        a.stream_id, a.name, a.partitions_count, a.compression_algorithm,
        expiry_us(a.message_expiry), size_bytes(a.max_size), a.replication_factor or 0))


@register("update_topic", Access.UPDATE,
          "Change a topic's name, compression, message expiry, maximum size or replication "
          "factor.", UpdateTopicArgs)
async def update_topic(ctx: Context, a: UpdateTopicArgs) -> dict[str, Any]:
    await ctx.client.update_topic(
        a.stream_id, a.topic_id, a.name, a.compression_algorithm,
        expiry_us(a.message_expiry), size_bytes(a.max_size), a.replication_factor or 0)
    return ok("update_topic", stream_id=a.stream_id, topic_id=a.topic_id, name=a.name)


@register("delete_topic", Access.DELETE,
          "Delete a topic with all its partitions and messages. Cannot be undone.", TopicArgs)
async def delete_topic(ctx: Context, a: TopicArgs) -> dict[str, Any]:
    await ctx.client.delete_topic(a.stream_id, a.topic_id)
    return ok("delete_topic", stream_id=a.stream_id, topic_id=a.topic_id)


@register("purge_topic", Access.DELETE,
          "Delete every message of a topic, keeping the topic and its partitions.", TopicArgs)
async def purge_topic(ctx: Context, a: TopicArgs) -> dict[str, Any]:
    await ctx.client.purge_topic(a.stream_id, a.topic_id)
    return ok("purge_topic", stream_id=a.stream_id, topic_id=a.topic_id)


@register("create_partitions", Access.CREATE,
          "Add partitions to a topic (they get the next ids).", PartitionsArgs)
async def create_partitions(ctx: Context, a: PartitionsArgs) -> dict[str, Any]:
    await ctx.client.create_partitions(a.stream_id, a.topic_id, a.partitions_count)
    return ok("create_partitions", stream_id=a.stream_id, topic_id=a.topic_id,
              partitions_count=a.partitions_count)


@register("delete_partitions", Access.DELETE,
          "Delete the last partitions of a topic (highest ids) with their messages.",
          PartitionsArgs)
async def delete_partitions(ctx: Context, a: PartitionsArgs) -> dict[str, Any]:
    await ctx.client.delete_partitions(a.stream_id, a.topic_id, a.partitions_count)
    return ok("delete_partitions", stream_id=a.stream_id, topic_id=a.topic_id,
              partitions_count=a.partitions_count)


@register("delete_segments", Access.DELETE,
          "Delete the oldest closed segments (message files) of one partition.",
          DeleteSegmentsArgs)
async def delete_segments(ctx: Context, a: DeleteSegmentsArgs) -> dict[str, Any]:
    await ctx.client.delete_segments(a.stream_id, a.topic_id, a.partition_id, a.segments_count)
    return ok("delete_segments", stream_id=a.stream_id, topic_id=a.topic_id,
              partition_id=a.partition_id, segments_count=a.segments_count)
