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
NOT_CONNECTED.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from lurcher.core.wire.error_codes import ErrorCode
from lurcher.core.wire.errors import IggyError
from lurcher.sdk.client import Client
from lurcher.sdk.config import DEFAULT_ADDRESS, ClientConfig
from lurcher.sdk.connstring import parse

T = TypeVar("T")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class SyncClient:
    """``SyncClient(address, **config_fields)`` or ``SyncClient.from_connection_string(s)``;
    connects on construction (raises IggyError when it cannot)."""

    def __init__(self, address: str = DEFAULT_ADDRESS, *, config: ClientConfig | None = None,
                 timeout_s: float | None = None, **fields: Any) -> None:
        self.timeout_s = timeout_s
        self._closing = threading.Lock()
        self._loop = _new_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="lurcher-sdk",
                                        daemon=True)
        self._thread.start()
        try:
            self.client: Client = self._submit(self._make(address, config, fields))
        except BaseException:
            self._stop_loop()
            raise

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
        """Close the client and stop the loop thread. Idempotent."""
        with self._closing:
            if self._loop.is_closed():
                return
            try:
                self._submit(self.client.close())
            finally:
                self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def __enter__(self) -> "SyncClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
