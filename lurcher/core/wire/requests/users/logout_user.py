"""LogoutUser (39): empty payload, empty reply."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.codec import Empty


class LogoutUser(Empty, frozen=True):
    CODE: ClassVar[int] = 39
