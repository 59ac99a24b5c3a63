"""CreatePersonalAccessToken (42): name(u8), ``expiry u64`` (µs; 0 = server default,
u64::MAX = never). ``validate``: name 3..30 bytes (INVALID_PERSONAL_ACCESS_TOKEN_NAME).
Answered with ``RawToken``."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.requests.common import PAT_NAME_BYTES, check_length


class CreatePersonalAccessToken(Request, frozen=True):
    CODE: ClassVar[int] = 42
    name: str
    expiry_us: int = 0

    def write(self, w: Writer) -> None:
        w.name(self.name).u64(self.expiry_us)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.name("token name"), r.u64("expiry"))

    def validate(self) -> None:
        """Raises IggyError INVALID_PERSONAL_ACCESS_TOKEN_NAME."""
        check_length(self.name, PAT_NAME_BYTES, ErrorCode.INVALID_PERSONAL_ACCESS_TOKEN_NAME)
