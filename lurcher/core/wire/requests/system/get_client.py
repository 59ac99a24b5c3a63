"""GetClient (21): ``client_id u32``; answered with ``ClientDetails`` or empty."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError


class GetClient(Request, frozen=True):
    CODE: ClassVar[int] = 21
    client_id: int

    def write(self, w: Writer) -> None:
        w.u32(self.client_id)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.u32("client id"))

    def validate(self) -> None:
        """Raises IggyError INVALID_CLIENT_ID for client id 0 (the 0.8 handler rule)."""
        if self.client_id == 0:
            raise IggyError(ErrorCode.INVALID_CLIENT_ID, "client id 0")
