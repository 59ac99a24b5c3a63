"""The persisted metadata events: one msgspec Struct per fact, a tagged union of all.

Events carry every value a replay needs (assigned ids, timestamps, hashes), so applying
them never consults the clock, a random source or the configuration.
"""

from __future__ import annotations

import msgspec


class Event(msgspec.Struct, tag=True, frozen=True):
    """Base of every metadata event."""


class StreamCreated(Event, frozen=True):
    id: int
    name: str
    created_at: int


class StreamUpdated(Event, frozen=True):
    id: int
    name: str


class StreamDeleted(Event, frozen=True):
    id: int


class TopicCreated(Event, frozen=True):
    stream_id: int
    id: int
    name: str
    created_at: int
    partitions_count: int
    compression: int
    message_expiry_us: int
    max_topic_size: int
    replication_factor: int


class TopicUpdated(Event, frozen=True):
    stream_id: int
    id: int
    name: str
    compression: int
    message_expiry_us: int
    max_topic_size: int
    replication_factor: int


class TopicDeleted(Event, frozen=True):
    stream_id: int
    id: int


class PartitionsCreated(Event, frozen=True):
    stream_id: int
    topic_id: int
    count: int
    created_at: int


class PartitionsDeleted(Event, frozen=True):
    stream_id: int
    topic_id: int
    count: int


class ConsumerGroupCreated(Event, frozen=True):
    stream_id: int
    topic_id: int
    id: int
    name: str


class ConsumerGroupDeleted(Event, frozen=True):
    stream_id: int
    topic_id: int
    id: int


class UserCreated(Event, frozen=True):
    id: int
    username: str
    password_hash: str
    status: int
    permissions: bytes | None
    created_at: int


class UserUpdated(Event, frozen=True):
    id: int
    username: str
    status: int


class UserPasswordChanged(Event, frozen=True):
    id: int
    password_hash: str


class UserPermissionsUpdated(Event, frozen=True):
    id: int
    permissions: bytes | None


class UserDeleted(Event, frozen=True):
    id: int


class TokenCreated(Event, frozen=True):
    user_id: int
    name: str
    token_hash: str
    expiry_at: int


class TokenDeleted(Event, frozen=True):
    user_id: int
    name: str


AnyEvent = (
    StreamCreated | StreamUpdated | StreamDeleted
    | TopicCreated | TopicUpdated | TopicDeleted
    | PartitionsCreated | PartitionsDeleted
    | ConsumerGroupCreated | ConsumerGroupDeleted
    | UserCreated | UserUpdated | UserPasswordChanged | UserPermissionsUpdated | UserDeleted
    | TokenCreated | TokenDeleted
)
