"""GetPersonalAccessTokens (41): empty payload; answered with concatenated ``PatInfo``s."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.codec import Empty


class GetPersonalAccessTokens(Empty, frozen=True):
    CODE: ClassVar[int] = 41
