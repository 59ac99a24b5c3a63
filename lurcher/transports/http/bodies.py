"""Typed JSON request bodies of the HTTP API (wire §14.1), decoded with msgspec.

Unknown fields are ignored (as the Iggy server does); a missing required field or a wrong
type (``null`` included, where Iggy's serde type takes no null) is a
``msgspec.ValidationError`` naming the JSON path, which the app answers with 422
INVALID_FORMAT, as Iggy 0.8 (axum's ``Json`` answers 422 for a body that does not
deserialize into its type, 400 for one that is not JSON). An expiry (``IggyExpiry``) and a
topic size (``MaxTopicSize``) take a number (the size also a string), never ``null``.
Lurcher is kinder about absence only where nothing is lost: a CreateTopic setting left out
gets its default (UpdateTopic requires them, as Iggy).
"""

from __future__ import annotations

from typing import Any

import msgspec


class Body(msgspec.Struct, kw_only=True):
    pass


class LoginBody(Body, kw_only=True):
    username: str
    password: str
    version: str | None = None
    context: str | None = None


class TokenBody(Body, kw_only=True):
    token: str


class NameBody(Body, kw_only=True):
    name: str


class CreateUserBody(Body, kw_only=True):
    username: str
    password: str
    status: str = "active"
    permissions: Any = None


class UpdateUserBody(Body, kw_only=True):
    username: str | None = None
    status: str | None = None


class PermissionsBody(Body, kw_only=True):
    permissions: Any = None


class PasswordBody(Body, kw_only=True):
    current_password: str
    new_password: str


class CreatePatBody(Body, kw_only=True):
    name: str
    expiry: int = 0


class TopicBody(Body, kw_only=True):
    """UpdateTopic's body. Every setting is required, as in Iggy 0.8's UpdateTopic: one
    left out would set the topic's setting to the server default (a rename could give a
    topic that never expired the server's expiry, and its messages would go)."""
    name: str
    compression_algorithm: str
    message_expiry: int
    max_topic_size: int | str
    replication_factor: int | None = None


class CreateTopicBody(TopicBody, kw_only=True):
    """CreateTopic's body: a setting left out is the server default (Iggy 0.8 requires
    them all; a new topic has no setting to lose)."""
    partitions_count: int
    compression_algorithm: str = "none"
    message_expiry: int = 0
    max_topic_size: int | str = 0


class PartitionsBody(Body, kw_only=True):
    partitions_count: int


class StoreOffsetBody(Body, kw_only=True):
    consumer_id: int | str
    partition_id: int | None = None
    offset: int


class PartitioningBody(Body, kw_only=True):
    kind: str
    value: str = ""


class MessageBody(Body, kw_only=True):
    payload: str
    id: int | str | None = None
    user_headers: Any = None


class SendBody(Body, kw_only=True):
    partitioning: PartitioningBody
    messages: list[MessageBody]


class SnapshotBody(Body, kw_only=True):
    compression: Any = None
    snapshot_types: Any = None
