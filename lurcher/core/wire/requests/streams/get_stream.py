"""GetStream (200): stream Identifier; answered with ``StreamDetails`` or empty."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.common import StreamRequest


class GetStream(StreamRequest, frozen=True):
    CODE: ClassVar[int] = 200
