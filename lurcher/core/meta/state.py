"""The metadata state machine: applies events to in-memory models, no I/O.

Invariants: ids are allocated through ``IdSlab`` (0-based, most recently freed first);
names are unique per level (streams globally, topics per stream, groups per topic,
usernames globally, token names per user); partitions of a topic are ``0..count-1``.
Lookups by ``Identifier`` raise ``IggyError`` with the Iggy not-found codes.
A user's grants on a stream or topic are removed with it (``_drop_grants``): permissions
name streams and topics by id, and a deleted one's id is given to the next one created, which
must not inherit the grants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from lurcher.core.meta import events as ev
from lurcher.core.meta.slab import IdSlab
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.values.permissions import Permissions


@dataclass
class GroupMeta:
    id: int
    name: str


@dataclass
class TopicMeta:
    stream_id: int
    id: int
    name: str
    created_at: int
    compression: int
    message_expiry_us: int
    max_topic_size: int
    replication_factor: int
    partition_created_at: list[int] = field(default_factory=list)
    groups: dict[int, GroupMeta] = field(default_factory=dict)
    group_names: dict[str, int] = field(default_factory=dict)
    group_ids: IdSlab = field(default_factory=IdSlab)

    @property
    def partitions_count(self) -> int:
        return len(self.partition_created_at)


@dataclass
class StreamMeta:
    id: int
    name: str
    created_at: int
    topics: dict[int, TopicMeta] = field(default_factory=dict)
    topic_names: dict[str, int] = field(default_factory=dict)
    topic_ids: IdSlab = field(default_factory=IdSlab)


@dataclass
class TokenMeta:
    user_id: int
    name: str
    token_hash: str
    expiry_at: int  # µs since epoch; 0 = never


@dataclass
class UserMeta:
    id: int
    username: str
    password_hash: str
    status: int  # 1 active, 2 inactive
    permissions: bytes | None
    created_at: int
    tokens: dict[str, TokenMeta] = field(default_factory=dict)


def _lookup(ident: Identifier, by_id: dict, by_name: dict[str, int],
            id_missing: ErrorCode, name_missing: ErrorCode, what: str):
    if ident.is_numeric:
        found = by_id.get(ident.value)
        if found is None:
            raise IggyError(id_missing, f"{what} {ident.value} not found")
        return found
    key = by_name.get(ident.value)
    if key is None:
        raise IggyError(name_missing, f"{what} {ident.value!r} not found")
    return by_id[key]


class MetaState:
    """Streams, topics, groups, users and tokens as of the last applied event."""

    def __init__(self) -> None:
        self.streams: dict[int, StreamMeta] = {}
        self.stream_names: dict[str, int] = {}
        self.stream_ids = IdSlab()
        self.users: dict[int, UserMeta] = {}
        self.usernames: dict[str, int] = {}
        self.user_ids = IdSlab()
        self.token_hashes: dict[str, TokenMeta] = {}
        self.observers: list[Any] = []

    # ---- lookups -------------------------------------------------------------------
    def stream(self, ident: Identifier) -> StreamMeta:
        return _lookup(ident, self.streams, self.stream_names, ErrorCode.STREAM_ID_NOT_FOUND,
                       ErrorCode.STREAM_NAME_NOT_FOUND, "stream")

    def topic(self, stream: Identifier, topic: Identifier) -> TopicMeta:
        s = self.stream(stream)
        return _lookup(topic, s.topics, s.topic_names, ErrorCode.TOPIC_ID_NOT_FOUND,
                       ErrorCode.TOPIC_NAME_NOT_FOUND, "topic")

    def group(self, topic: TopicMeta, ident: Identifier) -> GroupMeta:
        return _lookup(ident, topic.groups, topic.group_names,
                       ErrorCode.CONSUMER_GROUP_ID_NOT_FOUND,
                       ErrorCode.CONSUMER_GROUP_ID_NOT_FOUND, "consumer group")

    def user(self, ident: Identifier) -> UserMeta:
        return _lookup(ident, self.users, self.usernames, ErrorCode.RESOURCE_NOT_FOUND,
                       ErrorCode.RESOURCE_NOT_FOUND, "user")

    def topics(self):
        for s in self.streams.values():
            yield from s.topics.values()

    # ---- apply ---------------------------------------------------------------------
    def apply(self, event: ev.Event) -> None:
        """Apply one event. Events are trusted (validated before they were recorded).

        Observers (``before(event, state)`` / ``after(event, state)``) see every event,
        e.g. the shard opening or dropping the partitions it owns.
        """
        for observer in self.observers:
            observer.before(event, self)
        _APPLY[type(event)](self, event)
        for observer in self.observers:
            observer.after(event, self)


def _stream_created(st: MetaState, e: ev.StreamCreated) -> None:
    st.stream_ids.take(e.id)
    st.streams[e.id] = StreamMeta(e.id, e.name, e.created_at)
    st.stream_names[e.name] = e.id


def _stream_updated(st: MetaState, e: ev.StreamUpdated) -> None:
    s = st.streams[e.id]
    del st.stream_names[s.name]
    s.name = e.name
    st.stream_names[e.name] = e.id


def _stream_deleted(st: MetaState, e: ev.StreamDeleted) -> None:
    s = st.streams.pop(e.id)
    del st.stream_names[s.name]
    st.stream_ids.free(e.id)
    _drop_grants(st, e.id)


def _drop_grants(st: MetaState, stream_id: int, topic_id: int | None = None) -> None:
    """Remove every user's grants on stream ``stream_id`` (on its topic ``topic_id`` only,
    when given)."""
    for user in st.users.values():
        if not user.permissions:
            continue
        perms = Permissions.decode(user.permissions)[0]
        stream = perms.streams.get(stream_id)
        if stream is None or (topic_id is not None and topic_id not in stream.topics):
            continue
        streams = dict(perms.streams)
        if topic_id is None:
            del streams[stream_id]
        else:
            topics = {t: p for t, p in stream.topics.items() if t != topic_id}
            streams[stream_id] = msgspec.structs.replace(stream, topics=topics)
        user.permissions = msgspec.structs.replace(perms, streams=streams).encode()


def _topic_created(st: MetaState, e: ev.TopicCreated) -> None:
    s = st.streams[e.stream_id]
    s.topic_ids.take(e.id)
    s.topics[e.id] = TopicMeta(e.stream_id, e.id, e.name, e.created_at, e.compression,
                               e.message_expiry_us, e.max_topic_size, e.replication_factor,
                               [e.created_at] * e.partitions_count)
    s.topic_names[e.name] = e.id


def _topic_updated(st: MetaState, e: ev.TopicUpdated) -> None:
    s = st.streams[e.stream_id]
    t = s.topics[e.id]
    del s.topic_names[t.name]
    t.name, t.compression = e.name, e.compression
    t.message_expiry_us, t.max_topic_size = e.message_expiry_us, e.max_topic_size
    t.replication_factor = e.replication_factor
    s.topic_names[e.name] = e.id


def _topic_deleted(st: MetaState, e: ev.TopicDeleted) -> None:
    s = st.streams[e.stream_id]
    t = s.topics.pop(e.id)
    del s.topic_names[t.name]
    s.topic_ids.free(e.id)
    _drop_grants(st, e.stream_id, e.id)


def _partitions_created(st: MetaState, e: ev.PartitionsCreated) -> None:
    st.streams[e.stream_id].topics[e.topic_id].partition_created_at.extend([e.created_at] * e.count)


def _partitions_deleted(st: MetaState, e: ev.PartitionsDeleted) -> None:
    t = st.streams[e.stream_id].topics[e.topic_id]
    del t.partition_created_at[len(t.partition_created_at) - e.count:]


def _group_created(st: MetaState, e: ev.ConsumerGroupCreated) -> None:
    t = st.streams[e.stream_id].topics[e.topic_id]
    t.group_ids.take(e.id)
    t.groups[e.id] = GroupMeta(e.id, e.name)
    t.group_names[e.name] = e.id


def _group_deleted(st: MetaState, e: ev.ConsumerGroupDeleted) -> None:
    t = st.streams[e.stream_id].topics[e.topic_id]
    g = t.groups.pop(e.id)
    del t.group_names[g.name]
    t.group_ids.free(e.id)


def _user_created(st: MetaState, e: ev.UserCreated) -> None:
    st.user_ids.take(e.id)
    st.users[e.id] = UserMeta(e.id, e.username, e.password_hash, e.status, e.permissions,
                              e.created_at)
    st.usernames[e.username] = e.id


def _user_updated(st: MetaState, e: ev.UserUpdated) -> None:
    u = st.users[e.id]
    del st.usernames[u.username]
    u.username, u.status = e.username, e.status
    st.usernames[e.username] = e.id


def _password_changed(st: MetaState, e: ev.UserPasswordChanged) -> None:
    st.users[e.id].password_hash = e.password_hash


def _permissions_updated(st: MetaState, e: ev.UserPermissionsUpdated) -> None:
    st.users[e.id].permissions = e.permissions


def _user_deleted(st: MetaState, e: ev.UserDeleted) -> None:
    u = st.users.pop(e.id)
    del st.usernames[u.username]
    for token in u.tokens.values():
        st.token_hashes.pop(token.token_hash, None)
    st.user_ids.free(e.id)


def _token_created(st: MetaState, e: ev.TokenCreated) -> None:
    token = TokenMeta(e.user_id, e.name, e.token_hash, e.expiry_at)
    st.users[e.user_id].tokens[e.name] = token
    st.token_hashes[e.token_hash] = token


def _token_deleted(st: MetaState, e: ev.TokenDeleted) -> None:
    token = st.users[e.user_id].tokens.pop(e.name)
    st.token_hashes.pop(token.token_hash, None)


_APPLY = {
    ev.StreamCreated: _stream_created, ev.StreamUpdated: _stream_updated,
    ev.StreamDeleted: _stream_deleted, ev.TopicCreated: _topic_created,
    ev.TopicUpdated: _topic_updated, ev.TopicDeleted: _topic_deleted,
    ev.PartitionsCreated: _partitions_created, ev.PartitionsDeleted: _partitions_deleted,
    ev.ConsumerGroupCreated: _group_created, ev.ConsumerGroupDeleted: _group_deleted,
    ev.UserCreated: _user_created, ev.UserUpdated: _user_updated,
    ev.UserPasswordChanged: _password_changed, ev.UserPermissionsUpdated: _permissions_updated,
    ev.UserDeleted: _user_deleted, ev.TokenCreated: _token_created, ev.TokenDeleted: _token_deleted,
}
