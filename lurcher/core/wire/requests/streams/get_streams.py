"""GetStreams (201): empty payload; answered with concatenated ``StreamHeader``s."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.codec import Empty


class GetStreams(Empty, frozen=True):
    CODE: ClassVar[int] = 201
