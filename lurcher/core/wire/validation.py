"""Field rules of every request, one place for all front ends (Iggy 0.8 limits and codes).

Each request's ``validate()`` calls these checks, and the dispatcher runs ``validate()`` for
every front end (binary TCP/TLS/WebSocket/QUIC decode and the HTTP JSON routes alike), before
any handler runs and so before anything is stored. HTTP builds the same typed requests from
JSON, where numbers are unbounded and names unlimited; ``check_encodable`` also proves such a
request has a binary form (every integer in its wire range) before it runs.

Rules (0.8): stream, topic and consumer-group names 1..255 UTF-8 bytes (INVALID_STREAM_NAME,
INVALID_TOPIC_NAME, INVALID_CONSUMER_GROUP_NAME); usernames 3..50 (INVALID_USERNAME),
passwords 3..100 (INVALID_PASSWORD), personal-access-token names 3..30
(INVALID_PERSONAL_ACCESS_TOKEN_NAME); compression 1 (none) or 2 (gzip) (INVALID_COMMAND);
message expiry and max topic size are u64 (0 = server default, u64::MAX = never / unlimited);
replication factor u8 (0 = not given, stored as 1); integers out of their wire range are
INVALID_FORMAT. ``wire_name``/``clamp_uint`` make values stored by older versions encodable
(lists never fail because of one bad entry); ``stored_problems`` names such values.

Only ``core.wire`` is imported here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.units import U64_MAX, shown  # noqa: F401 (shown: re-exported)

NAME_BYTES = (1, 255)
USERNAME_BYTES = (3, 50)
PASSWORD_BYTES = (3, 100)
PAT_NAME_BYTES = (3, 30)
COMPRESSIONS = {1: "none", 2: "gzip"}
U8_MAX = 0xFF
U32_MAX = 0xFFFF_FFFF


def utf8_length(value: str, code: ErrorCode) -> int:
    """Bytes of ``value`` in UTF-8. Raises IggyError(code) for lone surrogates (JSON escapes
    such as ``"\\ud800"`` decode to them) which have no UTF-8 form."""
    try:
        return len(value.encode())
    except UnicodeEncodeError:
        raise IggyError(code, "not valid UTF-8") from None


def check_length(value: str, bounds: tuple[int, int], code: ErrorCode) -> None:
    """Raise IggyError(code) unless the UTF-8 length of ``value`` is within ``bounds``."""
    n = utf8_length(value, code)
    if not bounds[0] <= n <= bounds[1]:
        raise IggyError(code, f"length {n} outside {bounds[0]}..{bounds[1]}")


def check_name(value: str, code: ErrorCode) -> None:
    """A stream/topic/group name: 1..255 UTF-8 bytes. Raises IggyError(code)."""
    check_length(value, NAME_BYTES, code)


def check_uint(value: Any, bits: int, what: str,
               code: ErrorCode = ErrorCode.INVALID_FORMAT) -> None:
    """Raise IggyError(code) unless ``value`` is an int (not bool) in ``0..2**bits-1``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << bits:
        raise IggyError(code, f"{what}: {shown(value)} is not a u{bits}")


def check_compression(code: int) -> None:
    """Raises IggyError INVALID_COMMAND unless ``code`` is 1 (none) or 2 (gzip)."""
    if code not in COMPRESSIONS:
        raise IggyError(ErrorCode.INVALID_COMMAND, f"compression algorithm {code!r}")


def check_topic_settings(req: Any) -> None:
    """Name, compression, expiry (u64), max size (u64) and replication factor (u8) of a
    CreateTopic/UpdateTopic. Raises IggyError."""
    check_name(req.name, ErrorCode.INVALID_TOPIC_NAME)
    check_uint(req.compression, 8, "compression", ErrorCode.INVALID_COMMAND)
    check_compression(req.compression)
    check_uint(req.message_expiry_us, 64, "message_expiry")
    check_uint(req.max_topic_size_bytes, 64, "max_topic_size", ErrorCode.INVALID_TOPIC_SIZE)
    check_uint(req.replication_factor, 8, "replication_factor",
               ErrorCode.INVALID_REPLICATION_FACTOR)


def check_encodable(req: Any) -> None:
    """Raise IggyError INVALID_FORMAT unless ``req`` has a binary form (an integer outside
    its wire range, a value of the wrong type). For requests built from JSON."""
    try:
        req.encode()
    except IggyError:
        raise
    except (struct.error, OverflowError, ValueError, TypeError, AttributeError) as exc:
        raise IggyError(ErrorCode.INVALID_FORMAT, f"value out of range: {exc}") from None


# -- values stored by older versions ----------------------------------------------------------
def wire_name(name: str) -> str:
    """``name`` cut to 255 UTF-8 bytes at a character boundary ("?" when empty)."""
    cut = name.encode("utf-8", "replace")[:NAME_BYTES[1]].decode("utf-8", "ignore")
    return cut or "?"


def clamp_uint(value: int, bits: int, fallback: int = 0) -> int:
    """``value`` when it is a u<bits>, else ``fallback``."""
    return value if isinstance(value, int) and 0 <= value < 1 << bits else fallback


def stored_problems(state: Any) -> Iterator[str]:
    """Descriptions of stored metadata that breaks the 0.8 rules (from older versions)."""
    for stream in state.streams.values():
        if not _name_ok(stream.name):
            yield f"stream {stream.id}: name of {len(stream.name)} characters"
        for topic in stream.topics.values():
            yield from _topic_problems(stream.id, topic)


def _name_ok(name: str) -> bool:
    try:
        return NAME_BYTES[0] <= len(name.encode()) <= NAME_BYTES[1]
    except UnicodeEncodeError:
        return False


def _topic_problems(stream_id: int, topic: Any) -> Iterator[str]:
    where = f"stream {stream_id} topic {topic.id}"
    if not _name_ok(topic.name):
        yield f"{where}: name of {len(topic.name)} characters"
    for field, bits in (("message_expiry_us", 64), ("max_topic_size", 64),
                        ("replication_factor", 8), ("compression", 8)):
        value = getattr(topic, field)
        if clamp_uint(value, bits, -1) != value:
            yield f"{where}: {field} {value}"
    for group in topic.groups.values():
        if not _name_ok(group.name):
            yield f"{where} group {group.id}: name of {len(group.name)} characters"
