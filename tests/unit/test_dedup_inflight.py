"""Deduplication with appends in flight: a copy sent while the first is still being written
is dropped; ids of an append that fails are forgotten, so the send can be retried."""

import asyncio

from lurcher.core.shard.dedup import Deduplication
from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError

KEY = (1, 1, 0)


def batch() -> MessageBatch:
    return MessageBatch.build([b"a", b"b"], ids=[11, 12]).writable()


async def test_copy_sent_while_the_first_is_in_flight_is_a_duplicate():
    dedup = Deduplication(True, 0, 60_000_000)
    loop = asyncio.get_running_loop()
    written, stored = loop.create_future(), []

    def store(b):
        stored.append(b)
        return written

    first = asyncio.ensure_future(dedup.append(KEY, batch(), 0, store))
    assert dedup.append(KEY, batch(), 1, store) is None and len(stored) == 1
    written.set_result(None)
    await first


async def test_ids_of_a_failed_append_are_forgotten():
    dedup = Deduplication(True, 0, 60_000_000)
    failed = asyncio.get_running_loop().create_future()
    failed.set_exception(IggyError(ErrorCode.CANNOT_WRITE_TO_FILE, "EIO"))
    try:
        await dedup.append(KEY, batch(), 0, lambda b: failed)
    except IggyError:
        pass
    stored = []
    assert dedup.append(KEY, batch(), 1, lambda b: stored.append(b)) is None
    assert len(stored) == 1  # accepted again: the retry is stored
