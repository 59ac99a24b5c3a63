"""A big HTTP poll answer is turned into JSON off the event loop (real server, HTTP).

Its JSON costs Python work per message and per header: a poll of messages carrying
thousands of headers each took seconds, during which the shard's event loop answered
nothing else, not even a ping (found by the web console's review). Now such an answer is
rendered on the API's renderer thread and other requests go on meanwhile.
"""

from __future__ import annotations

import asyncio
import socket
import time
import types

import httpx

from lurcher.core.wire.batch import MessageBatch
from lurcher.core.wire.headers import HeaderKind, HeaderValue, encode_headers
from lurcher.transports.http.app import HttpApi
from lurcher.transports.http.server import HttpServer
from tests.support.server import LurcherServer
from tests.transports.conftest import make_client

MESSAGES, HEADERS = 60, 4000  # about 25 MB of JSON, seconds of Python work to render


async def _fill(server: LurcherServer) -> None:
    client = make_client(server, "tcp", username="iggy", password="iggy")
    await client.connect()
    try:
        await client.create_stream("laden")
        await client.create_topic("laden", "t", 1)
        block = encode_headers({HeaderValue(HeaderKind.STRING, b"k%d" % i):
                                HeaderValue(HeaderKind.STRING, b"v") for i in range(HEADERS)})
        batch = MessageBatch.build([b"x"] * MESSAGES, user_headers=[block] * MESSAGES)
        await client.send_messages("laden", "t", batch, 0)
    finally:
        await client.close()


async def test_pings_are_answered_while_a_big_poll_renders(plain_server: LurcherServer):
    await _fill(plain_server)
    async with httpx.AsyncClient(base_url=f"http://{plain_server.endpoints['http']}",
                                 timeout=120) as http:
        login = await http.post("/users/login", json={"username": "iggy", "password": "iggy"})
        auth = {"Authorization": f"Bearer {login.json()['access_token']['token']}"}
        started = time.monotonic()
        poll = asyncio.create_task(http.get(
            "/streams/laden/topics/t/messages", headers=auth,
            params={"consumer_id": 1, "partition_id": 0, "kind": "offset", "value": 0,
                    "count": MESSAGES}))
        longest = 0.0
        while not poll.done():
            sent = time.monotonic()
            assert (await http.get("/ping")).status_code == 200
            longest = max(longest, time.monotonic() - sent)
        answer = await poll
        took = time.monotonic() - started
    assert answer.status_code == 200 and answer.json()["count"] == MESSAGES
    assert len(answer.json()["messages"][0]["user_headers"]) == HEADERS
    # before: one ping waited for (nearly) the whole render, over 90% of the poll's time
    assert longest < took / 3, (longest, took)


async def test_closing_the_http_server_stops_the_renderer_thread():
    """The renderer thread ends with the server (it was left running, never shut down)."""
    api = HttpApi(None, None)
    api.renderer.submit(time.sleep, 0).result(5)  # the thread starts on first use
    threads = list(api.renderer._threads)
    assert threads and all(t.is_alive() for t in threads)
    with socket.socket() as sock:
        await HttpServer(types.SimpleNamespace(should_exit=False, started=False), sock,
                         api).wait_closed()
    for thread in threads:
        await asyncio.to_thread(thread.join, 5)
        assert not thread.is_alive()
