"""Bounds-checked little-endian reading and writing of the Iggy primitive types.

``Reader`` walks a buffer with a cursor; every read checks the remaining length first and
raises ``WireError`` (never IndexError or struct.error). ``Writer`` appends to a
bytearray. Both know the Iggy string forms: ``name`` (u8 length, 1..255 UTF-8 bytes) and
``str32`` (u32 length, any UTF-8, possibly empty).
"""

from __future__ import annotations

import struct

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import WireError, truncated
from lurcher.core.wire.units import U64_MAX

U8 = struct.Struct("<B")
U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
F32 = struct.Struct("<f")
assert (U8.size, U16.size, U32.size, U64.size, F32.size) == (1, 2, 4, 8, 4)

U32_MAX = 0xFFFF_FFFF
U128_MAX = (1 << 128) - 1

Buffer = bytes | bytearray | memoryview


class Reader:
    """A cursor over ``buf``; reads advance ``pos``."""

    __slots__ = ("buf", "pos", "end")

    def __init__(self, buf: Buffer, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf if isinstance(buf, memoryview) else memoryview(buf)
        self.pos = pos
        self.end = len(self.buf) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def need(self, n: int, what: str) -> int:
        """Reserve ``n`` bytes; returns their start. Raises WireError if short."""
        start = self.pos
        if self.end - start < n:
            raise truncated(what, start, n - (self.end - start))
        self.pos = start + n
        return start

    def u8(self, what: str = "u8") -> int:
        return self.buf[self.need(1, what)]

    def u16(self, what: str = "u16") -> int:
        return U16.unpack_from(self.buf, self.need(2, what))[0]

    def u32(self, what: str = "u32") -> int:
        return U32.unpack_from(self.buf, self.need(4, what))[0]

    def u64(self, what: str = "u64") -> int:
        return U64.unpack_from(self.buf, self.need(8, what))[0]

    def u128(self, what: str = "u128") -> int:
        start = self.need(16, what)
        return int.from_bytes(self.buf[start:start + 16], "little")

    def f32(self, what: str = "f32") -> float:
        return F32.unpack_from(self.buf, self.need(4, what))[0]

    def bool(self, what: str = "bool") -> bool:
        value = self.u8(what)
        if value > 1:
            raise WireError(f"{what}: boolean byte {value}", offset=self.pos - 1)
        return value == 1

    def bytes(self, n: int, what: str = "bytes") -> bytes:
        start = self.need(n, what)
        return bytes(self.buf[start:start + n])

    def view(self, n: int, what: str = "bytes") -> memoryview:
        start = self.need(n, what)
        return self.buf[start:start + n]

    def rest(self) -> memoryview:
        start, self.pos = self.pos, self.end
        return self.buf[start:self.end]

    def text(self, n: int, what: str) -> str:
        start = self.pos
        raw = self.view(n, what)
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError:
            raise WireError(f"{what}: invalid UTF-8", offset=start,
                            code=ErrorCode.INVALID_UTF8) from None

    def name(self, what: str = "name", min_len: int = 1) -> str:
        """u8 length + UTF-8; a length below ``min_len`` is InvalidFormat."""
        n = self.u8(what)
        if n < min_len:
            raise WireError(f"{what}: length {n} below {min_len}", offset=self.pos - 1)
        return self.text(n, what)

    def raw_name(self, what: str = "name") -> bytes:
        """u8 length + raw bytes (no UTF-8 check)."""
        return self.bytes(self.u8(what), what)

    def str32(self, what: str = "string") -> str:
        return self.text(self.u32(what), what)


class Writer:
    """Appends Iggy primitives to a bytearray (``out``)."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out = bytearray()

    def u8(self, v: int) -> "Writer":
        self.out += U8.pack(v)
        return self

    def u16(self, v: int) -> "Writer":
        self.out += U16.pack(v)
        return self

    def u32(self, v: int) -> "Writer":
        self.out += U32.pack(v)
        return self

    def u64(self, v: int) -> "Writer":
        self.out += U64.pack(v)
        return self

    def u128(self, v: int) -> "Writer":
        self.out += v.to_bytes(16, "little")
        return self

    def f32(self, v: float) -> "Writer":
        self.out += F32.pack(v)
        return self

    def bool(self, v: bool) -> "Writer":
        return self.u8(1 if v else 0)

    def raw(self, b: Buffer) -> "Writer":
        self.out += b
        return self

    def name(self, s: str | bytes) -> "Writer":
        b = s.encode() if isinstance(s, str) else s
        if len(b) > 255:
            raise ValueError(f"name longer than 255 bytes: {len(b)}")
        self.out += U8.pack(len(b))
        self.out += b
        return self

    def str32(self, s: str | bytes) -> "Writer":
        b = s.encode() if isinstance(s, str) else s
        self.out += U32.pack(len(b))
        self.out += b
        return self

    def done(self) -> bytes:
        return bytes(self.out)
