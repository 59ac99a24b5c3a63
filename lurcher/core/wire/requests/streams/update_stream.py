"""UpdateStream (204): stream Identifier, new name(u8). Empty reply."""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.common import StreamRequest
from lurcher.core.wire.validation import check_name


class UpdateStream(StreamRequest, frozen=True):
    CODE: ClassVar[int] = 204
    name: str

    def write(self, w: Writer) -> None:
        self.stream_id.write(w)
        w.name(self.name)

    @classmethod
    def read(cls, r: Reader) -> Self:
        return cls(Identifier.read(r, "stream id"), r.name("stream name"))

    def validate(self) -> None:
        """Raises IggyError INVALID_STREAM_NAME: the name must have 1..255 UTF-8 bytes."""
        check_name(self.name, ErrorCode.INVALID_STREAM_NAME)
