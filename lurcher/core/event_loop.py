"""Which event loop lurcher's processes run on: uvloop's where it is installed (a
dependency everywhere but Windows), else asyncio's default.

Every long-running process uses it (the server's shards, lurcher-mcp, the bench's actors,
the SDK's SyncClient thread), so they behave alike where it matters: a listener out of
descriptors is handled by libuv (the connections it cannot take are accepted and closed at
once, quietly), where asyncio's selector loop logs a traceback for every refused accept.
The SDK imports it, so it imports nothing of the server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """For ``asyncio.Runner(loop_factory=...)``: uvloop's loop when installed, else None
    (asyncio's default; said once in the log)."""
    try:
        import uvloop
    except ImportError:
        log.info("uvloop not available; using the default asyncio loop")
        return None
    return uvloop.new_event_loop


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new loop of ``loop_factory``'s kind (for a loop run on a thread of its own)."""
    factory = loop_factory()
    return factory() if factory is not None else asyncio.new_event_loop()
