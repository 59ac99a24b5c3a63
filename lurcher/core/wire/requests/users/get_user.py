"""GetUser (31): user Identifier; answered with ``UserDetails`` or empty."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.common import UserRequest


class GetUser(UserRequest, frozen=True):
    CODE: ClassVar[int] = 31
