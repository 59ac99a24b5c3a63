"""CreateUser (33): username name(u8), password (u8 length + UTF-8), ``status u8``,
``has_permissions u8`` then, when it is 1, ``perm_len u32`` + permissions blob.

Decode is structural (as the 0.8 server): ``perm_len`` must equal the decoded blob size
(else INVALID_FORMAT); a has_permissions byte other than 1 means none. ``validate`` applies
the handler rules: username 3..50 (INVALID_USERNAME), password 3..100 (INVALID_PASSWORD),
status 1..2 (INVALID_COMMAND). Answered with ``UserDetails``.
"""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError, WireError
from lurcher.core.wire.requests.common import (
    PASSWORD_BYTES,
    USERNAME_BYTES,
    check_length,
    read_password,
)
from lurcher.core.wire.values.permissions import Permissions

USER_STATUSES = {1: "active", 2: "inactive"}


def write_optional_permissions(w: Writer, permissions: Permissions | None) -> None:
    """``has_permissions u8`` [+ ``perm_len u32`` + blob]."""
    if permissions is None:
        w.u8(0)
        return
    blob = permissions.encode()
    w.u8(1).u32(len(blob)).raw(blob)


def read_optional_permissions(r: Reader) -> Permissions | None:
    """Raises WireError: truncated, or ``perm_len`` differs from the blob (INVALID_FORMAT)."""
    if r.u8("has permissions") != 1:
        return None
    perm_len = r.u32("permissions length")
    start = r.pos
    permissions = Permissions.read(r)
    if r.pos - start != perm_len:
        raise WireError(f"permissions length {perm_len} != decoded {r.pos - start}", offset=start)
    return permissions


def check_status(status: int) -> None:
    if status not in USER_STATUSES:
        raise IggyError(ErrorCode.INVALID_COMMAND, f"user status {status}")


class CreateUser(Request, frozen=True):
    CODE: ClassVar[int] = 33
    username: str
    password: str
    status: int = 1
    permissions: Permissions | None = None

    def write(self, w: Writer) -> None:
        w.name(self.username).name(self.password).u8(self.status)
        write_optional_permissions(w, self.permissions)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(r.name("username"), read_password(r), r.u8("status"),
                   read_optional_permissions(r))

    def validate(self) -> None:
        """Raises IggyError INVALID_USERNAME / INVALID_PASSWORD / INVALID_COMMAND."""
        check_length(self.username, USERNAME_BYTES, ErrorCode.INVALID_USERNAME)
        check_length(self.password, PASSWORD_BYTES, ErrorCode.INVALID_PASSWORD)
        check_status(self.status)
