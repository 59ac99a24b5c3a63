"""``SyncClient``: the blocking facade, from plain code and from inside a running loop."""

from __future__ import annotations

import asyncio

import pytest

from lurcher.sdk import ErrorCode, IggyError, SyncClient
from tests.sdk.conftest import root_connstring


def test_sync_client_round_trip(server) -> None:
    with SyncClient.from_connection_string(root_connstring(server), timeout_s=10) as client:
        client.ping()
        client.create_stream("sync")
        client.create_topic("sync", "t", 1)
        client.send_messages("sync", "t", [b"a", "b"], 0)
        polled = client.poll_messages("sync", "t", 0, "first", 10)
        assert [m.payload for m in polled.messages()] == [b"a", b"b"]
        assert client.get_stream("nope") is None
        with pytest.raises(IggyError) as err:
            client.create_stream("sync")
        assert err.value.code == ErrorCode.STREAM_NAME_ALREADY_EXISTS
        assert client.run(lambda c: c.get_streams())[0].name == "sync"
        assert client.config.address == server.tcp_address
    client.close()  # idempotent


async def test_sync_client_inside_a_running_loop(server) -> None:
    client = SyncClient(server.tcp_address, username="iggy", password="iggy")
    try:
        assert client.get_me().header.user_id == 0
    finally:
        client.close()
    await asyncio.sleep(0)


def test_sync_client_connection_failure_raises() -> None:
    with pytest.raises(IggyError) as err:
        SyncClient("127.0.0.1:1")
    assert err.value.code == ErrorCode.CANNOT_ESTABLISH_CONNECTION


def test_sync_client_from_several_threads_then_closed(server) -> None:
    """Calls from several threads share the loop; close from two threads at once closes
    once; a call after close is IggyError NOT_CONNECTED (it was RuntimeError 'Event loop
    is closed', with the coroutine never awaited)."""
    import threading

    client = SyncClient.from_connection_string(root_connstring(server), timeout_s=10)
    failures: list[BaseException] = []

    def run(work) -> None:
        try:
            work()
        except BaseException as e:  # reported by the assertion below
            failures.append(e)

    def pings() -> None:
        for _ in range(20):
            client.ping()

    for work, count in ((pings, 4), (client.close, 2)):
        threads = [threading.Thread(target=run, args=(work,)) for _ in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    with pytest.raises(IggyError) as err:
        client.ping()
    assert err.value.code == ErrorCode.NOT_CONNECTED
    assert not any(t.name == "lurcher-sdk" for t in threading.enumerate())
