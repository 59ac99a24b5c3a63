"""``Consumer``: ``kind u8`` (1 consumer, 2 consumer group) followed by an Identifier.

Invariant: a decoded kind is 1 or 2; any other byte is an unknown discriminant, which the
0.8 server answers with INVALID_COMMAND (not INVALID_FORMAT).
"""

from __future__ import annotations

import enum
from typing import Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import WireStruct
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import WireError
from lurcher.core.wire.identifier import Identifier


class ConsumerKind(enum.IntEnum):
    CONSUMER = 1
    CONSUMER_GROUP = 2


class Consumer(WireStruct, frozen=True):
    kind: int
    id: Identifier

    @classmethod
    def of(cls, id: int | str | Identifier, group: bool = False) -> "Consumer":
        kind = ConsumerKind.CONSUMER_GROUP if group else ConsumerKind.CONSUMER
        return cls(int(kind), Identifier.parse(id))

    @property
    def is_group(self) -> bool:
        return self.kind == ConsumerKind.CONSUMER_GROUP

    def write(self, w: Writer) -> None:
        w.u8(self.kind)
        self.id.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        """Raises WireError (INVALID_COMMAND for an unknown kind)."""
        start = r.pos
        kind = r.u8("consumer kind")
        if kind not in (1, 2):
            raise WireError(f"consumer kind {kind}", offset=start, code=ErrorCode.INVALID_COMMAND)
        return cls(kind, Identifier.read(r, "consumer id"))
