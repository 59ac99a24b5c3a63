"""The shard's idle polling between requests (``Dispatcher.poll_between_requests``,
``system.idle_poll``): every dispatched request, refused ones included, is an event of the
poll window, so requests that follow each other closely keep the loop polling and a max of
0 never polls."""

from __future__ import annotations

from lurcher.core.idle_poll import LoopPoller
from lurcher.core.wire.requests.system.ping import Ping
from lurcher.core.wire.requests.streams.get_streams import GetStreams
from tests.support.fake_loop import FakeLoop

US = 1e-6


async def requests_100us_apart(harness, max_s: float) -> LoopPoller:
    loop = FakeLoop()
    poller = LoopPoller(loop.call_soon, clock=loop.clock)
    harness.shard.dispatcher.poll_between_requests(poller, max_s)
    session = harness.connect()
    for request in [Ping(), GetStreams()] * 4:  # GetStreams unauthenticated: refused
        await harness.exchange(session, request)
        loop.now += 100 * US
    return poller


async def test_requests_close_together_keep_the_loop_polling(harness):
    poller = await requests_100us_apart(harness, 500 * US)
    assert poller.polling and harness.shard.dispatcher.idle_window.window_s > 0


async def test_a_maximum_of_0_never_polls(harness):
    poller = await requests_100us_apart(harness, 0)
    assert not poller.polling and harness.shard.dispatcher.idle_poller is None
