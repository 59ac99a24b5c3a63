"""Response values built from metadata plus the live partition counters.

Sizes and message counts of topics and streams are sums over their partitions; nothing
is cached, so a view is always current. Stored names and settings are made encodable
(``validation.wire_name``/``clamp_uint``): a value stored out of range by an older version
shows cut or as the server default, and never makes a list fail.
"""

from __future__ import annotations

from typing import Any

from lurcher.core.meta.state import StreamMeta, TopicMeta
from lurcher.core.wire.responses.streams import StreamDetails, StreamHeader
from lurcher.core.wire.responses.topics import PartitionInfo, TopicDetails, TopicHeader
from lurcher.core.wire.validation import U64_MAX, clamp_uint, wire_name


def partition_info(partition: Any) -> PartitionInfo:
    return PartitionInfo(partition.partition_id, partition.created_at, partition.segments_count,
                         partition.current_offset, partition.size_bytes, partition.messages_count)


def topic_header(shard: Any, topic: TopicMeta) -> TopicHeader:
    parts = shard.partition_views(topic)
    return TopicHeader(topic.id, topic.created_at, topic.partitions_count,
                       clamp_uint(topic.message_expiry_us, 64, U64_MAX),
                       clamp_uint(topic.compression, 8, 1),
                       clamp_uint(topic.max_topic_size, 64, U64_MAX),
                       clamp_uint(topic.replication_factor, 8, 1),
                       sum(p.size_bytes for p in parts),
                       sum(p.messages_count for p in parts), wire_name(topic.name))


def topic_details(shard: Any, topic: TopicMeta) -> TopicDetails:
    return TopicDetails(topic_header(shard, topic),
                        [partition_info(p) for p in shard.partition_views(topic)])


def stream_header(shard: Any, stream: StreamMeta) -> StreamHeader:
    topics = [topic_header(shard, t) for t in stream.topics.values()]
    return StreamHeader(stream.id, stream.created_at, len(topics),
                        sum(t.size_bytes for t in topics), sum(t.messages_count for t in topics),
                        wire_name(stream.name))


def stream_details(shard: Any, stream: StreamMeta) -> StreamDetails:
    topics = [topic_header(shard, stream.topics[tid]) for tid in sorted(stream.topics)]
    return StreamDetails(stream_header(shard, stream), topics)
