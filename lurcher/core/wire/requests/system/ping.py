"""Ping (1): empty payload, empty reply; allowed before login."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.codec import Empty


class Ping(Empty, frozen=True):
    CODE: ClassVar[int] = 1
