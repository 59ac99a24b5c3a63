"""GetClusterMetadata (12): empty payload; answered with ``ClusterMetadata``."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.codec import Empty


class GetClusterMetadata(Empty, frozen=True):
    CODE: ClassVar[int] = 12
