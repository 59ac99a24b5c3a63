"""Bases for request payloads that start with the same identifiers.

``StreamRequest`` (stream Id), ``StreamTopicRequest`` (stream Id, topic Id), ``GroupRequest``
(stream Id, topic Id, group Id) and ``UserRequest`` (user Id). A command module subclasses
one of them, sets ``CODE`` and, when the payload continues, extends ``write``/``read``.
The length rules (username, password, PAT name) live in ``core.wire.validation``.
"""

from __future__ import annotations

from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.validation import (  # noqa: F401  (re-exported for command modules)
    PASSWORD_BYTES,
    PAT_NAME_BYTES,
    USERNAME_BYTES,
    check_length,
)


def read_password(r: Reader, what: str = "password") -> str:
    """u8 length + UTF-8, length 0 allowed at decode (the handler rejects it later)."""
    return r.name(what, min_len=0)


class StreamRequest(Request, frozen=True):
    stream_id: Identifier

    def write(self, w: Writer) -> None:
        self.stream_id.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"))


class StreamTopicRequest(Request, frozen=True):
    stream_id: Identifier
    topic_id: Identifier

    def write(self, w: Writer) -> None:
        self.stream_id.write(w)
        self.topic_id.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), Identifier.read(r, "topic id"))


class PartitionsCountRequest(StreamTopicRequest, frozen=True):
    """stream Id, topic Id, ``partitions_count u32`` (Create/DeletePartitions)."""

    partitions_count: int

    def write(self, w: Writer) -> None:
        super().write(w)
        w.u32(self.partitions_count)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), Identifier.read(r, "topic id"),
                   r.u32("partitions_count"))


class GroupRequest(Request, frozen=True):
    stream_id: Identifier
    topic_id: Identifier
    group_id: Identifier

    def write(self, w: Writer) -> None:
        self.stream_id.write(w)
        self.topic_id.write(w)
        self.group_id.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), Identifier.read(r, "topic id"),
                   Identifier.read(r, "group id"))


class UserRequest(Request, frozen=True):
    user_id: Identifier

    def write(self, w: Writer) -> None:
        self.user_id.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "user id"))
