"""The inter-shard bus (``core.shard.bus``) with two real endpoints in one process: a
handler that fails answers that one request with an error, which the requester gets as
``PeerRefused`` with the status and the handler's message (never as a reply without its
data), and the link between the shards stays open (the other pending and later requests are
unaffected)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from lurcher.core.shard.bus import Bus, Link, PeerRefused, Reply
from lurcher.core.shard.peers import MESSAGE_TYPES, Purge, StatsQuery
from lurcher.core.wire.error_codes import ErrorCode


def failing_purge(link: Link, msg: Purge) -> Reply:
    raise OSError(5, "Input/output error")  # e.g. a partition's files cannot be removed


async def failing_purge_later(link: Link, msg: Purge) -> Reply:
    raise OSError(5, "Input/output error")


def stats(link: Link, msg: StatsQuery) -> Reply:
    return Reply(rid=msg.rid, data=[[], []])


async def ask_after_a_failing_handler(purge_handler) -> None:
    namespace = f"lurcher-test-{uuid.uuid4().hex}"
    owner = Bus(namespace, 0, MESSAGE_TYPES, {Purge: purge_handler, StatsQuery: stats})
    asker = Bus(namespace, 1, MESSAGE_TYPES, {})
    await owner.start()
    try:
        with pytest.raises(PeerRefused, match="Input/output error") as refused:
            await asker.request(0, lambda rid: Purge(rid=rid, stream_id=1, topic_id=None))
        link = asker.links[0]
        answered = await asker.request(0, lambda rid: StatsQuery(rid=rid))
        assert refused.value.status == ErrorCode.ERROR
        assert answered.status == 0 and answered.data == [[], []]
        assert asker.links[0] is link and not link.task.done()
    finally:
        await asker.close()
        await owner.close()


def test_a_direct_handler_that_raises_answers_an_error_and_keeps_the_link():
    asyncio.run(ask_after_a_failing_handler(failing_purge))


def test_a_coroutine_handler_that_raises_answers_an_error_and_keeps_the_link():
    asyncio.run(ask_after_a_failing_handler(failing_purge_later))
