"""UpdatePermissions (36): user Identifier, ``has_permissions u8`` [+ ``perm_len u32`` +
permissions blob]; ``perm_len`` must match the blob (INVALID_FORMAT). Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import UserRequest
from lurcher.core.wire.requests.users.create_user import (
    read_optional_permissions,
    write_optional_permissions,
)
from lurcher.core.wire.values.permissions import Permissions


class UpdatePermissions(UserRequest, frozen=True):
    CODE: ClassVar[int] = 36
    permissions: Permissions | None = None

    def write(self, w: Writer) -> None:
        self.user_id.write(w)
        write_optional_permissions(w, self.permissions)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "user id"), read_optional_permissions(r))
