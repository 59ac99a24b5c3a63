"""A partition whose shard cannot open it when it applies the creation (its descriptors used
up, as a shard process of its own can be while the metadata owner made the files): one log
line, no traceback, the creation stands, and the partition opens at its next use once the
cause is gone, without a restart (``core.shard.partition_files``)."""

from __future__ import annotations

import errno
import logging

import pytest

from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.core.wire.identifier import Identifier
from lurcher.core.wire.requests.messages.poll_messages import PollMessages
from lurcher.core.wire.requests.messages.send_messages import SendMessages
from lurcher.core.wire.requests.streams.create_stream import CreateStream
from lurcher.core.wire.requests.topics.create_topic import CreateTopic
from lurcher.core.wire.values.consumer import Consumer
from lurcher.core.wire.values.partitioning import Partitioning
from lurcher.core.wire.values.polling import PollingStrategy
from tests.unit.shard.harness import ShardHarness

S, T = Identifier.parse("orders"), Identifier.parse("eu")


class OutOfDescriptors:
    """Stands in for ``Shard.open_partition`` and fails with EMFILE while ``failing``."""

    def __init__(self, open_partition) -> None:
        self.open_partition = open_partition
        self.failing = True

    def __call__(self, topic, partition_id):
        if self.failing:
            raise OSError(errno.EMFILE, "Too many open files (injected)")
        return self.open_partition(topic, partition_id)


def send(harness: ShardHarness, session, payload: bytes):
    batch = MessageBatch.build([payload]).writable()
    return harness.call(session, SendMessages(S, T, Partitioning.partition(0), batch))


async def test_partition_not_opened_at_creation_opens_when_next_used(
        harness: ShardHarness, caplog: pytest.LogCaptureFixture) -> None:
    root = await harness.login()
    await harness.call(root, CreateStream("orders"))
    out = OutOfDescriptors(harness.shard.open_partition)
    harness.shard.open_partition = out
    with caplog.at_level(logging.ERROR):
        await harness.call(root, CreateTopic(S, 1, 1, 0, 0, 0, "eu"))
    assert "cannot be opened now" in caplog.text and "Traceback" not in caplog.text
    with pytest.raises(IggyError) as refused:
        await send(harness, root, b"still out of descriptors")
    assert refused.value.status == ErrorCode.CANNOT_CREATE_PARTITION
    out.failing = False
    await send(harness, root, b"descriptors back")
    polled = await harness.call(root, PollMessages(
        Consumer.of(1), S, T, 0, PollingStrategy.offset(0), 10))
    assert [m.payload for m in polled.messages()] == [b"descriptors back"]
