"""The base of every typed wire value: a msgspec Struct that reads and writes itself.

Subclasses implement ``write(w)`` and the classmethod ``read(r)``; ``encode`` and
``decode`` wrap them. ``Request`` subclasses declare their command ``CODE`` and are
registered in ``REQUEST_TYPES`` so the command table and the dispatcher can find them.
``U32``: an int field (or dict key) that msgspec decoding (JSON, MCP arguments) bounds to the
wire's u32, so a decoded value always encodes.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Self

import msgspec

from lurcher.core.wire.buffer import U32_MAX, Buffer, Reader, Writer
from lurcher.core.wire.errors import WireError

U32 = Annotated[int, msgspec.Meta(ge=0, le=U32_MAX)]


class WireStruct(msgspec.Struct, frozen=True):
    """A value with a binary form."""

    def write(self, w: Writer) -> None:
        raise NotImplementedError

    @classmethod
    def read(cls, r: Reader) -> Self:
        raise NotImplementedError

    def encode(self) -> bytes:
        w = Writer()
        self.write(w)
        return w.done()

    @classmethod
    def decode(cls, buf: Buffer) -> tuple[Self, int]:
        """The value at the start of ``buf`` and the bytes it used. Raises WireError."""
        r = Reader(buf)
        return cls.read(r), r.pos

    @classmethod
    def decode_exact(cls, buf: Buffer) -> Self:
        """Decode ``buf`` and ignore trailing bytes (the 0.8 server only logs them)."""
        return cls.read(Reader(buf))

    @classmethod
    def read_list(cls, r: Reader) -> list[Self]:
        """Items concatenated until the end of the buffer (the Iggy list form)."""
        items = []
        while r.remaining:
            items.append(cls.read(r))
        return items

    @classmethod
    def decode_list(cls, buf: Buffer) -> list[Self]:
        return cls.read_list(Reader(buf))

    @staticmethod
    def encode_list(items: "list[WireStruct]") -> bytes:
        w = Writer()
        for item in items:
            item.write(w)
        return w.done()


REQUEST_TYPES: dict[int, type["Request"]] = {}


class Request(WireStruct, frozen=True):
    """A command's request payload; ``CODE`` is its command code."""

    CODE: ClassVar[int] = 0

    def validate(self) -> None:
        """Checks the 0.8 server applies after decoding; raises IggyError. Default: none."""
        return None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.CODE:
            if cls.CODE in REQUEST_TYPES and REQUEST_TYPES[cls.CODE] is not cls:
                raise RuntimeError(f"two request types for code {cls.CODE}")
            REQUEST_TYPES[cls.CODE] = cls


class Empty(Request, frozen=True):
    """Base for requests with no payload."""

    def write(self, w: Writer) -> None:
        return None

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls()


def expect_end(r: Reader, what: str) -> None:
    """Raise WireError if bytes remain where a value must end (used by strict decoders)."""
    if r.remaining:
        raise WireError(f"{what}: {r.remaining} unexpected trailing byte(s)", offset=r.pos)
