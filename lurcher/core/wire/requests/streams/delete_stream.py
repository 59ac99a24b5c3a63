"""DeleteStream (203): stream Identifier; empty reply."""

from __future__ import annotations

from typing import ClassVar

from lurcher.core.wire.requests.common import StreamRequest


class DeleteStream(StreamRequest, frozen=True):
    CODE: ClassVar[int] = 203
