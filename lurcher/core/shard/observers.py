"""Command observers: what watches the dispatcher (metrics, tracing) without wrapping it.

An observer has ``on_command(code, status, duration_s)``, called exactly once per request
that reached the dispatcher: ``status`` 0 for success, the Iggy error code of an IggyError,
or ``UNEXPECTED_FAILURE`` for any other exception; ``duration_s`` includes the awaited part
of asynchronous handlers. An observer must not raise and must not block. With no observer
registered the dispatcher does no timing at all.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, Protocol, Sequence

from lurcher.core.shard.reply import is_awaitable
from lurcher.core.wire.errors import IggyError

UNEXPECTED_FAILURE = -1


class CommandObserver(Protocol):
    def on_command(self, code: int, status: int, duration_s: float) -> None:
        """One finished request of command ``code``."""


def status_of(exc: BaseException) -> int:
    return exc.status if isinstance(exc, IggyError) else UNEXPECTED_FAILURE


def _notify(observers: Sequence[CommandObserver], code: int, status: int,
            started: float) -> None:
    duration_s = time.perf_counter() - started
    for observer in observers:
        observer.on_command(code, status, duration_s)


def observed(observers: Sequence[CommandObserver], code: int, run: Callable[..., Any],
             *args: Any) -> Any:
    """``run(*args)`` (a result or an awaitable of one), reported to ``observers`` when it
    finishes. Re-raises what ``run`` raises."""
    started = time.perf_counter()
    try:
        result = run(*args)
    except BaseException as exc:
        _notify(observers, code, status_of(exc), started)
        raise
    if asyncio.isfuture(result):  # a send's write: told by a done callback, no coroutine
        result.add_done_callback(lambda done: _future_done(observers, code, started, done))
        return result
    if is_awaitable(result):
        return _observed_later(observers, code, started, result)
    _notify(observers, code, 0, started)
    return result


def _future_done(observers: Sequence[CommandObserver], code: int, started: float,
                 future: Any) -> None:
    if future.cancelled():
        _notify(observers, code, UNEXPECTED_FAILURE, started)
        return
    exc = future.exception()
    _notify(observers, code, 0 if exc is None else status_of(exc), started)


async def _observed_later(observers: Sequence[CommandObserver], code: int, started: float,
                          pending: Awaitable[Any]) -> Any:
    try:
        result = await pending
    except BaseException as exc:
        _notify(observers, code, status_of(exc), started)
        raise
    _notify(observers, code, 0, started)
    return result
