"""Binary form of the replication messages, with the ``core.wire`` discipline.

A frame is one tag byte (index in ``MESSAGE_TYPES`` + 1) and the fields in declaration
order, each by its ``SCHEMA`` kind: ``u8``, ``u64`` (little endian), ``blob`` (u32 length +
bytes), ``requests`` / ``log`` (u32 count + items), ``entry``, ``optlog`` (bool + log), ``table``
(u32 count + client slots), ``optckpt`` (bool + checkpoint).
Copies: ``encode_parts`` returns the frame as a list of buffers in which every blob of at
least ``INLINE_BLOB`` bytes is the caller's object itself (written with ``writelines`` /
``pwritev``, never joined in Python); ``decode`` returns a blob of at least ``INLINE_BLOB``
bytes that is at least a quarter of the buffer it was given as a read-only memoryview into
that buffer (which must be ``bytes``: the view keeps it alive and it must not change), and
others as copies, so a small blob never pins a large buffer (at most 4x its size).
``decode`` returns the message or raises ``ReplicationWireError`` (a ``WireError``): it
never reads past the buffer, rejects counts the remaining bytes cannot hold (so a hostile
count cannot allocate), unknown tags, and trailing bytes.
"""

from __future__ import annotations

from typing import Any

from lurcher.core.wire.buffer import U32, Buffer, Reader, Writer
from lurcher.core.wire.errors import WireError

from lurcher.core.replication.messages import (
    MESSAGE_TYPES, Checkpoint, ClientSlot, Entry, Message, Request,
)

TAGS = {cls: i + 1 for i, cls in enumerate(MESSAGE_TYPES)}
MIN_REQUEST = 8 + 8 + 4
MIN_ENTRY = 8 + 8 + 4
MIN_SLOT = 8 + 8 + 4
INLINE_BLOB = 4096  # smaller blobs are copied into the frame's head, larger ones referenced


class PartsWriter(Writer):
    """A ``Writer`` whose large blobs become parts of their own instead of being copied."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[Buffer] = []

    def str32(self, b: Buffer) -> "PartsWriter":  # type: ignore[override]
        if len(b) < INLINE_BLOB:
            super().str32(b)
            return self
        self.out += U32.pack(len(b))
        self.parts += (self.out, b)
        self.out = bytearray()
        return self

    def done_parts(self) -> list[Buffer]:
        if self.out:
            self.parts.append(self.out)
        return self.parts


class ReplicationWireError(WireError):
    """Bytes that are not a replication message."""


def encode(msg: Message) -> bytes:
    return b"".join(encode_parts(msg))


def encode_parts(msg: Message) -> list[Buffer]:
    """``msg``'s bytes as parts (large blobs by reference, see the module doc)."""
    w = PartsWriter()
    w.u8(TAGS[type(msg)])
    _write_struct(w, msg)
    return w.done_parts()


def write_struct(w: Writer, value: Any) -> None:
    """Append a struct with a ``SCHEMA`` (a message's fields or a journal record's)."""
    _write_struct(w, value)


def read_struct(r: Reader, cls: type) -> Any:
    """Read a struct with a ``SCHEMA``; blobs are views into ``r``'s buffer."""
    try:
        return _read_struct(r, cls)
    except ReplicationWireError:
        raise
    except WireError as e:
        raise ReplicationWireError(str(e.detail), offset=e.offset, needed=e.needed) from None


def decode(buf: Buffer) -> Message:
    r = Reader(buf)
    try:
        tag = r.u8("tag")
        if not 1 <= tag <= len(MESSAGE_TYPES):
            raise ReplicationWireError(f"unknown message tag {tag}", offset=0)
        msg = _read_struct(r, MESSAGE_TYPES[tag - 1])
    except ReplicationWireError:
        raise
    except WireError as e:
        raise ReplicationWireError(str(e.detail), offset=e.offset, needed=e.needed) from None
    if r.remaining:
        raise ReplicationWireError(f"{r.remaining} trailing byte(s)", offset=r.pos)
    return msg


def _write_struct(w: Writer, value: Any) -> None:
    for name, kind in zip(value.__struct_fields__, value.SCHEMA):
        _WRITERS[kind](w, getattr(value, name))


def _read_struct(r: Reader, cls: type) -> Any:
    return cls(*(_READERS[kind](r, name) for name, kind in zip(cls.__struct_fields__, cls.SCHEMA)))


def _read_blob(r: Reader, what: str) -> Buffer:
    view = r.view(r.u32(what), what)
    if len(view) >= INLINE_BLOB and 4 * len(view) >= view.obj.__len__():
        return view.toreadonly()
    return bytes(view)


def _write_items(w: Writer, items: tuple) -> None:
    w.u32(len(items))
    for item in items:
        _write_struct(w, item)


def _read_items(r: Reader, cls: type, min_size: int, what: str) -> tuple:
    count = r.u32(what)
    if count * min_size > r.remaining:
        raise ReplicationWireError(f"{what}: {count} items cannot fit in {r.remaining} bytes",
                                   offset=r.pos - 4)
    return tuple(_read_struct(r, cls) for _ in range(count))


def _write_optlog(w: Writer, log: tuple | None) -> None:
    w.bool(log is not None)
    if log is not None:
        _write_items(w, log)


def _read_optlog(r: Reader, what: str) -> tuple | None:
    return _read_items(r, Entry, MIN_ENTRY, what) if r.bool(what) else None


def _write_optckpt(w: Writer, checkpoint: Checkpoint | None) -> None:
    w.bool(checkpoint is not None)
    if checkpoint is not None:
        _write_struct(w, checkpoint)


def _read_optckpt(r: Reader, what: str) -> Checkpoint | None:
    return _read_struct(r, Checkpoint) if r.bool(what) else None


_WRITERS = {
    "u8": Writer.u8, "u64": Writer.u64, "blob": lambda w, b: w.str32(b),
    "entry": _write_struct, "requests": _write_items, "log": _write_items,
    "optlog": _write_optlog, "table": _write_items, "optckpt": _write_optckpt,
    "ckpt": _write_struct,
}
_READERS = {
    "u8": lambda r, what: r.u8(what),
    "u64": lambda r, what: r.u64(what),
    "blob": lambda r, what: _read_blob(r, what),
    "entry": lambda r, what: _read_struct(r, Entry),
    "requests": lambda r, what: _read_items(r, Request, MIN_REQUEST, what),
    "log": lambda r, what: _read_items(r, Entry, MIN_ENTRY, what),
    "optlog": _read_optlog,
    "table": lambda r, what: _read_items(r, ClientSlot, MIN_SLOT, what),
    "optckpt": _read_optckpt,
    "ckpt": lambda r, what: _read_struct(r, Checkpoint),
}
