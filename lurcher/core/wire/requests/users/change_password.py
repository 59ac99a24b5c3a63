"""ChangePassword (37): user Identifier, current password, new password (each u8 length +
UTF-8; length 0 passes decode). ``validate``: both 3..100 bytes (INVALID_PASSWORD). Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import (
    PASSWORD_BYTES, UserRequest, check_length, read_password,
)


class ChangePassword(UserRequest, frozen=True):
    CODE: ClassVar[int] = 37
    current_password: str
    new_password: str

    def write(self, w: Writer) -> None:
        self.user_id.write(w)
        w.name(self.current_password).name(self.new_password)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "user id"), read_password(r, "current password"),
                   read_password(r, "new password"))

    def validate(self) -> None:
        """Raises IggyError INVALID_PASSWORD."""
        check_length(self.current_password, PASSWORD_BYTES, ErrorCode.INVALID_PASSWORD)
        check_length(self.new_password, PASSWORD_BYTES, ErrorCode.INVALID_PASSWORD)
