"""GetMe (20): empty payload; answered with the caller's ``ClientDetails``."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.codec import Empty


class GetMe(Empty, frozen=True):
    CODE: ClassVar[int] = 20
