"""``SyncClient``: the blocking facade, from plain code and from inside a running loop."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time

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


def test_a_sync_client_never_closed_is_closed_when_collected(server) -> None:
    """Dropping a SyncClient without close left its loop thread running and its connection
    open (one more of each per client, for the life of the process)."""
    import gc

    watcher = SyncClient.from_connection_string(root_connstring(server), timeout_s=10)
    try:
        before = len(watcher.get_clients())
        client = SyncClient.from_connection_string(root_connstring(server), timeout_s=10)
        client.ping()
        thread = client._thread
        assert len(watcher.get_clients()) == before + 1
        del client
        gc.collect()
        thread.join(10)
        assert not thread.is_alive(), "the dropped client's loop thread still runs"
        deadline = time.monotonic() + 10
        while len(watcher.get_clients()) > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(watcher.get_clients()) == before, "its connection is still open"
    finally:
        watcher.close()


def test_a_sync_client_never_closed_is_closed_at_exit(server) -> None:
    """A script that ends without close exits (the loop thread is a daemon, and the
    finalizer closes the client at exit) without a warning or an error."""
    script = ("from lurcher.sdk import SyncClient\n"
              f"client = SyncClient.from_connection_string({root_connstring(server)!r})\n"
              "client.ping()\n")
    done = subprocess.run([sys.executable, "-X", "dev", "-c", script], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and without_slow_callbacks(done.stderr) == ""


def without_slow_callbacks(stderr: str) -> str:
    """``stderr`` less asyncio debug mode's timing lines ("Executing <Handle ...> took 0.2
    seconds": a loaded machine, not a fault of the script)."""
    return re.sub(r"(?m)^Executing <.*> took [0-9.]+ seconds\n", "", stderr)


def test_a_sync_client_finalized_on_its_own_loop_thread_ends_it(server) -> None:
    """A garbage collection may run the finalizer on the loop's thread, which cannot wait
    for itself: the client is closed there, the thread ends, and a later call raises
    NOT_CONNECTED (a stopped loop left open would take the call and never run it)."""
    client = SyncClient.from_connection_string(root_connstring(server), timeout_s=10)
    client._loop.call_soon_threadsafe(client._finalizer)
    client._thread.join(10)
    assert not client._thread.is_alive()
    with pytest.raises(IggyError) as err:
        client.ping()
    assert err.value.code == ErrorCode.NOT_CONNECTED
    client.close()


def test_close_is_bounded_by_the_timeout_s_set_after_construction(server) -> None:
    """``timeout_s`` bounds every call as it is set, but close() (the finalizer) kept the
    value given at construction: a client built without one and given one later could wait
    for ever on a close that does not finish."""
    client = SyncClient.from_connection_string(root_connstring(server))
    client.timeout_s = 0.2

    async def close_that_hangs() -> None:
        await asyncio.Event().wait()
    client.client.close = close_that_hangs
    outcome: list[BaseException | None] = []

    def close() -> None:
        try:
            client.close()
            outcome.append(None)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            outcome.append(e)
    closer = threading.Thread(target=close, daemon=True)
    closer.start()
    closer.join(30)
    try:
        assert not closer.is_alive(), "close() did not return: timeout_s was not applied"
        assert isinstance(outcome[0], IggyError) and outcome[0].code == ErrorCode.TASK_TIMEOUT
        assert "timeout_s=0.2" in str(outcome[0])
    finally:
        if closer.is_alive():  # the old code: end the loop so the test run can go on
            client._loop.call_soon_threadsafe(client._loop.stop)
