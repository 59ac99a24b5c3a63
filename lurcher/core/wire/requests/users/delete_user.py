"""DeleteUser (34): user Identifier; empty reply."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.common import UserRequest


class DeleteUser(UserRequest, frozen=True):
    CODE: ClassVar[int] = 34
