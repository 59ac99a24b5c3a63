"""The consumer under failure: a handler that raises inside ``async with Consumer`` does not
get its message committed, so a restarted consumer is handed that message again (at least
once), in every auto-commit mode that commits, alone and in a group; a purged partition is
read from its new start; failing interval commits are logged; a group member's commit of a
partition a rebalance gave to another member forgets that partition."""

from __future__ import annotations

import asyncio

import pytest

from lurcher.sdk import Client, Consumer, ErrorCode, IggyError
from tests.sdk.conftest import raised_within, root_connstring


class HandlerFailed(Exception):
    pass


@pytest.mark.parametrize("group", [None, "g"], ids=["plain", "group"])
@pytest.mark.parametrize("mode", ["each_message", "each_batch", "interval:20ms"])
async def test_message_whose_handler_raised_is_delivered_again(sdk_client, mode, group) -> None:
    await sdk_client.create_stream("crash")
    await sdk_client.create_topic("crash", "t", 1)
    await sdk_client.send_messages("crash", "t", [b"%d" % i for i in range(10)], 0)

    def consumer() -> Consumer:
        return Consumer(sdk_client, "crash", "t", group, consumer_id="c1", batch_length=4,
                        auto_commit=mode, poll_interval_s=0.01)

    handled = []
    with pytest.raises(HandlerFailed):
        async with consumer() as first:
            async for message in first:
                if message.offset == 5:
                    await asyncio.sleep(0.1)  # an interval commit falls inside the handler
                    raise HandlerFailed
                handled.append(message.offset)
    assert handled == [0, 1, 2, 3, 4]
    async with consumer() as second:
        resumed = await anext(aiter(second))
    assert resumed.offset == 5, "the message whose handler failed was committed (lost)"


@pytest.mark.parametrize("group", [None, "g"], ids=["plain", "group"])
@pytest.mark.parametrize("mode", ["each_message", "disabled"])
async def test_a_running_consumer_reads_a_purged_partition_from_its_new_start(
        sdk_client, group, mode) -> None:
    """A purge restarts offsets at 0. The consumer that had read offsets 0..9 asked for
    offset 10 on (or skipped what its group poll returned up to 9), so the first ten new
    messages were skipped without a word; committing offset 9 failed with INVALID_OFFSET
    at every message."""
    await sdk_client.create_stream("purged")
    await sdk_client.create_topic("purged", "t", 1)
    await sdk_client.send_messages("purged", "t", [b"old-%d" % i for i in range(10)], 0)
    async with Consumer(sdk_client, "purged", "t", group, consumer_id="c1", batch_length=4,
                        auto_commit=mode, poll_interval_s=0.01) as consumer:
        messages = aiter(consumer)
        assert [(await anext(messages)).payload for _ in range(10)] == [
            b"old-%d" % i for i in range(10)]
        await sdk_client.purge_topic("purged", "t")
        await sdk_client.send_messages("purged", "t", [b"new-%d" % i for i in range(3)], 0)
        got = [(await asyncio.wait_for(anext(messages), 5)).payload for _ in range(3)]
    assert got == [b"new-0", b"new-1", b"new-2"]


async def test_a_failing_interval_commit_is_logged_once(sdk_client, monkeypatch, caplog) -> None:
    """The interval task's failures were swallowed without a word: offsets silently not
    stored, every message read again at the next start."""
    await sdk_client.create_stream("ic")
    await sdk_client.create_topic("ic", "t", 1)
    await sdk_client.send_messages("ic", "t", [b"%d" % i for i in range(3)], 0)

    async def refused(*args, **kwargs):
        raise IggyError(ErrorCode.UNAUTHORIZED, "store_consumer_offset")

    monkeypatch.setattr(sdk_client, "store_consumer_offset", refused)
    consumer = Consumer(sdk_client, "ic", "t", partition=0, strategy="first",
                        auto_commit="interval:10ms", poll_interval_s=0.01)
    await consumer.init()
    messages = aiter(consumer)
    for _ in range(3):
        await anext(messages)
    consumer._consume_in_hand()  # the third message is handled: there is an offset to store
    await asyncio.sleep(0.2)
    consumer._stop.set()
    await consumer._committer
    warnings = [r for r in caplog.records if "storing offsets failed" in r.getMessage()]
    assert len(warnings) == 1 and "Unauthorized" in warnings[0].getMessage()


async def test_a_commit_forgets_a_partition_moved_to_another_member(sdk_client, server) -> None:
    """The server answers NotResolvedConsumer (Iggy 0.8) to a member storing the offset of
    a partition it is no longer assigned: the commit forgets that partition, stores the
    others and raises nothing."""
    await sdk_client.create_stream("moved")
    await sdk_client.create_topic("moved", "t", 2)
    for p in range(2):
        await sdk_client.send_messages("moved", "t", [b"%d-%d" % (p, i) for i in range(3)], p)
    other = Client.from_connection_string(root_connstring(server), heartbeat_interval_s=None)
    await other.connect()
    async with Consumer(sdk_client, "moved", "t", "g", batch_length=3, auto_commit="disabled",
                        poll_interval_s=0.01) as first:
        messages = aiter(first)
        read = [await anext(messages) for _ in range(6)]
        assert sorted({m.partition_id for m in read}) == [0, 1]
        await other.join_consumer_group("moved", "t", "g")   # partition 1 waits for a commit
        await sdk_client.create_partitions("moved", "t", 1)   # a full rebalance moves it
        await first.commit()
        assert (await sdk_client.get_consumer_offset("g", "moved", "t", 0, group=True)
                ).stored_offset == 2
        assert await sdk_client.get_consumer_offset("g", "moved", "t", 1, group=True) is None
    await other.close()


@pytest.mark.parametrize("group", [None, "g"], ids=["plain", "group"])
@pytest.mark.parametrize("mode", ["interval:20ms", "each_message"])
async def test_close_with_a_timeout_ends_while_the_server_is_down(server_factory, mode,
                                                                  group) -> None:
    """A consumer with an offset to store when its server dies: the final commit (and an
    interval committer stuck in its own) waits while the client reconnects for ever
    (reconnection_retries is unlimited), so close never ended. close(timeout_s) ends with
    TASK_TIMEOUT and stops the committer, a group member's too (whose leaving the group,
    run after the cancelled commit, is bounded by the same timeout)."""
    server = server_factory()
    client = Client.from_connection_string(
        root_connstring(server, reconnection_interval="50ms", heartbeat_interval="1h"))
    await client.create_stream("dead")
    await client.create_topic("dead", "t", 1)
    await client.send_messages("dead", "t", [b"a", b"b"], 0)
    consumer = Consumer(client, "dead", "t", group, partition=None if group else 0,
                        strategy="first", auto_commit=mode, poll_interval_s=0.01)
    messages = aiter(consumer)
    assert (await anext(messages)).payload == b"a"
    server.kill()
    error = await raised_within(consumer.close(timeout_s=0.3))
    assert isinstance(error, IggyError) and error.code == ErrorCode.TASK_TIMEOUT
    assert consumer._committer is None
    await client.close()
