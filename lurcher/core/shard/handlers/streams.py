"""Stream commands: get, list, create, update, delete, purge."""

from __future__ import annotations

from typing import Any

from lurcher.auth.permissions import may_read
from lurcher.core.meta import events as ev
from lurcher.core.shard.handlers.registry import handles
from lurcher.core.shard.handlers.topics import purge_on_cluster
from lurcher.auth.session import Session
from lurcher.core.shard.face import ShardFace
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.streams.delete_stream import DeleteStream
from lurcher.core.wire.requests.streams.get_stream import GetStream
from lurcher.core.wire.requests.streams.get_streams import GetStreams
from lurcher.core.wire.requests.streams.purge_stream import PurgeStream
from lurcher.core.wire.requests.streams.update_stream import UpdateStream
from lurcher.core.shard.tombstones import record_deletion
from lurcher.core.shard.views import stream_details, stream_header
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


def find_or_none(state, ident):
    """The stream, or None when it does not exist (GETs answer empty, not an error)."""
    try:
        return state.stream(ident)
    except IggyError:
        return None


@handles("get_stream")
def get_stream(shard: ShardFace, session: Session, req: GetStream) -> Any:
    stream = find_or_none(shard.meta.state, req.stream_id)
    return None if stream is None else stream_details(shard, stream)


@handles("get_streams")
def get_streams(shard: ShardFace, session: Session, req: GetStreams) -> Any:
    state = shard.meta.state
    return [stream_header(shard, state.streams[sid]) for sid in sorted(state.streams)
            if may_read(state, session, "read_stream", sid)]


@handles("create_stream")
def create_stream(shard: ShardFace, session: Session, req: CreateStream) -> Any:
    state = shard.meta.state
    if req.name in state.stream_names:
        raise IggyError(ErrorCode.STREAM_NAME_ALREADY_EXISTS, req.name)
    sid = state.stream_ids.peek()
    shard.meta.record(ev.StreamCreated(sid, req.name, shard.clock()))
    return stream_details(shard, state.streams[sid])


@handles("update_stream")
def update_stream(shard: ShardFace, session: Session, req: UpdateStream) -> Any:
    state = shard.meta.state
    stream = state.stream(req.stream_id)
    if req.name == stream.name:
        return None
    if req.name in state.stream_names:
        raise IggyError(ErrorCode.STREAM_NAME_ALREADY_EXISTS, req.name)
    shard.meta.record(ev.StreamUpdated(stream.id, req.name))
    return None


@handles("delete_stream")
def delete_stream(shard: ShardFace, session: Session, req: DeleteStream) -> Any:
    stream = shard.meta.state.stream(req.stream_id)
    record_deletion(shard, ev.StreamDeleted(stream.id))
    return None


@handles("purge_stream")
def purge_stream(shard: ShardFace, session: Session, req: PurgeStream) -> Any:
    forwarded = purge_on_cluster(shard, session, req)
    if forwarded is not None:
        return forwarded
    stream = shard.meta.state.stream(req.stream_id)
    return shard.purge_local(stream.id, None)
