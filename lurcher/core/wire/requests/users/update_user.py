"""UpdateUser (35): user Identifier, ``has_username u8`` [+ name(u8)], ``has_status u8``
[+ ``status u8``]. Only a flag byte of 1 means present (0.8 server). ``validate``: username
3..50 (INVALID_USERNAME), status 1..2 (INVALID_COMMAND). Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import USERNAME_BYTES, UserRequest, check_length
from lurcher.core.wire.requests.users.create_user import check_status


class UpdateUser(UserRequest, frozen=True):
    CODE: ClassVar[int] = 35
    username: str | None = None
    status: int | None = None

    def write(self, w: Writer) -> None:
        self.user_id.write(w)
        if self.username is None:
            w.u8(0)
        else:
            w.u8(1).name(self.username)
        if self.status is None:
            w.u8(0)
        else:
            w.u8(1).u8(self.status)

    @classmethod
    def read(cls, r: Reader) -> Self:
        user_id = Identifier.read(r, "user id")
        username = r.name("username") if r.u8("has username") == 1 else None
        status = r.u8("status") if r.u8("has status") == 1 else None
        return cls(user_id, username, status)

    def validate(self) -> None:
        """Raises IggyError INVALID_USERNAME or INVALID_COMMAND (bad status)."""
        if self.username is not None:
            check_length(self.username, USERNAME_BYTES, ErrorCode.INVALID_USERNAME)
        if self.status is not None:
            check_status(self.status)
