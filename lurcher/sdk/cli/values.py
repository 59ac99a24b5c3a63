"""Parsing command-line values: expiry, sizes, timestamps, message ids, headers and
permissions. Each parser is usable as an argparse ``type=`` and raises
``argparse.ArgumentTypeError`` (so a bad value is a usage error, exit 2) with a message
naming the bad part.

Headers: ``key:kind:value`` (kinds: raw, string, bool, int8..int128, uint8..uint128,
float32, float64; raw values are hex with an optional ``0x``); one ``-H`` may hold several
comma-separated headers, a comma starts a new header only when what follows looks like
``key:kind:``. Permissions: global ``m_srv,r_srv,...`` (short or long names); per stream
``STREAM_ID[:perms][#TOPIC_ID:perms]...``, as the Iggy CLI writes them.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import uuid
from collections.abc import Callable
from typing import Any

from lurcher.core.wire.address import split_address
from lurcher.core.wire.headers import HeaderKind, HeaderValue
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.cli.exitcodes import CliError, ExitCode
from lurcher.core.wire.values.permissions import (
    GlobalPermissions,
    StreamPermissions,
    TopicPermissions,
)
from lurcher.core.wire.units import U64_MAX, decimal, limit_bytes, limit_us, shown
from lurcher.core.wire.validation import NAME_BYTES, U8_MAX, U32_MAX

Bad = argparse.ArgumentTypeError
US_PER_S = 1_000_000
SECONDS_PER_DAY = 86_400


def identifier_arg(argument: str) -> Callable[[str], str]:
    """The argparse type of a stream, topic, group, consumer or user argument, or of a name
    to create: an id, or a name of 1 to 255 bytes of UTF-8 (as an Identifier takes), kept
    as typed. Raises CliError(USAGE) naming ``argument``, one line (not argparse's usage
    block: ``main`` prints it)."""
    def checked(text: str) -> str:
        try:
            size = len(text.encode())
        except UnicodeEncodeError:
            raise CliError(f"argument {argument}: {shown(text)} is not UTF-8",
                           ExitCode.USAGE) from None
        if not NAME_BYTES[0] <= size <= NAME_BYTES[1]:
            raise CliError(f"argument {argument}: expected an id or a name of {NAME_BYTES[0]} "
                           f"to {NAME_BYTES[1]} bytes, got {shown(text)} ({size} bytes)",
                           ExitCode.USAGE)
        return text
    return checked


def expiry_us(text: str) -> int:
    """``server_default`` -> 0, ``unlimited`` -> never, else a duration (``15days 2min``)."""
    try:
        return limit_us(text)
    except ValueError as e:
        raise Bad(f"invalid expiry {shown(text)}: {e}") from None


def size_bytes(text: str) -> int:
    """``server_default`` -> 0, ``unlimited`` -> no limit, else ``15GB`` / ``512MiB`` / bytes."""
    try:
        size = limit_bytes(text)
        if size > U64_MAX:
            raise ValueError("above u64")
        return size
    except ValueError:
        raise Bad(f"invalid size {shown(text)} (examples: 1000, 15GB, 512MiB, unlimited)"
                  ) from None


def timestamp_us(text: str) -> int:
    """Microseconds since the epoch, or an ISO-8601 time (UTC unless it has an offset)."""
    if text.isascii() and text.isdigit():
        return whole_number(text, 0, U64_MAX)
    try:
        stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise Bad(f"invalid timestamp {text!r}: microseconds or ISO-8601") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.timezone.utc)
    if stamp.timestamp() < 0:
        raise Bad(f"invalid timestamp {text!r}: before 1970")
    return round(stamp.timestamp() * US_PER_S)


def message_id(text: str) -> int:
    """A u128 id: decimal, ``0x`` hex, or a UUID."""
    try:
        if text.lower().startswith("0x"):
            value = int(text, 16)
        elif text.isascii() and text.isdigit() and len(text) <= 39:  # digits of a u128
            value = int(text)
        else:
            value = uuid.UUID(text).int
    except ValueError:
        raise Bad(f"invalid message id {text!r}: a number or a UUID") from None
    if not 0 <= value < 1 << 128:
        raise Bad(f"message id {text!r} does not fit in 128 bits")
    return value


def whole_number(text: str, lowest: int, highest: int) -> int:
    """``text`` as an int from ``lowest`` to ``highest``, written in ASCII digits."""
    value = decimal(text, highest)
    if value is None or value < lowest:
        raise Bad(f"expected a number from {lowest} to {highest}, got {shown(text)}")
    return value


def positive_int(text: str) -> int:
    """A count or id from 1 (u32)."""
    return whole_number(text, 1, U32_MAX)


def non_negative_int(text: str) -> int:
    """An id or count from 0 (u32)."""
    return whole_number(text, 0, U32_MAX)


def offset_value(text: str) -> int:
    """A message offset (u64)."""
    return whole_number(text, 0, U64_MAX)


def u8_value(text: str) -> int:
    return whole_number(text, 0, U8_MAX)


def address_value(text: str) -> str:
    """A ``host:port`` server address (IPv6 as ``[::1]:8090``), as the SDK takes it."""
    try:
        split_address(text)
    except ValueError as e:
        raise Bad(f"invalid address: {e}") from None
    return text


def seconds_value(text: str) -> float:
    """A timeout in seconds: a finite number above 0 (a day at most)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= SECONDS_PER_DAY:
        raise Bad(f"expected seconds above 0 and at most {SECONDS_PER_DAY}, got {shown(text)}")
    return value


# -- headers -----------------------------------------------------------------------------

KINDS = {kind.name.lower(): kind for kind in HeaderKind}
_HEADER_START = re.compile(r"[^,:]+:(" + "|".join(KINDS) + r"):", re.IGNORECASE)
_BOOLS = {"true": True, "false": False, "1": True, "0": False}


def _header_python(kind: HeaderKind, raw: str) -> Any:
    if kind == HeaderKind.STRING:
        return raw
    if kind == HeaderKind.RAW:
        return bytes.fromhex(raw[2:] if raw.lower().startswith("0x") else raw)
    if kind == HeaderKind.BOOL:
        return _BOOLS[raw.lower()]
    if kind in (HeaderKind.FLOAT32, HeaderKind.FLOAT64):
        return float(raw)
    return int(raw, 0)


def one_header(text: str) -> tuple[str, HeaderValue]:
    key, _, rest = text.partition(":")
    kind_name, sep, raw = rest.partition(":")
    kind = KINDS.get(kind_name.lower())
    if not key or not sep or kind is None:
        raise Bad(f"invalid header {text!r}: expected key:kind:value with kind one of "
                  f"{', '.join(KINDS)}")
    try:
        HeaderValue.of(HeaderKind.STRING, key)
    except IggyError:
        raise Bad(f"invalid header key {key!r}: 1 to 255 bytes of UTF-8") from None
    try:
        return key, HeaderValue.of(kind, _header_python(kind, raw))
    except (ValueError, KeyError, IggyError):
        raise Bad(f"invalid {kind_name} value {raw!r} in header {key!r}") from None


def headers(text: str) -> list[tuple[str, HeaderValue]]:
    """One ``-H`` argument: one or more comma-separated ``key:kind:value``."""
    starts = [0] + [i + 1 for i, ch in enumerate(text)
                    if ch == "," and _HEADER_START.match(text, i + 1)]
    ends = [s - 1 for s in starts[1:]] + [len(text)]
    return [one_header(text[a:b]) for a, b in zip(starts, ends)]


# -- permissions -------------------------------------------------------------------------

_SHORT = {"m_srv": "manage_servers", "r_srv": "read_servers", "m_usr": "manage_users",
          "r_usr": "read_users", "m_str": "manage_streams", "r_str": "read_streams",
          "m_top": "manage_topics", "r_top": "read_topics", "p_msg": "poll_messages",
          "s_msg": "send_messages"}
_STREAM_SHORT = {"m_str": "manage_stream", "r_str": "read_stream", "m_top": "manage_topics",
                 "r_top": "read_topics", "p_msg": "poll_messages", "s_msg": "send_messages"}
_TOPIC_SHORT = {"m_top": "manage_topic", "r_top": "read_topic", "p_msg": "poll_messages",
                "s_msg": "send_messages"}


def _flags(text: str, short: dict[str, str], fields: tuple[str, ...], what: str) -> dict:
    chosen = {}
    for word in filter(None, (w.strip() for w in text.split(","))):
        name = short.get(word, word)
        if name not in fields:
            raise Bad(f"unknown {what} permission {word!r} (use {', '.join(fields)} "
                      f"or {', '.join(short)})")
        chosen[name] = True
    return chosen


def global_permissions(text: str) -> GlobalPermissions:
    return GlobalPermissions(**_flags(text, _SHORT, GlobalPermissions.__struct_fields__,
                                      "global"))


def _topic(part: str) -> tuple[int, TopicPermissions]:
    tid, _, perms = part.partition(":")
    fields = TopicPermissions.__struct_fields__
    return whole_number(tid, 0, U32_MAX), TopicPermissions(
        **_flags(perms, _TOPIC_SHORT, fields, "topic"))


def stream_permissions(text: str) -> tuple[int, StreamPermissions]:
    """``STREAM_ID[:perms][#TOPIC_ID:perms]...`` -> (stream id, StreamPermissions)."""
    head, *topic_parts = text.split("#")
    sid, _, perms = head.partition(":")
    fields = tuple(f for f in StreamPermissions.__struct_fields__ if f != "topics")
    flags = _flags(perms, _STREAM_SHORT, fields, "stream")
    return whole_number(sid, 0, U32_MAX), StreamPermissions(
        **flags, topics=dict(_topic(p) for p in topic_parts))
