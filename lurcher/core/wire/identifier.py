"""The Iggy ``Identifier``: a numeric u32 id or a 1..255-byte name.

Layout: ``kind u8`` (1 numeric, 2 string), ``length u8``, value. A numeric identifier
must have length 4. ``Identifier.parse`` applies the SDK rule that an all-digits string
is numeric.
"""

from __future__ import annotations

import functools

import msgspec

from lurcher.core.wire.buffer import U32, U32_MAX, Reader, Writer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import WireError
from lurcher.core.wire.units import decimal

NUMERIC = 1
STRING = 2


@functools.lru_cache(maxsize=4096, typed=True)
def wire_form(value: int | str) -> bytes:
    """The encoded identifier of ``value`` (clients name the same few streams and topics in
    every request, so the encoding is kept). Raises ValueError (a name over 255 bytes),
    struct.error (an id outside u32)."""
    w = Writer()
    if isinstance(value, int):
        w.u8(NUMERIC).u8(4).u32(value)
    else:
        w.u8(STRING).name(value.encode())
    return w.done()


class Identifier(msgspec.Struct, frozen=True):
    """Either ``value: int`` (numeric) or ``value: str`` (name)."""

    value: int | str

    @property
    def is_numeric(self) -> bool:
        return isinstance(self.value, int)

    @classmethod
    def parse(cls, value: "int | str | Identifier") -> "Identifier":
        """int -> numeric; all-digit str that fits u32 -> numeric; other str -> name."""
        if isinstance(value, Identifier):
            return value
        number = decimal(value, U32_MAX) if isinstance(value, str) else value
        return cls(value if number is None else number)

    def write(self, w: Writer) -> None:
        w.raw(wire_form(self.value))

    def encode(self) -> bytes:
        w = Writer()
        self.write(w)
        return w.done()

    @classmethod
    def read(cls, r: Reader, what: str = "identifier") -> "Identifier":
        start = r.need(2, what)
        kind, length = r.buf[start], r.buf[start + 1]
        if kind == NUMERIC:
            if length != 4:
                raise WireError(f"{what}: numeric length {length} != 4", offset=start)
            return cls(U32.unpack_from(r.buf, r.need(4, what))[0])
        if kind == STRING:
            if length == 0:
                raise WireError(f"{what}: empty name", offset=start)
            return cls(r.text(length, what))
        raise WireError(f"{what}: unknown kind {kind}", offset=start,
                        code=ErrorCode.INVALID_COMMAND)

    def __str__(self) -> str:
        return str(self.value)
