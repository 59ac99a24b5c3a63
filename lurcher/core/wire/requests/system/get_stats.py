"""GetStats (10): empty payload; answered with ``Stats``."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.codec import Empty


class GetStats(Empty, frozen=True):
    CODE: ClassVar[int] = 10
