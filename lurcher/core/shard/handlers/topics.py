"""Topic commands: get, list, create, update, delete, purge.

Expiry and size defaults are resolved at creation: 0 means the server default
(``system.topic.message_expiry`` / ``system.topic.max_size``); a max size below the segment
size is refused (INVALID_TOPIC_SIZE); replication factor 0 is stored as 1.
"""

from __future__ import annotations

from typing import Any

from lurcher.auth.permissions import may_read
from lurcher.core.meta import events as ev
from lurcher.core.shard.handlers.partitions import check_partition_budget
from lurcher.core.shard.handlers.registry import handles
from lurcher.core.shard.partition_files import create_partition_files
from lurcher.auth.session import Session
from lurcher.core.shard.face import ShardFace
from lurcher.core.wire.units import U64_MAX
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.core.wire.requests.topics.delete_topic import DeleteTopic
from lurcher.core.wire.requests.topics.get_topic import GetTopic
from lurcher.core.wire.requests.topics.get_topics import GetTopics
from lurcher.core.wire.requests.topics.purge_topic import PurgeTopic
from lurcher.core.wire.requests.topics.update_topic import UpdateTopic
from lurcher.core.shard.tombstones import record_deletion
from lurcher.core.shard.views import topic_details, topic_header
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


def find_or_none(state, stream_ident, topic_ident):
    try:
        return state.topic(stream_ident, topic_ident)
    except IggyError as exc:
        if exc.code in (ErrorCode.STREAM_ID_NOT_FOUND, ErrorCode.STREAM_NAME_NOT_FOUND,
                        ErrorCode.TOPIC_ID_NOT_FOUND, ErrorCode.TOPIC_NAME_NOT_FOUND):
            return None
        raise


def resolve_limits(shard: ShardFace, expiry_us: int, max_size_bytes: int) -> tuple[int, int]:
    """Apply server defaults for 0 and check the size against the segment size."""
    defaults = shard.config.typed.system.topic
    if expiry_us == 0:
        expiry_us = defaults.message_expiry
    if max_size_bytes == 0:
        max_size_bytes = defaults.max_size
    segment = shard.log_config.segment_size_bytes
    if max_size_bytes != U64_MAX and max_size_bytes < segment:
        raise IggyError(ErrorCode.INVALID_TOPIC_SIZE,
                        f"max topic size {max_size_bytes} below segment size {segment}")
    return expiry_us, max_size_bytes


@handles("get_topic")
def get_topic(shard: ShardFace, session: Session, req: GetTopic) -> Any:
    topic = find_or_none(shard.meta.state, req.stream_id, req.topic_id)
    return None if topic is None else topic_details(shard, topic)


@handles("get_topics")
def get_topics(shard: ShardFace, session: Session, req: GetTopics) -> Any:
    state = shard.meta.state
    stream = state.stream(req.stream_id)
    return [topic_header(shard, stream.topics[tid]) for tid in sorted(stream.topics)
            if may_read(state, session, "read_topic", stream.id, tid)]


def replication_factor(shard: ShardFace, asked: int) -> int:
    """The factor stored for a new topic: as asked (0: 1 on a single node, the cluster's
    ``replication_factor`` capped at its node count on a cluster node). Raises IggyError
    INVALID_REPLICATION_FACTOR when a cluster node is asked for more replicas than nodes."""
    cluster = shard.cluster_config
    if cluster is None:
        return asked or 1
    nodes = len(cluster.names)
    if asked > nodes:
        raise IggyError(ErrorCode.INVALID_REPLICATION_FACTOR,
                        f"replication factor {asked} exceeds the cluster's {nodes} nodes")
    return asked or min(cluster.replication_factor, nodes)


@handles("create_topic")
def create_topic(shard: ShardFace, session: Session, req: CreateTopic) -> Any:
    state = shard.meta.state
    stream = state.stream(req.stream_id)
    if req.name in stream.topic_names:
        raise IggyError(ErrorCode.TOPIC_NAME_ALREADY_EXISTS, req.name)
    expiry, max_size = resolve_limits(shard, req.message_expiry_us, req.max_topic_size_bytes)
    check_partition_budget(shard, req.partitions_count)
    tid = stream.topic_ids.peek()
    create_partition_files(shard, stream.id, tid, range(req.partitions_count))
    shard.meta.record(ev.TopicCreated(stream.id, tid, req.name, shard.clock(),
                                      req.partitions_count, req.compression, expiry, max_size,
                                      replication_factor(shard, req.replication_factor)))
    return topic_details(shard, stream.topics[tid])


@handles("update_topic")
def update_topic(shard: ShardFace, session: Session, req: UpdateTopic) -> Any:
    state = shard.meta.state
    stream = state.stream(req.stream_id)
    topic = state.topic(req.stream_id, req.topic_id)
    if req.name != topic.name and req.name in stream.topic_names:
        raise IggyError(ErrorCode.TOPIC_NAME_ALREADY_EXISTS, req.name)
    expiry, max_size = resolve_limits(shard, req.message_expiry_us, req.max_topic_size_bytes)
    # a partition's replica set follows from its factor: it stays as created
    factor = topic.replication_factor if shard.cluster_config is not None \
        else req.replication_factor or 1
    shard.meta.record(ev.TopicUpdated(stream.id, topic.id, req.name, req.compression, expiry,
                                      max_size, factor))
    return None


@handles("delete_topic")
def delete_topic(shard: ShardFace, session: Session, req: DeleteTopic) -> Any:
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    record_deletion(shard, ev.TopicDeleted(topic.stream_id, topic.id))
    return None


def purge_on_cluster(shard: ShardFace, session: Session, req: Any) -> Any:
    """On a cluster node a purge goes through the partitions' replication groups: shard 0
    runs them (``cluster.partitions`` replaces the purge handlers there), another shard of
    the node forwards the purge to it. None when this node is not a cluster node."""
    if not shard.config.typed.cluster.enabled:
        return None
    return shard.cluster.forward(0, session, req.CODE, req.encode())


@handles("purge_topic")
def purge_topic(shard: ShardFace, session: Session, req: PurgeTopic) -> Any:
    forwarded = purge_on_cluster(shard, session, req)
    if forwarded is not None:
        return forwarded
    topic = shard.meta.state.topic(req.stream_id, req.topic_id)
    return shard.purge_local(topic.stream_id, topic.id)
