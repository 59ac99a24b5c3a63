"""Typed JSON request bodies of the HTTP API (wire §14.1), decoded with msgspec.

Unknown fields are ignored (as the Iggy server does); a missing required field or a wrong
type (``null`` included, where Iggy's serde type takes no null) is a
``msgspec.ValidationError`` naming the JSON path, which the app answers with 422
INVALID_FORMAT, as Iggy 0.8 (axum's ``Json`` answers 422 for a body that does not
deserialize into its type, 400 for one that is not JSON). An expiry (``IggyExpiry``) and a
topic size (``MaxTopicSize``) take a number (the size also a string), never ``null``.
CreateTopic and UpdateTopic require every setting but ``replication_factor``, CreateUser its
``status``, CreatePersonalAccessToken its ``expiry``, as Iggy 0.8 (``core/common/src/http/``:
no ``#[serde(default)]``; an ``Option`` may be left out); StoreConsumerOffset's
``consumer_id`` left out is consumer 1 (Iggy's ``default_id``). POST /snapshot requires
``compression`` and ``snapshot_types``, in serde's variant names ("Deflated", ["All"]).
A number outside its Rust type (``U8``/``U32``/``U64``), a compression name, a user status,
a consumer identifier ("", a name over 255 bytes) or a topic size string Iggy's
deserializer refuses is a ``ValidationError`` too (422, as there), raised in
``__post_init__``; a decoded ``TopicBody`` holds a known compression name and a
``max_topic_size`` in bytes.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from lurcher.core.wire import units
from lurcher.core.wire.buffer import U32_MAX
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.json_shapes import COMPRESSION_CODES, USER_STATUS_CODES
from lurcher.core.wire.requests.system.get_snapshot_file import COMPRESSIONS, SNAPSHOT_TYPES

U8 = Annotated[int, msgspec.Meta(ge=0, le=0xFF)]
U32 = Annotated[int, msgspec.Meta(ge=0, le=U32_MAX)]
U64 = Annotated[int, msgspec.Meta(ge=0)]  # msgspec bounds stop at i64: the top is checked_u64


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


def known_status(status: str | None) -> None:
    """Raises ValueError for a user status other than active or inactive."""
    if status is not None and status.lower() not in USER_STATUS_CODES:
        raise ValueError(f"status: unknown {status!r} (expected active or inactive)")


class CreateUserBody(Body, kw_only=True):
    username: str
    password: str
    status: str
    permissions: Any = None

    def __post_init__(self) -> None:
        known_status(self.status)


class UpdateUserBody(Body, kw_only=True):
    username: str | None = None
    status: str | None = None

    def __post_init__(self) -> None:
        known_status(self.status)


class PermissionsBody(Body, kw_only=True):
    permissions: Any = None


class PasswordBody(Body, kw_only=True):
    current_password: str
    new_password: str


class CreatePatBody(Body, kw_only=True):
    name: str
    expiry: U64

    def __post_init__(self) -> None:
        checked_u64(self.expiry, "expiry")


def checked_u64(value: int, name: str) -> int:
    """``value`` when it fits a u64 (it is >= 0 already). Raises ValueError naming ``name``."""
    if value > units.U64_MAX:
        raise ValueError(f"{name}: {value} is not a u64")
    return value


def topic_size_bytes(value: int | str) -> int:
    """A ``max_topic_size`` in bytes, from MaxTopicSize's forms: a u64, or a string
    ("unlimited", "0" or "server_default", a size such as "1 GB"). Raises ValueError."""
    if isinstance(value, str):
        if value.strip().lower() in units.SERVER_DEFAULT_WORDS:
            return 0
        try:
            value = units.parse_size(value)
        except ValueError as exc:
            raise ValueError(f"max_topic_size: {exc}") from None
    return checked_u64(value, "max_topic_size")


class TopicBody(Body, kw_only=True):
    """UpdateTopic's body. Every setting is required, as in Iggy 0.8's UpdateTopic: one
    left out would set the topic's setting to the server default (a rename could give a
    topic that never expired the server's expiry, and its messages would go)."""
    name: str
    compression_algorithm: str
    message_expiry: U64
    max_topic_size: U64 | str
    replication_factor: U8 | None = None

    def __post_init__(self) -> None:
        if self.compression_algorithm.lower() not in COMPRESSION_CODES:
            raise ValueError(f"compression_algorithm: unknown {self.compression_algorithm!r}")
        checked_u64(self.message_expiry, "message_expiry")
        self.max_topic_size = topic_size_bytes(self.max_topic_size)


class CreateTopicBody(TopicBody, kw_only=True):
    """CreateTopic's body: UpdateTopic's settings, all required as there, and the count."""
    partitions_count: U32


class PartitionsBody(Body, kw_only=True):
    partitions_count: U32


def consumer_identifier(value: int | str) -> None:
    """Raises ValueError unless ``value`` is a u32 id or a name (all digits: an id) of 1..255
    UTF-8 bytes, as Iggy's consumer identifier. Id 0, which Iggy refuses, is taken: it is
    the SDK's default consumer (``sdk.consumer``), and the binary transports take it."""
    parsed = Identifier.parse(value).value
    if isinstance(parsed, int):
        return
    if not 1 <= len(parsed.encode("utf-8", "surrogatepass")) <= 255:
        raise ValueError(f"consumer_id: {units.shown(value)} is not an identifier "
                         "(a name is 1..255 bytes)")


class StoreOffsetBody(Body, kw_only=True):
    consumer_id: U32 | str = 1
    partition_id: U32 | None = None
    offset: U64

    def __post_init__(self) -> None:
        consumer_identifier(self.consumer_id)
        checked_u64(self.offset, "offset")


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


def _variant(name: str) -> str:
    """serde's name of a Rust enum variant (no renaming) from its snake_case display name:
    "filesystem_overview" -> "FilesystemOverview"."""
    return "".join(word.capitalize() for word in name.split("_"))


# Iggy 0.8's serde names of ``SnapshotCompression`` and ``SystemSnapshotType`` -> their
# binary codes (wire §3.8), from the binary request's own tables
SNAPSHOT_COMPRESSIONS = {_variant(name): code for code, name in COMPRESSIONS.items()}
SNAPSHOT_TYPE_CODES = {_variant(name): code for code, name in SNAPSHOT_TYPES.items()}


class SnapshotBody(Body, kw_only=True):
    """POST /snapshot: both fields required, as Iggy 0.8's ``GetSnapshot`` (no defaults)."""
    compression: str
    snapshot_types: list[str]

    def __post_init__(self) -> None:
        if self.compression not in SNAPSHOT_COMPRESSIONS:
            raise ValueError(f"compression: unknown {self.compression!r} (expected one of "
                             f"{', '.join(SNAPSHOT_COMPRESSIONS)})")
        for kind in self.snapshot_types:
            if kind not in SNAPSHOT_TYPE_CODES:
                raise ValueError(f"snapshot_types: unknown {kind!r} (expected one of "
                                 f"{', '.join(SNAPSHOT_TYPE_CODES)})")
