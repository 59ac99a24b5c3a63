"""The permissions blob (users): global flags, then per-stream and per-topic flags.

Layout: 10 global flag bytes, ``has_streams u8``; each stream is ``stream_id u32``, 6 flag
bytes, ``has_topics u8``, its topics, ``has_next_stream u8``; each topic is ``topic_id u32``,
4 flag bytes, ``has_next_topic u8``. Streams and topics are dicts keyed by id; the encoder
writes them in ascending id order, so value -> bytes -> value is exact; decoded from JSON, an
id outside u32 is a validation error. Decoding follows the
0.8 server: any non-zero flag byte is true, a repeated id keeps the last entry.
"""

from __future__ import annotations

from typing import Self

import msgspec

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import U32, WireStruct


def _read_flags(r: Reader, n: int, what: str) -> list[bool]:
    return [b != 0 for b in r.view(n, what)]


def _write_flags(w: Writer, flags: tuple[bool, ...]) -> None:
    w.raw(bytes(1 if f else 0 for f in flags))


class _Flags(WireStruct, frozen=True):
    """Base of a fixed run of flag bytes; subclasses list only bool fields."""

    def flags(self) -> tuple[bool, ...]:
        return tuple(getattr(self, f) for f in self.__struct_fields__)

    def write(self, w: Writer) -> None:
        _write_flags(w, self.flags())

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(*_read_flags(r, len(cls.__struct_fields__), cls.__name__))


class GlobalPermissions(_Flags, frozen=True):
    manage_servers: bool = False
    read_servers: bool = False
    manage_users: bool = False
    read_users: bool = False
    manage_streams: bool = False
    read_streams: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False


class TopicPermissions(_Flags, frozen=True):
    manage_topic: bool = False
    read_topic: bool = False
    poll_messages: bool = False
    send_messages: bool = False


class StreamPermissions(WireStruct, frozen=True):
    manage_stream: bool = False
    read_stream: bool = False
    manage_topics: bool = False
    read_topics: bool = False
    poll_messages: bool = False
    send_messages: bool = False
    topics: dict[U32, TopicPermissions] = {}

    def write(self, w: Writer) -> None:
        _write_flags(w, (self.manage_stream, self.read_stream, self.manage_topics,
                         self.read_topics, self.poll_messages, self.send_messages))
        _write_chain(w, self.topics)

    @classmethod
    def read(cls, r: Reader) -> Self:
        flags = _read_flags(r, 6, "stream permissions")
        return cls(*flags, topics=_read_chain(r, TopicPermissions, "topic"))


class Permissions(WireStruct, frozen=True):
    global_: GlobalPermissions = msgspec.field(default_factory=GlobalPermissions, name="global")
    streams: dict[U32, StreamPermissions] = {}

    @classmethod
    def root(cls) -> "Permissions":
        """All global flags true, no stream entries (the root user's permissions)."""
        return cls(GlobalPermissions(*([True] * 10)))

    def write(self, w: Writer) -> None:
        self.global_.write(w)
        _write_chain(w, self.streams)

    @classmethod
    def read(cls, r: Reader) -> Self:
        """Raises WireError if the blob is truncated."""
        return cls(GlobalPermissions.read(r), _read_chain(r, StreamPermissions, "stream"))


def _write_chain(w: Writer, items: dict[int, WireStruct]) -> None:
    """``has_first u8`` then per item: id u32, body, ``has_next u8`` (ascending ids)."""
    ids = sorted(items)
    w.u8(1 if ids else 0)
    for i, item_id in enumerate(ids):
        w.u32(item_id)
        items[item_id].write(w)
        w.u8(1 if i + 1 < len(ids) else 0)


def _read_chain(r: Reader, item: type[WireStruct], what: str) -> dict:
    items: dict[int, WireStruct] = {}
    more = r.u8(f"has {what}s") != 0
    while more:
        item_id = r.u32(f"{what} id")
        items[item_id] = item.read(r)
        more = r.u8(f"has next {what}") != 0
    return items
