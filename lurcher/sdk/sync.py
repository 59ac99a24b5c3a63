"""``SyncClient``: a blocking facade over ``Client`` for scripts and notebooks.

The async client lives on a private event loop (uvloop when installed) in a daemon thread;
every public coroutine method of ``Client`` is exposed as a blocking method with the same
arguments and result (``sync.create_stream("s")``), raising the same IggyError. Works
inside a running event loop too (e.g. Jupyter), since nothing runs on the caller's loop.
``run(coro_fn)`` runs any coroutine function against the underlying client.

``timeout_s`` bounds every blocking call: past it the call raises IggyError TASK_TIMEOUT
and its coroutine is cancelled on the loop (a request it had under way drops its
connection, so the next call reconnects); an interrupted call (KeyboardInterrupt) is
cancelled the same way. A send that timed out may or may not have been stored. Calls may
come from several threads: they run one after another on the client's loop. ``close``
(idempotent, from any thread) stops the loop's thread; a call after it raises IggyError
NOT_CONNECTED. A SyncClient never closed is closed the same way when it is garbage
collected, or at interpreter exit (``weakref.finalize``): its thread, loop and connection
never outlive it (the thread is a daemon, so it never holds the exit back either). That
close is bounded by the client's ``timeout_s`` of the moment (it may be changed after
construction), as every call is.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from lurcher.core.event_loop import new_event_loop
from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.client import Client
from lurcher.sdk.config import DEFAULT_ADDRESS, ClientConfig
from lurcher.sdk.connstring import parse

T = TypeVar("T")


def _run(loop: asyncio.AbstractEventLoop) -> None:
    """The loop thread: run ``loop`` until stopped, then close it (calls made after that
    raise NOT_CONNECTED instead of waiting for a loop that no longer runs)."""
    try:
        loop.run_forever()
    finally:
        loop.close()


def _stop_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    loop.call_soon_threadsafe(loop.stop)
    thread.join()


@dataclass
class _Limits:
    """What a SyncClient shares with its finalizer (which must hold no reference to it)."""
    timeout_s: float | None


def _shut_down(loop: asyncio.AbstractEventLoop, thread: threading.Thread, client: Client,
               limits: _Limits) -> None:
    """Close ``client`` on ``loop`` (for at most ``limits.timeout_s``), then stop the loop
    (its thread closes it and ends). Raises IggyError TASK_TIMEOUT past ``timeout_s``."""
    timeout_s = limits.timeout_s
    if threading.current_thread() is thread:
        # collected by a garbage collection that ran on the loop's own thread: nothing can
        # be waited for here; the loop stops once the client is closed
        loop.create_task(client.close()).add_done_callback(lambda _: loop.stop())
        return
    future = asyncio.run_coroutine_threadsafe(client.close(), loop)
    try:
        future.result(timeout_s)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise IggyError(ErrorCode.TASK_TIMEOUT,
                        f"client not closed within timeout_s={timeout_s}") from None
    finally:
        _stop_loop(loop, thread)


class SyncClient:
    """``SyncClient(address, **config_fields)`` or ``SyncClient.from_connection_string(s)``;
    connects on construction (raises IggyError when it cannot)."""

    def __init__(self, address: str = DEFAULT_ADDRESS, *, config: ClientConfig | None = None,
                 timeout_s: float | None = None, **fields: Any) -> None:
        self._limits = _Limits(timeout_s)
        self._closing = threading.Lock()
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=_run, args=(self._loop,), name="lurcher-sdk",
                                        daemon=True)
        self._thread.start()
        try:
            self.client: Client = self._submit(self._make(address, config, fields))
        except BaseException:
            _stop_loop(self._loop, self._thread)
            raise
        # holds no reference to self: the client is closed when self is collected
        self._finalizer = weakref.finalize(self, _shut_down, self._loop, self._thread,
                                           self.client, self._limits)

    @property
    def timeout_s(self) -> float | None:
        """The bound of each blocking call and of ``close`` (None: no bound)."""
        return self._limits.timeout_s

    @timeout_s.setter
    def timeout_s(self, value: float | None) -> None:
        self._limits.timeout_s = value

    @staticmethod
    async def _make(address: str, config: ClientConfig | None, fields: dict) -> Client:
        client = Client(address, config=config, **fields)
        await client.connect()
        return client

    @classmethod
    def from_connection_string(cls, text: str, timeout_s: float | None = None) -> "SyncClient":
        """Raises IggyError INVALID_CONNECTION_STRING or a connection/login error."""
        return cls(config=parse(text), timeout_s=timeout_s)

    def _submit(self, coro: Awaitable[T]) -> T:
        """``coro``'s result, run on the loop. Raises its exception, or IggyError
        TASK_TIMEOUT past ``timeout_s`` (the coroutine is then cancelled), NOT_CONNECTED
        after ``close``."""
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # the loop is closed
            coro.close()  # type: ignore[attr-defined]
            raise IggyError(ErrorCode.NOT_CONNECTED, "client is closed") from None
        try:
            return future.result(self.timeout_s)
        except concurrent.futures.TimeoutError:
            if future.done():  # finished meanwhile, or raised a TimeoutError of its own
                return future.result()
            future.cancel()
            raise IggyError(ErrorCode.TASK_TIMEOUT,
                            f"no result within timeout_s={self.timeout_s}") from None
        except BaseException:
            future.cancel()
            raise

    def run(self, fn: Callable[[Client], Awaitable[T]]) -> T:
        """``fn(client)`` awaited on the client's loop; its result or exception."""
        return self._submit(fn(self.client))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.client, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return self._submit(attr(*args, **kwargs))
        return blocking

    def close(self) -> None:
        """Close the client and stop the loop thread. Idempotent. Raises IggyError
        TASK_TIMEOUT when the client did not close within ``timeout_s`` (the thread is
        stopped all the same)."""
        with self._closing:
            self._finalizer()

    def __enter__(self) -> "SyncClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
