"""GetUsers (32): empty payload; answered with concatenated ``UserHeader``s."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.codec import Empty


class GetUsers(Empty, frozen=True):
    CODE: ClassVar[int] = 32
