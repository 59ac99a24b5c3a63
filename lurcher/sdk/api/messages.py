"""Message commands: send, poll, flush.

``send_messages`` writes the request as three parts (metadata + count, index block, messages
blob) so a large batch is never copied into one request buffer. ``poll_messages`` returns
the wire ``PolledMessages`` as decoded from one response buffer; messages are parsed only
when the caller iterates ``.messages()``.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.buffer import U32
from lurcher.core.wire.commands import decode_response
from lurcher.core.wire.requests.messages.flush_unsaved_buffer import FlushUnsavedBuffer
from lurcher.core.wire.requests.messages.poll_messages import PollMessages
from lurcher.core.wire.requests.messages.send_messages import MESSAGES_COUNT_BYTES, SendMessages
from lurcher.core.wire.responses.messages import PolledMessages
from lurcher.core.wire.values.partitioning import Partitioning
from lurcher.core.wire.values.polling import PollingStrategy
from lurcher.sdk.api.base import ApiBase, Id, ident
from lurcher.sdk.api.groups import ConsumerArg, as_consumer
from lurcher.sdk.arguments import ENCODE_ERRORS, encoded, unencodable
from lurcher.sdk.messages import (
    HeadersArg,
    PayloadArg,
    build_batch,
    to_partitioning,
    to_strategy,
)


def send_parts(request: SendMessages) -> list:
    """The SendMessages payload as [metadata_length + metadata + count, index, blob]."""
    meta = request.metadata()
    head = b"".join((U32.pack(len(meta) + MESSAGES_COUNT_BYTES), meta,
                     U32.pack(request.batch.count)))
    return [head, request.batch.index, request.batch.blob]


class MessagesApi(ApiBase):
    async def send_messages(self, stream: Id, topic: Id,
                            messages: MessageBatch | Sequence[PayloadArg],
                            partitioning: Partitioning | int | bytes | str | None = None, *,
                            ids: Sequence[int | uuid.UUID] | None = None,
                            headers: HeadersArg | Sequence[HeadersArg | None] | None = None,
                            ) -> None:
        """SendMessages (101). ``messages``: a prebuilt batch or payloads (bytes/str) with
        optional ``ids`` and ``headers``. ``partitioning``: None balanced, int partition id,
        bytes/str messages key, or a ``Partitioning``. Raises IggyError (InvalidArgument for
        a bad argument, before anything is sent)."""
        batch = messages if isinstance(messages, MessageBatch) else build_batch(
            messages, ids, headers)
        request = SendMessages(ident(stream), ident(topic), to_partitioning(partitioning), batch)
        try:
            parts = send_parts(request)
        except ENCODE_ERRORS as exc:  # an identifier without a binary form
            raise unencodable(request, exc) from None
        await self._raw(SendMessages.CODE, parts)

    async def poll_messages(self, stream: Id, topic: Id, partition_id: int | None = None,
                            strategy: PollingStrategy | str | int | None = None,
                            count: int = 100, auto_commit: bool = False, *,
                            consumer: ConsumerArg = 0, group: bool = False) -> PolledMessages:
        """PollMessages (100). ``strategy``: a PollingStrategy, "next"/"first"/"last", or an
        int offset (default Next). ``consumer`` defaults to plain consumer 0. Raises IggyError
        (InvalidArgument for a bad argument, before anything is sent)."""
        request = PollMessages(as_consumer(consumer, group), ident(stream), ident(topic),
                               partition_id, to_strategy(strategy), count, auto_commit)
        body = await self._raw(PollMessages.CODE, [encoded(request)])
        return decode_response(PollMessages.CODE, body)

    async def flush_unsaved_buffer(self, stream: Id, topic: Id, partition_id: int,
                                   fsync: bool = False) -> None:
        await self._call(FlushUnsavedBuffer(ident(stream), ident(topic), partition_id, fsync))
