"""``PollingStrategy``: always 9 bytes, ``kind u8`` (1..5) then ``value u64``.

An unknown kind is rejected at decode with INVALID_COMMAND, as the 0.8 server does.
"""

from __future__ import annotations

import enum
from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import WireError


class PollingKind(enum.IntEnum):
    OFFSET = 1
    TIMESTAMP = 2
    FIRST = 3
    LAST = 4
    NEXT = 5


class PollingStrategy(WireStruct, frozen=True):
    kind: int
    value: int = 0

    @classmethod
    def offset(cls, value: int) -> "PollingStrategy":
        return cls(PollingKind.OFFSET, value)

    @classmethod
    def timestamp(cls, value_us: int) -> "PollingStrategy":
        return cls(PollingKind.TIMESTAMP, value_us)

    @classmethod
    def first(cls) -> "PollingStrategy":
        return cls(PollingKind.FIRST)

    @classmethod
    def last(cls) -> "PollingStrategy":
        return cls(PollingKind.LAST)

    @classmethod
    def next(cls) -> "PollingStrategy":
        return cls(PollingKind.NEXT)

    def write(self, w: Writer) -> None:
        w.u8(self.kind).u64(self.value)

    @classmethod
    def read(cls, r: Reader) -> Self:
        """Raises WireError (INVALID_COMMAND for an unknown kind)."""
        start = r.pos
        kind = r.u8("polling kind")
        if not PollingKind.OFFSET <= kind <= PollingKind.NEXT:
            raise WireError(f"polling kind {kind}", offset=start, code=ErrorCode.INVALID_COMMAND)
        return cls(kind, r.u64("polling value"))
