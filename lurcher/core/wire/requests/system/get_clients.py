"""GetClients (22): empty payload; answered with concatenated ``ClientHeader``s."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.codec import Empty


class GetClients(Empty, frozen=True):
    CODE: ClassVar[int] = 22
