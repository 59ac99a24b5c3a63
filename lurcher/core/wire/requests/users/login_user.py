"""LoginUser (38): username name(u8), password (u8 length + UTF-8), version str(u32),
context str(u32). A zero string length means absent (None); lengths are always present.

``validate``: username 3..50 (INVALID_USERNAME), password 3..100 (INVALID_PASSWORD), the
0.8 handler's checks. Answered with ``IdentityInfo`` (user_id u32).
"""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.requests.common import (
    PASSWORD_BYTES,
    USERNAME_BYTES,
    check_length,
    read_password,
)


class LoginUser(Request, frozen=True):
    CODE: ClassVar[int] = 38
    username: str
    password: str
    version: str | None = None
    context: str | None = None

    def write(self, w: Writer) -> None:
        w.name(self.username).name(self.password)
        w.str32(self.version or "").str32(self.context or "")

    @classmethod
    def read(cls, r: Reader) -> Self:
        username = r.name("username")
        password = read_password(r)
        version = r.str32("version") or None
        return cls(username, password, version, r.str32("context") or None)

    def validate(self) -> None:
        """Raises IggyError INVALID_USERNAME or INVALID_PASSWORD."""
        check_length(self.username, USERNAME_BYTES, ErrorCode.INVALID_USERNAME)
        check_length(self.password, PASSWORD_BYTES, ErrorCode.INVALID_PASSWORD)
