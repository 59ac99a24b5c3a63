"""SendMessages (101): ``metadata_length u32``, stream Id, topic Id, Partitioning, then a
``MessageBatch`` (messages_count u32, index block, messages blob = rest of the payload).

Invariant: ``metadata_length`` equals the encoded size of stream Id + topic Id +
partitioning + 4 (the count); any other value is INVALID_COMMAND. Identifier errors inside
the metadata are INVALID_IDENTIFIER and partitioning errors INVALID_COMMAND, as the 0.8
server's send path answers. The codec never looks inside the batch (``MessageBatch`` owns
message validation). Empty reply.
"""

from __future__ import annotations

from typing import ClassVar, Self

from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.buffer import Reader, Writer
from lurcher.core.wire.codec import Request
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import WireError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.values.partitioning import Partitioning

MESSAGES_COUNT_BYTES = 4


class SendMessages(Request, frozen=True):
    CODE: ClassVar[int] = 101
    stream_id: Identifier
    topic_id: Identifier
    partitioning: Partitioning
    batch: MessageBatch

    def metadata(self) -> bytes:
        """Stream Id + topic Id + partitioning, as encoded on the wire."""
        w = Writer()
        self.stream_id.write(w)
        self.topic_id.write(w)
        self.partitioning.write(w)
        return w.done()

    def write(self, w: Writer) -> None:
        meta = self.metadata()
        w.u32(len(meta) + MESSAGES_COUNT_BYTES).raw(meta)
        self.batch.write(w)

    @classmethod
    def read(cls, r: Reader) -> Self:
        """Raises WireError (see the module docstring for the codes)."""
        metadata_length = r.u32("metadata_length")
        start = r.pos
        stream_id = _identifier(r, "stream id")
        topic_id = _identifier(r, "topic id")
        partitioning = Partitioning.read(r)
        used = r.pos - start + MESSAGES_COUNT_BYTES
        if used != metadata_length:
            raise WireError(f"metadata_length {metadata_length} != {used}", offset=start,
                            code=ErrorCode.INVALID_COMMAND)
        return cls(stream_id, topic_id, partitioning, MessageBatch.read(r))


def _identifier(r: Reader, what: str) -> Identifier:
    try:
        return Identifier.read(r, what)
    except WireError as e:
        raise WireError(e.detail, offset=e.offset, needed=e.needed,
                        code=ErrorCode.INVALID_IDENTIFIER) from None
